"""Settings of notebook 01_dlg (Zhu et al. 2019, §4–5 and the DLG public code; the reproduction report §6).

The main setting is the paper's: DLG LeNet, 32×32 images, 300 L-BFGS steps. The seed study (with and
without the strong-Wolfe line search) runs at that main setting; the quick profile affords 2 seeds there
(one 32×32 attack of 300 steps costs about 45 s of one CPU core), so the chapter executes in about three
to four minutes on two CPU cores; its batch, data and defense sweeps use 16×16 images with 50 steps.
The full profile runs 10 seeds and 32×32 everywhere.
"""

QUICK = {
    "torch_threads": 1,              # pinned: LeNet-sized work is fastest single-threaded, same numbers anywhere
    "image_size": 32,
    "num_classes": 100,              # DLG LeNet for CIFAR-100
    "iterations": 300,               # L-BFGS steps of the main setting (the paper's 300)
    "record_every": 10,
    "data": "whole photographs bundled with scikit-image, resized to 32×32",
    "source": "photos",              # CIFAR-100 stand-in
    "extra_sources": ["digits"],     # scikit-learn digits, an MNIST stand-in
    "progress": False,               # no progress bars in the rendered book
    "known_iterations": 30,          # label-known run (iDLG setting), compared at the same step
    "seeds": [0, 1],                 # seed study at the main setting, default and strong-Wolfe L-BFGS
    "sweep_image_size": 16,          # batch, data and defense sweeps on 16×16 images (CPU budget)
    "batch_sizes": [2, 4],
    "batch_iterations": 50,
    "extra_iterations": 50,
    "prune_rates": [0.1, 0.3],
    "noise_variances": [1e-4, 1e-2],
    "defense_iterations": 50,
    "success_psnr": 30.0,            # dB: a run "succeeds" (near pixel-exact; DLG's claim)
    "recognisable_psnr": 20.0,       # dB (MSE ≤ 0.01): the image is still plainly recognisable
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
    "seeds": list(range(10)),
    "batch_sizes": [1, 2, 4, 8],
    "batch_iterations": 300,
    "prune_rates": [0.01, 0.1, 0.2, 0.3, 0.5, 0.7],
    "noise_variances": [1e-4, 1e-3, 1e-2, 1e-1],
    "defense_iterations": 300,
    "sweep_image_size": 32,
}

#: Budgets applied on top of a profile by the notebook's ``BUDGET`` parameter (``get_profile(..., budget=)``); ``"smoke"`` runs the
#: profile's code path for a handful of L-BFGS steps (``make smoke``).
BUDGETS = {
    "smoke": {"torch_threads": 1, "seeds": [0, 1], "iterations": 4, "record_every": 2, "known_iterations": 4, "batch_sizes": [2],
              "batch_iterations": 2, "extra_iterations": 5, "prune_rates": [0.1], "noise_variances": [1e-2],
              "defense_iterations": 2},
}
#: What ``DATA_ROOT = "bundled"`` puts in place of the torchvision datasets (offline, no download).
BUNDLED = {"source": "photos", "extra_sources": ["digits"],
           "data": "bundled photographs and scikit-learn digits (offline substitute for CIFAR-100 and MNIST)"}


def chapter_settings(cfg, budget: str | None = None, data_root: str = "data"):
    """The notebook's settings: the profile of ``cfg`` with :data:`BUDGETS` ``[budget]``
    (:func:`gitutor.profiles.get_profile`) and, when ``data_root == "bundled"``, the bundled sources of
    :data:`BUNDLED` in place of the datasets.

    Raises:
        ValueError: naming ``BUDGET`` for an unknown budget name.
    """
    from gitutor.profiles import get_profile

    cfg = cfg if budget is None else get_profile(cfg.notebook, cfg.profile, budget=budget)
    return cfg.replace(**BUNDLED) if data_root == "bundled" else cfg


#: Papermill parameters of ``make smoke`` (scripts/smoke.py): the profile's code path, offline, a few steps.
SMOKE_PARAMETERS = {"DATA_ROOT": "bundled", "BUDGET": "smoke"}
