"""Chapter 03's ImageNet headline over other draws of the augmented views (a recorded study; review46 03-M1:
the page's interval covers one bank of views).

    python3 scripts/bank_study_03.py                 # the book's record: banks 0 to 9 (one thread)
    python3 scripts/bank_study_03.py --banks 20      # more banks (another record's path: --record)

The page draws one bank of augmented views per photograph (:func:`~gitutor.chapters.cv_batch_labels.imagenet.
view_bank` with the page's seed) and attacks ``imagenet_trials`` batches drawn from it; its 95 % interval
covers which batches are drawn, not which views. This study runs the page's headline — the same network,
photographs, batch recipe and batch generator — once per bank seed 0, 1, …, and records, per bank and
batch, whether ours (Stage I), Eq. 6's exhaustive minimum and Eq. 6 with p = 0 imposed get the exact
counts. Bank 0 is the page's own bank: the page compares its own flags with the record's before it shows
the record (:func:`gitutor.chapters.cv_batch_labels.view_banks.read_record`). Writes the record, with
provenance, to ``book/studies/03_view_banks.json`` atomically. Commit first: the record names the commit.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from journaled import code_version, run_provenance  # noqa: E402

OUT = ROOT / "book" / "studies" / "03_view_banks.json"
SEED = 0  # the page's SEED: its bank is bank 0, its batches come from make_generator(SEED + 5)
BANKS = 10


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--banks", type=int, default=BANKS, help="bank seeds 0 … banks − 1")
    parser.add_argument("--record", type=Path, default=OUT, help="the record to write")
    args = parser.parse_args()
    if args.banks < 2:
        parser.error("--banks must be at least 2 (bank 0 is the page's own)")

    import gitutor
    from gitutor.chapters.cv_batch_labels import imagenet
    from gitutor.chapters.cv_batch_labels.view_banks import SETTINGS
    from gitutor.files import write_json
    from gitutor.models import pretrained

    cfg = gitutor.get_profile("03_cv_batch_labels", "quick")
    commit, dirty, _ = code_version(ROOT)
    command = shlex.join(["python3", "scripts/bank_study_03.py", *sys.argv[1:]])
    start = time.perf_counter()
    banks = []
    with imagenet.torch_threads(cfg.imagenet_threads):
        model = pretrained("efficientnet_lite0")
        for bank_seed in range(args.banks):
            began = time.process_time()
            bank = imagenet.view_bank(model, cfg, SEED + bank_seed, "cpu")
            run = imagenet.imagenet_trials(
                model,
                bank,
                cfg,
                cfg.batch_size,
                cfg.imagenet_trials,
                cfg.max_classes,
                gitutor.make_generator(SEED + 5),
            )
            flags = {
                "ours": [float(s["exact"]) for s in run["scores"]["ours"]],
                "exhaustive": [float(s["exact"]) for s in run["scores"]["Eq. 6 exhaustive"]],
                "premise": [float(v) for v in run["premise"]],
            }
            banks.append({"bank_seed": SEED + bank_seed, **flags})
            rate = sum(flags["ours"]) / len(flags["ours"])
            print(f"bank {bank_seed}: ours exact {rate:.2f} ({time.process_time() - began:.0f} s)", flush=True)
    wall = time.perf_counter() - start
    record = {
        "study": "03_view_banks",
        "profile": "quick",
        "seed": SEED,
        "settings": {k: getattr(cfg, k) for k in SETTINGS},
        "banks": banks,
        **run_provenance(commit, dirty, command, wall),
    }
    write_json(args.record, record, indent=1)
    print(f"{wall:.0f} s -> {args.record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
