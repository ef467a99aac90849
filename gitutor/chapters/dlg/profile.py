"""Settings of notebook 01_dlg (Zhu et al. 2019, §4–5 and the DLG public code; the reproduction report §6).

The main setting is the paper's: DLG LeNet for 100 classes, real CIFAR-100 images at 32×32 with their true
labels (quick profile: foolbox's 20 CIFAR-100 test samples, offline; seed ``s`` attacks sample ``s``), up to
300 L-BFGS steps. The seed study runs ``gitutor.attacks.dlg`` once per seed at that setting (distinct
seeds attack distinct images) for the whole 300 steps: no stop rule. A run *matched the client's gradient*
when its final gradient distance is below ``match_loss``, a criterion read after the run; failures (distance
at or above it) are rerun from a new dummy start, as an attacker who sees the distance would. The page
shows the study's median run. DLG §5's defenses are judged by a recorded study (``book/studies/01_defenses.json``,
:mod:`.defense_study`); the page runs one of its trials live (``defense_demo`` for ``defense_iterations`` steps:
the study's 300 unless a budget cuts it). The batch and MNIST sweeps use 16×16 images (CPU budget). One 32×32 L-BFGS step of ``dlg`` (up to 20 evaluations of the distance) costs about
0.2 s of one CPU core, at 16×16 hardly less.

Criteria (dB): ``recognisable_psnr`` is the book's one "recognisable",
:data:`gitutor.controls.RECOGNISABLE_PSNR` (30 dB) — above what a flat image of each sample's mean colour,
its 4×4 thumbnail enlarged, the batch mean, a different photograph and DLG's own N(0, 1) start score on
every one of the 20 CIFAR-100 samples (the notebook computes these controls and checks the threshold
against them with :func:`gitutor.controls.check_threshold`); ``success_psnr`` =
40 — near pixel-exact, DLG's "pixel-wise accurate". The full profile runs 20 seeds of torchvision's
CIFAR-100 and 32×32 everywhere.
"""

from gitutor.controls import RECOGNISABLE_PSNR

QUICK = {
    "torch_threads": 1,  # pinned: LeNet-sized work is fastest single-threaded, same numbers anywhere
    "image_size": 32,
    "num_classes": 100,  # DLG LeNet for CIFAR-100
    "iterations": 300,  # L-BFGS steps of the main setting (the paper's 300)
    "record_every": 10,
    "data": "foolbox's 20 real CIFAR-100 test samples with their true labels, 32×32 (the DLG paper's data)",
    "source": "cifar100_samples",  # gitutor.data.load("cifar100"): seed s attacks sample s
    "extra_sources": [
        "mnist_samples"
    ],  # foolbox's real MNIST samples (the report's MNIST)
    "progress": False,  # no progress bars in the rendered book
    # seed study at the main setting; the page shows its median run
    # quick: 6 live runs; the recorded defense study holds all 20 images
    "seeds": list(range(6)),
    # a criterion, never a stop rule: a run whose final gradient distance is below this
    # matched the client's gradient (the claim's test; the others are the failures rerun)
    "match_loss": 1e-5,
    "restart_offset": 1000,  # a failed seed restarts from dummy seed + this
    "sweep_image_size": 16,  # batch and MNIST sweeps on 16×16 images (CPU budget)
    "batch_sizes": [2, 4],
    "batch_iterations": 50,
    "extra_iterations": 50,
    "restart_limit": 2,  # quick: rerun at most the first 2 failed seeds (CPU budget); full: all
    # the page's live defended run: one trial of the recorded defense study (its 300 steps)
    "defense_demo": {"kind": "prune", "level": 0.3},
    "defense_iterations": 300,
    "ladder_psnr": [
        20.0,
        31.0,
    ],  # dB: pixel noise at these PSNRs beside the controls (threshold figure)
    "thumbnail": 4,  # px: side of the thumbnail control
    "success_psnr": 40.0,  # dB: near pixel-exact (DLG's "pixel-wise accurate")
    "recognisable_psnr": RECOGNISABLE_PSNR,  # dB: the book's one "recognisable" (gitutor.controls)
}

FULL = {
    **QUICK,
    "torch_threads": None,  # leave torch's default (GPU run)
    "record_every": 20,
    "data": "CIFAR-100 and MNIST test images via torchvision",
    "source": "cifar100",
    "extra_sources": ["mnist"],
    "progress": True,
    "extra_iterations": 300,
    "seeds": list(range(20)),
    "batch_sizes": [1, 2, 4, 8],
    "batch_iterations": 300,
    "restart_limit": None,
    "sweep_image_size": 32,
}

#: Budgets applied on top of a profile by the notebook's ``BUDGET`` parameter (``get_profile(..., budget=)``); ``"smoke"`` runs the
#: profile's code path for a handful of L-BFGS steps (``make smoke``).
BUDGETS = {
    "smoke": {
        "torch_threads": 1,
        "seeds": [0, 1],
        "iterations": 4,
        "record_every": 2,
        "batch_sizes": [2],
        "batch_iterations": 2,
        "extra_iterations": 5,
        "defense_iterations": 2,
    },
}
#: What ``DATA_ROOT = "bundled"`` puts in place of the torchvision datasets (offline, no download).
BUNDLED = {
    "source": "cifar100_samples",
    "extra_sources": ["mnist_samples"],
    "data": "foolbox's 20 CIFAR-100 and MNIST samples (offline substitute for the torchvision test sets)",
}


def chapter_settings(cfg, budget: str | None = None, data_root: str = "data"):
    """The notebook's settings: the profile of ``cfg`` with :data:`BUDGETS` ``[budget]``
    (:func:`gitutor.chapters.get_profile`) and, when ``data_root == "bundled"``, the bundled sources of
    :data:`BUNDLED` in place of the datasets.

    Raises:
        ValueError: naming ``BUDGET`` for an unknown budget name.
    """
    from gitutor.chapters import get_profile

    cfg = (
        cfg if budget is None else get_profile(cfg.notebook, cfg.profile, budget=budget)
    )
    return cfg.replace(**BUNDLED) if data_root == "bundled" else cfg


#: Papermill parameters of ``make smoke`` (scripts/smoke.py): the profile's code path, offline, a few steps.
SMOKE_PARAMETERS = {"DATA_ROOT": "bundled", "BUDGET": "smoke"}
