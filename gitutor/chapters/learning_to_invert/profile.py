"""Settings of notebook 06_learning_to_invert (Wu et al. 2022, Learning To Invert, §4.1).

FULL is the paper's vision setting: CIFAR-10 (train split = auxiliary set, test split = targets,
through torchvision), untrained LeNet (Sigmoid, U(−0.5, 0.5), seed 1234) and ResNet20 (gradient
hashed to 50 %), MLP hidden size 3 000 (B = 1) / 10 000 (B = 4), Adam lr 1e-4, batch 256, at most
200 epochs (the paper: 200, lr ×0.1 after 150) under the book's stopping rule on the validation split
(lr ×0.1 once the validation loss has not fallen by 1 % for 5 epochs, stop once it has not for 5 more),
1 000 evaluation images, defenses none / sign / prune α = 0.99 /
Gaussian σ = 0.1. QUICK keeps the algorithm but shrinks everything to run on a 2-core CPU in a few
minutes: scikit-learn's 1 797 digits upscaled to 16×16 (grey), the same LeNet built for 16×16,
the gradient hashed to 25 % (the paper hashes only ResNet20), g_θ's input standardised (without it the
undefended g_θ trains far more slowly than the sign-compressed one: chapter 06 measures it), hidden
192 (B = 1) / 256 (B = 4), lr 2e-3 under the same stopping rule (cap 400 epochs), Inverting Gradients on 16
targets (B = 1) and 3 batches (B = 4) with 100 iterations (its best budget, chosen on auxiliary images, is
run on the 16 targets by ``scripts/ig_study_06.py``) and its settings per defense tuned on auxiliary images
(:mod:`gitutor.chapters.learning_to_invert.tuning`, recorded by ``scripts/ig_study_06.py``), and DLG with
the labels known on the same 16 targets for 10 L-BFGS steps.

:data:`BUDGETS` are applied on top of a profile by the notebook's ``BUDGET`` parameter
(:func:`gitutor.get_profile` with ``budget=``); ``"smoke"`` runs a profile's code path for one epoch.
"""

QUICK = {
    "torch_threads": 1,  # pinned: the same numbers on any core count (small MLP, shared CPU)
    "dataset": "digits",  # sklearn digits, upscaled; the held-out images are never in the auxiliary set
    "image_size": 16,
    "channels": 1,
    "num_classes": 10,
    "models": ["lenet"],
    "model_seed": 1234,  # LeNet U(-0.5, 0.5) seed of the authors' code
    "init_a": 0.5,
    "n_aux": None,  # None: every digit that is not held out (1 597)
    "n_heldout": 200,  # held-out targets (LTI is scored on all of them)
    "n_ig_targets": 16,  # B = 1 targets also attacked by Inverting Gradients (Table 1)
    "n_ig_batches": 3,  # B = 4 batches attacked by Inverting Gradients
    "hash_fraction": {
        "lenet": 0.25,
        "resnet20": 0.5,
    },  # k / m of the feature hash (None: no hashing)
    "hidden": {1: 192, 4: 256},  # MLP hidden size per batch size B
    "batch_sizes": [1, 4],
    "b4_batches": 800,  # aggregated B = 4 gradients made from the auxiliary set
    "epochs": 400,  # a cap: g_θ trains until its validation loss flattens (patience)
    # the stopping rule on the validation split: lr ×0.1 once the validation loss has not fallen by
    # min_delta (relative) for `patience` epochs, stop once it has not for `patience` more
    "patience": 5,
    "min_delta": 0.01,
    "lr": 2e-3,
    "train_batch": 64,
    "val_fraction": 0.1,
    "lr_drop_at": 0.75,
    "standardise": True,  # g_θ's input standardised with the auxiliary features' statistics
    "prune_rate": 0.99,
    "sigma": 0.1,
    "ig_iterations": 100,  # this run's IG; book/studies/06_ig_budget.json runs it at its best budget
    # IG per defense: tuned on 3 auxiliary images (scripts/ig_study_06.py; tests check the record)
    "ig_settings": {
        "none": {
            "tv_weight": 0.0001,
            "lr": 0.1,
            "lr_steps": True,
            "keep_best": False,
            "restarts": 3,
        },
        "sign": {
            "tv_weight": 0.001,
            "lr": 0.3,
            "lr_steps": True,
            "keep_best": True,
            "restarts": 1,
        },
        "prune": {
            "tv_weight": 0.001,
            "lr": 0.1,
            "lr_steps": True,
            "keep_best": False,
            "restarts": 3,
        },
        "gauss": {
            "tv_weight": 0.1,
            "lr": 0.3,
            "lr_steps": True,
            "keep_best": True,
            "restarts": 1,
        },
    },
    "dlg_iterations": 10,  # DLG's own budget: undefended, 81-88 dB on 3 targets outside the table (5: 34-84)
    "dlg_stop_loss": 1e-10,  # stop once the gradient distance is below this (DLG has found the image)
    "aux_sizes": [100, 400],  # Fig. 3a: smaller auxiliary sets (the full set is added)
    "ood_target_classes": [
        0,
        1,
        2,
        3,
        4,
    ],  # Table 2: targets from these classes, auxiliary set from the others
    "grid_targets": 4,  # Fig. 2: images shown per defense
    # how this profile differs from the paper, for the results record's rows
    "differences": "quick: sklearn digits 16×16 grey instead of CIFAR-10, gradient hashed to 25 %, "
    "g_θ input standardised, hidden 192 (B = 1) / 256 (B = 4), trained until its validation loss "
    "flattens; IG tuned on auxiliary images, at its budget chosen on auxiliary images",
}

FULL = {
    "torch_threads": None,  # leave torch's default (GPU run)
    "dataset": "cifar10",  # from the notebook's DATA_ROOT
    "image_size": 32,
    "channels": 3,
    "num_classes": 10,
    "models": ["lenet", "resnet20"],
    "model_seed": 1234,
    "init_a": 0.5,
    "n_aux": 50000,  # CIFAR-10 train split
    "n_heldout": 1000,  # random CIFAR-10 test images
    "n_ig_targets": 1000,
    "n_ig_batches": 250,
    "hash_fraction": {"lenet": None, "resnet20": 0.5},
    "hidden": {1: 3000, 4: 10000},
    "batch_sizes": [1, 4],
    "b4_batches": 12500,  # ⌊50 000 / 4⌋: every auxiliary image once
    "epochs": 200,  # a cap (Wu et al.: 200 epochs, lr ×0.1 after 150)
    "patience": 5,
    "min_delta": 0.01,
    "lr": 1e-4,
    "train_batch": 256,
    "val_fraction": 0.1,
    "lr_drop_at": 0.75,
    "standardise": False,  # raw gradient features, as Wu et al. describe
    "prune_rate": 0.99,
    "sigma": 0.1,
    "ig_iterations": 4800,  # not stated by Wu et al. (our choice)
    # not tuned on CIFAR-10 (rerun chapter 06's tuning rule there): Geiping et al.'s α_TV, lr and schedule
    "ig_settings": {
        d: {
            "tv_weight": 1e-4,
            "lr": 0.1,
            "lr_steps": True,
            "keep_best": True,
            "restarts": 1,
        }
        for d in ("none", "sign", "prune", "gauss")
    },
    "dlg_iterations": 300,  # the DLG paper's n = 300
    "dlg_stop_loss": 1e-10,
    "aux_sizes": [500, 5000, 15000, 25000, 35000, 45000],
    "ood_target_classes": [0, 1, 2, 3, 4],
    "grid_targets": 4,
    "differences": "paper settings",
}

BUDGETS = {
    # `make smoke` (scripts/smoke.py): the profile's code path (both models, every defense, B = 1 and 4,
    # every table and figure) for one epoch and two IG iterations on a few images. The MLP is narrowed,
    # because the full widths (3 000 / 10 000 units on 135 000 hashed ResNet20 coordinates) need tens of
    # GB for Adam's state; the FL models keep their full-profile sizes. One torch thread: two threads on a
    # shared 2-core CPU made the per-example ResNet20 gradients 20 times slower.
    "smoke": {
        "n_aux": 48,
        "n_heldout": 10,
        "n_ig_targets": 2,
        "n_ig_batches": 1,
        "b4_batches": 20,
        "epochs": 1,
        "train_batch": 32,
        "hidden": {1: 64, 4: 64},
        "ig_iterations": 2,
        "dlg_iterations": 2,
        "aux_sizes": [24],
        "grid_targets": 2,
        "torch_threads": 1,
        "differences": "smoke budget: the code path on a few images for one epoch",
    },
}

#: Papermill parameters of ``make smoke``: bundled digits (32×32 RGB) stand in for CIFAR-10, smoke budget.
SMOKE_PARAMETERS = {"DATA_ROOT": "bundled", "BUDGET": "smoke"}
