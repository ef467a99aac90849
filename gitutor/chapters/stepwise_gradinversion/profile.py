"""Settings of notebook 04_stepwise_gradinversion (Ye et al., AAAI 2024, Stage II and §Experiments).

FULL is the paper's setting: ImageNet-pretrained ResNet34 in eval mode, 224×224 ImageNet
validation images with distinct labels, batch 8, 15 000 iterations, dropout 0.3, β = 2,
λ_tv = 0.01 and λ_BN = 1e-4 on the sums of Eq. 11, T1 = 3000, T2 = 5000, Adam lr 0.1 on the sign
of the gradient; its trials run on Ray. QUICK keeps the algorithm and every schedule *fraction*
(the schedule is ``StepwiseSchedule.paper(iterations, ...)``, which scales interval, T1, T2 and
the lr steps with the budget) but attacks the network on which the attacks recover photographs
offline (the setting study, chapter 04's last section): a randomly initialised CIFAR ResNet-18 of width 32 with default
BatchNorm statistics, on whole bundled photographs at 32×32, with the priors at a hundredth of
the paper's weights (the paper's weights were tuned at 224 px, where Eq. 11's sum has 49 times more
terms), for 100 iterations per method in Table 1 and 30 in the ablation and the studies, so that
three batches per comparison fit in about three minutes of one core: a preview.

:data:`BUDGETS` are larger budgets for recorded runs (``book/recorded/``), applied on top of a
profile by the notebook's ``BUDGET`` parameter: ``"cpu_recording"`` records Table 1 in the quick
profile's network at B = 4 on five batches (run with ``-p PRETRAINED False -p IMAGE_ROOT
bundled``); ``"smoke"`` runs a profile's code path for a few iterations.
"""

QUICK = {
    "model": "cifar_resnet18",  # the network attacked offline (see MODEL_BLOCKS)
    "width": 32,  # channels of its first stage (cifar_resnet18 only)
    "pretrained": False,  # no ImageNet weights offline
    "substitute": False,  # True: the trained substitute of `model` (resnet20, resnet34)
    "calibrate_bn_images": 0,  # random weights: 0 keeps default BN statistics, else calibrate
    "num_classes": 10,
    "image_size": 32,
    "batch_size": 2,
    "n_batches": 3,  # every comparison runs on this many batches (mean, 95 % interval)
    "data": "whole bundled photographs",
    "image_root": "bundled",  # the notebook's IMAGE_ROOT parameter overrides it
    "budgets": [
        30,
        100,
    ],  # budget curve (iterations) for IG, GradInversion, stepwise ([]: none)
    "iterations": 100,  # Table 1: every method gets the same number of image updates
    "dlg_inner_steps": 20,  # L-BFGS function evaluations per DLG step (max_iter)
    "ablation_iterations": 30,  # Table 2 and dropout on/off (shares the budget-30 runs; None: not run)
    "study_iterations": 30,  # Fig. 7 (batch size) and Fig. 8 (first matched block; None: not run)
    "batch_sizes": [1, 2],
    "first_blocks": [
        "layer4",
        "layer2",
    ],  # Fig. 8: match from this residual block to fc
    # the paper's hyper-parameters (Ye et al. §Experiments); the schedule scales T1, T2 to the budget
    "dropout": 0.3,
    "tv_weight": 1e-4,  # λ_tv on Eq. 11's sum: a hundredth of the paper's 0.01
    "bn_weight": 1e-6,  # λ_BN: a hundredth of the paper's 1e-4
    "t1": 3000,  # in paper iterations (out of 15 000)
    "t2": 5000,
    "lr": 0.1,
    "ig_tv_weight": 0.01,  # α_TV of Inverting Gradients (its TV is a mean, β = 1)
    "record_every": 5,
    "torch_threads": 1,  # two OpenMP threads on two cores shared with other work thrash
    "sweep_engine": "local",  # "ray": gitutor.sweeps on a local Ray or RAY_ADDRESS
    "sweep_cpus": None,  # CPUs of a local Ray (None: all)
}

FULL = {
    **QUICK,
    "model": "resnet34",
    "pretrained": True,  # torchvision ResNet34_Weights.IMAGENET1K_V1, eval mode
    "substitute": False,
    "num_classes": 1000,
    "tv_weight": 0.01,  # the paper's λ_tv and λ_BN (Eq. 11 sums)
    "bn_weight": 1e-4,
    "image_size": 224,
    "batch_size": 8,
    "n_batches": 5,
    "data": "ImageNet ILSVRC2012 validation images (ImageFolder tree given by IMAGE_ROOT)",
    "image_root": None,  # must be given (IMAGE_ROOT), or "bundled" for the offline substitute
    "budgets": [500, 1500, 5000, 15_000],
    "iterations": 15_000,
    "ablation_iterations": 15_000,
    "study_iterations": 15_000,
    "batch_sizes": [1, 2, 4, 8, 16, 32],
    "first_blocks": ["layer4", "layer3", "layer2", "layer1"],
    "record_every": 500,
    "torch_threads": None,  # torch's default
    "sweep_engine": "ray",
}

#: Residual blocks of each model the chapter can attack: label → parameter-name prefix.
MODEL_BLOCKS = {
    "cifar_resnet18": {
        "layer1": "layers.0",
        "layer2": "layers.1",
        "layer3": "layers.2",
        "layer4": "layers.3",
    },
    "resnet34": {
        "layer1": "layer1",
        "layer2": "layer2",
        "layer3": "layer3",
        "layer4": "layer4",
    },
    "resnet20": {"stage1": "blocks.0", "stage2": "blocks.3", "stage3": "blocks.6"},
}

BUDGETS = {
    # Table 1 only, in the quick profile's network (random CIFAR ResNet-18 of width 32, default
    # BatchNorm statistics, a hundredth of the paper's prior weights) at 32×32 and B = 4, five
    # batches of whole bundled photographs, 1 500 iterations with the paper's schedule scaled;
    # two worker processes, about an hour on two idle cores. No budget curve (budgets []), no
    # ablation and no Fig. 7–8 studies (None): those sections say so on the page
    "cpu_recording": {
        "model": "cifar_resnet18",
        "width": 32,
        "substitute": False,
        "calibrate_bn_images": 0,
        "num_classes": 10,
        "tv_weight": 1e-4,
        "bn_weight": 1e-6,
        "image_size": 32,
        "batch_size": 4,
        "n_batches": 5,
        "budgets": [],
        "iterations": 1500,
        "ablation_iterations": None,
        "study_iterations": None,
        "batch_sizes": [],
        "first_blocks": [],
        "record_every": 100,
        "torch_threads": 1,
        "sweep_engine": "processes",
        "sweep_cpus": 2,
    },
    # `make smoke`: the code path of a profile for a handful of iterations, two batches, in this
    # process: a local Ray's dashboard probes cloud metadata servers, which the build's network guard
    # refuses (the Ray engine is tested by tests/test_sweeps.py)
    "smoke": {
        "n_batches": 2,
        "budgets": [2, 4],
        "iterations": 4,
        "ablation_iterations": 4,
        "study_iterations": 2,
        "batch_sizes": [1],
        "record_every": 2,
        "sweep_engine": "local",
    },
}


def chapter_settings(cfg, budget: str | None = None, **overrides):
    """The notebook's settings: the profile of ``cfg`` (its notebook and profile name) with :data:`BUDGETS`
    ``[budget]`` (:func:`gitutor.chapters.get_profile`), then ``overrides`` (None skipped).

    Returns a ``types.SimpleNamespace`` (attribute access, like a profile) with ``budget`` added.
    ``pretrained`` means the ImageNet ResNet34 (1000 classes); otherwise ``substitute`` means the
    trained substitute of ``model`` (:mod:`gitutor.models.substitute`, one class per training
    photograph); a randomly initialised model keeps its default BatchNorm statistics unless
    ``calibrate_bn_images`` is positive (the setting study measures both).

    With ``image_root == "bundled"`` a batch holds distinct bundled photographs (the six held out
    of the substitutes' training for a substitute, else all of them): Fig. 7's ``batch_sizes``
    keep the sizes that fit (the full profile's 32 does not).

    Raises:
        ValueError: naming ``BUDGET`` for an unknown budget name, ``MODEL`` for an unknown model,
            ``unknown settings`` for an override that is not a setting of the profile, or
            ``IMAGE_ROOT`` when ``batch_size`` exceeds the bundled photographs.
    """
    import types

    from gitutor.data import (
        ATTACKED_PHOTOGRAPHS,
        BUNDLED_PHOTOGRAPHS,
        TRAINING_PHOTOGRAPHS,
    )
    from gitutor.chapters import get_profile

    settings = get_profile(cfg.notebook, cfg.profile, budget=budget).as_dict()
    unknown = sorted(set(overrides) - set(settings))
    if unknown:
        raise ValueError(f"unknown settings {unknown}; settings: {sorted(settings)}")
    settings.update({k: v for k, v in overrides.items() if v is not None})
    if settings["model"] not in MODEL_BLOCKS:
        raise ValueError(
            f"MODEL must be one of {sorted(MODEL_BLOCKS)}, got {settings['model']!r}"
        )
    if settings[
        "pretrained"
    ]:  # ImageNet weights: ResNet34, 1000 classes, its own statistics
        settings.update(
            model="resnet34", substitute=False, num_classes=1000, calibrate_bn_images=0
        )
    elif settings[
        "substitute"
    ]:  # trained on the bundled training photographs, one class each
        settings.update(num_classes=len(TRAINING_PHOTOGRAPHS), calibrate_bn_images=0)
    if settings["image_root"] == "bundled":  # a batch holds distinct photographs
        names = ATTACKED_PHOTOGRAPHS if settings["substitute"] else BUNDLED_PHOTOGRAPHS
        if settings["batch_size"] > len(names):
            raise ValueError(
                f"IMAGE_ROOT = 'bundled' holds {len(names)} photographs for this network, "
                f"fewer than batch_size {settings['batch_size']}: point IMAGE_ROOT to an "
                "image folder"
            )
        settings["batch_sizes"] = [
            b for b in settings["batch_sizes"] if b <= len(names)
        ]
    return types.SimpleNamespace(**settings, budget=budget)


#: Papermill parameters of ``make smoke`` (scripts/smoke.py): the profile's code path, offline, a few iterations.
SMOKE_PARAMETERS = {"PRETRAINED": False, "IMAGE_ROOT": "bundled", "BUDGET": "smoke"}
