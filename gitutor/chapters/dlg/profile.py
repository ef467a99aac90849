"""Settings of notebook 01_dlg (Zhu et al. 2019, §4–5 and the DLG public code; the reproduction report §6).

The main setting is the paper's: DLG LeNet, 32×32 images, up to 300 L-BFGS steps. The seed study runs
10 seeds at that setting (the headline: on how many DLG recovers a recognisable image), all at once in one
stacked network (``gitutor.attacks.batched_dlg``); a run of the study stops once its gradient distance is
below ``stop_loss`` (DLG has found the image: the stopped runs are recognisable, though not all
pixel-exact; the page shows their PSNR), which halves the cost of a success. Failures (distance still high after 300 steps) are rerun
from a new dummy start, as an attacker who sees the distance would. The batch, data and defense sweeps use
16×16 images, where DLG converges within about 35 steps. One 32×32 L-BFGS step of one run costs about
0.075 s of one CPU core.

Criteria (dB): ``recognisable_psnr`` = 15 — at 15 dB of pixel noise each bundled photograph is plainly
recognisable and at 9 dB none is (the chapter's ladder figure shows it); ``success_psnr`` = 30 — near
pixel-exact, DLG's "pixel-wise accurate" (the main run, which runs every step). The full profile runs 20 seeds and 32×32 everywhere.
"""

QUICK = {
    "torch_threads": 1,              # pinned: LeNet-sized work is fastest single-threaded, same numbers anywhere
    "image_size": 32,
    "num_classes": 100,              # DLG LeNet for CIFAR-100
    "iterations": 300,               # L-BFGS steps of the main setting (the paper's 300)
    "record_every": 10,
    "data": "whole photographs of real scenes bundled with scikit-image, resized to 32×32",
    "source": "photos",              # CIFAR-100 stand-in
    "extra_sources": ["digits"],     # scikit-learn digits, an MNIST stand-in
    "progress": False,               # no progress bars in the rendered book
    "known_iterations": 30,          # label-known run (iDLG setting), compared at the same step
    "seeds": list(range(10)),        # seed study at the main setting (seed 0 is the main run)
    "stop_loss": 1e-4,               # seed study: stop once the gradient distance is below this
    "restart_offset": 1000,          # a failed seed restarts from dummy seed + this
    "sweep_image_size": 16,          # batch, data and defense sweeps on 16×16 images (CPU budget)
    "batch_sizes": [2, 4],
    "batch_iterations": 50,
    "extra_iterations": 50,
    "prune_rates": [0.1, 0.2, 0.3, 0.5, 0.7],       # DLG Fig. 7's pruning ratios from 10 %
    "noise_variances": [1e-4, 1e-3, 1e-2, 1e-1],    # DLG Fig. 7's Gaussian noise variances
    "defense_iterations": 40,
    "ladder_psnr": [9.0, 12.0, 15.0, 18.0, 24.0],   # dB: the photograph at these PSNRs (threshold figure)
    "success_psnr": 30.0,            # dB: near pixel-exact (DLG's "pixel-wise accurate")
    "recognisable_psnr": 15.0,       # dB (MSE ≤ 0.032): the image is plainly recognisable (ladder figure)
}

FULL = {
    **QUICK,
    "torch_threads": None,           # leave torch's default (GPU run)
    "record_every": 20,
    "data": "CIFAR-100 and MNIST test images via torchvision",
    "source": "cifar100",
    "extra_sources": ["mnist"],
    "progress": True,
    "known_iterations": 300,
    "extra_iterations": 300,
    "seeds": list(range(20)),
    "batch_sizes": [1, 2, 4, 8],
    "batch_iterations": 300,
    "prune_rates": [0.01, 0.1, 0.2, 0.3, 0.5, 0.7],
    "defense_iterations": 300,
    "sweep_image_size": 32,
}

#: Budgets applied on top of a profile by the notebook's ``BUDGET`` parameter (``get_profile(..., budget=)``); ``"smoke"`` runs the
#: profile's code path for a handful of L-BFGS steps (``make smoke``).
BUDGETS = {
    "smoke": {"torch_threads": 1, "seeds": [0, 1], "iterations": 4, "record_every": 2, "known_iterations": 4, "batch_sizes": [2],
              "batch_iterations": 2, "extra_iterations": 5, "prune_rates": [0.1, 0.5], "noise_variances": [1e-2],
              "defense_iterations": 2},
}
#: What ``DATA_ROOT = "bundled"`` puts in place of the torchvision datasets (offline, no download).
BUNDLED = {"source": "photos", "extra_sources": ["digits"],
           "data": "bundled photographs and scikit-learn digits (offline substitute for CIFAR-100 and MNIST)"}


def chapter_settings(cfg, budget: str | None = None, data_root: str = "data"):
    """The notebook's settings: the profile of ``cfg`` with :data:`BUDGETS` ``[budget]``
    (:func:`gitutor.chapters.get_profile`) and, when ``data_root == "bundled"``, the bundled sources of
    :data:`BUNDLED` in place of the datasets.

    Raises:
        ValueError: naming ``BUDGET`` for an unknown budget name.
    """
    from gitutor.chapters import get_profile

    cfg = cfg if budget is None else get_profile(cfg.notebook, cfg.profile, budget=budget)
    return cfg.replace(**BUNDLED) if data_root == "bundled" else cfg


#: Papermill parameters of ``make smoke`` (scripts/smoke.py): the profile's code path, offline, a few steps.
SMOKE_PARAMETERS = {"DATA_ROOT": "bundled", "BUDGET": "smoke"}
