"""Train a trained substitute of chapters 03–04 (gitutor.models.substitute.RECIPES) offline.

    python scripts/train_substitute.py resnet20   # ships: gitutor/models/weights/ (~1 MB)
    python scripts/train_substitute.py resnet34   # ~85 MB, kept out of git: build/substitutes/

Deterministic (seeded, one torch thread). The ResNet-20's sha256 is checked by
tests/test_substitute.py; the ResNet34's file name carries the hash of the recipe module, so a
changed recipe trains a new file.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gitutor.models.substitute import (RECIPES, save_substitute, substitute_path,  # noqa: E402
                                       train_substitute)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=sorted(RECIPES))
    parser.add_argument("--force", action="store_true", help="retrain even if the file exists")
    args = parser.parse_args()
    path = substitute_path(args.name)
    if path.is_file() and not args.force:
        print(f"{path} exists")
        return
    model, log = train_substitute(RECIPES[args.name], progress=sys.stderr.isatty())
    digest = save_substitute(model, log, path)
    print(f"{args.name}: {log['seconds']:.0f} s, last-batch loss {log['loss'][-1]:.3f}, "
          f"accuracy on 256 fresh crops {log['final_accuracy']:.3f}, sha256 {digest}\n{path}")


if __name__ == "__main__":
    main()
