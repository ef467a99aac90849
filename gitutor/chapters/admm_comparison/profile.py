"""Settings of notebook 07_admm_comparison (DLG reproduction report §4–5, Algorithm 2, Fig. 1–2).

FedADMM client: ρ = 0.01 and client learning rate η = 0.1 (the official FedADMM defaults the report
builds on); the attacked round is the first one (local model = global model, dual = 0).

:data:`BUDGETS` are applied on top of a profile by the notebook's ``BUDGET`` parameter
(:func:`gitutor.get_profile` with ``budget=``); ``"smoke"`` runs a profile's code path for a few steps.
"""

QUICK = {
    "image_size": 16,  # DLG LeNet input side (paper 32): 10 images per kind afford it
    # foolbox's real MNIST and CIFAR-100 test samples (the report's datasets); LFW: skimage's subset
    "kinds": ["mnist_samples", "cifar100_samples", "lfw"],
    # per offline kind (the stand-ins too: the exercises and tests use digits and photos)
    "num_classes": dict(
        mnist_samples=10, cifar100_samples=100, lfw=100, digits=10, photos=100
    ),
    "channels": dict(mnist_samples=1, cifar100_samples=3, lfw=1, digits=1, photos=3),
    "images_per_kind": 10,  # attacked images; one more is the client's earlier batch
    # the paper runs 300 L-BFGS steps (Fig. 1 shows up to 280); at 16×16 DLG converges on digits and
    # faces within ~15 steps and on photographs within ~25–40; every attack gets the same budget
    "iterations": {"mnist_samples": 20, "cifar100_samples": 30, "lfw": 20},
    "record_every": 2,
    "cosine_iterations": 200,  # Adam steps of cosine matching (Inverting Gradients)
    "tv_weight": 1e-4,  # its α_TV
    "rho": 0.01,
    "lr": 0.1,
    "local_steps": 1,
    "ablation_kind": "mnist_samples",
    # starts of the adaptive attack per image at E > 1 (the kept one: the lowest own matching loss), each
    # at DLG's budget (~2 s per run on one core); an image takes no further start once one ends with a
    # matching loss below adaptive_accept (the server computes it; a failed start stalls far above it).
    # When the first start is not accepted, the others run adaptive_probe steps each and only the lowest
    # loss among them runs the full budget: on the 10 MNIST samples at E = 3 (ρ = 0.01 and 1, 4 starts,
    # 20 steps) a start's loss after 3–10 steps picks the same recovered start as running all of them
    # in full (19 of 20 image-settings recovered either way) for 20 % fewer steps
    "adaptive_restarts": 4,
    "adaptive_accept": 1e-6,
    "adaptive_probe": 4,
    # (rho, local_steps): round-1 settings with more local steps than local_steps, attacked on every
    # image of the ablation kind (round 2 is attacked on every image at E = 1, its own table)
    "ablation_settings": [(0.01, 3), (1.0, 3)],
    "cosine_rhos": [0.01, 0.1, 1.0],
    "cosine_local_steps": [1, 3, 10],
    "torch_threads": 1,  # LeNet-sized work gains nothing from intra-op threads
    "data": "offline: foolbox's real MNIST and CIFAR-100 test samples with their true labels, skimage's LFW "
    "subset (random labels), resized to 16×16",
}

FULL = {
    **QUICK,
    "kinds": ["mnist", "cifar100", "lfw_people"],
    "num_classes": {
        "mnist": 10,
        "cifar100": 100,
        "lfw_people": 5749,
    },  # LFWPeople identities
    "channels": {"mnist": 1, "cifar100": 3, "lfw_people": 3},
    "image_size": 32,
    "images_per_kind": 20,
    "iterations": {"mnist": 300, "cifar100": 300, "lfw_people": 300},
    "cosine_iterations": 4000,
    "record_every": 20,
    "ablation_kind": "mnist",
    "adaptive_restarts": 4,
    "adaptive_probe": 30,  # a tenth of the budget
    "ablation_settings": [(0.01, 3), (1.0, 3), (0.01, 10), (1.0, 10)],
    "torch_threads": None,  # leave torch's default
    "data": "MNIST and CIFAR-100 test images and LFW (LFWPeople) via torchvision, resized to 32×32",
}

BUDGETS = {
    # `make smoke` (scripts/smoke.py): the profile's code path (every kind, attack, ablation setting and the
    # cosine grid) for a few L-BFGS steps on one image per kind
    "smoke": {
        "images_per_kind": 2,
        # the kinds of both profiles (quick: the samples and lfw; full: mnist, cifar100, lfw_people)
        "iterations": dict.fromkeys(
            (
                "mnist_samples",
                "cifar100_samples",
                "lfw",
                "mnist",
                "cifar100",
                "lfw_people",
            ),
            3,
        ),
        "record_every": 1,
        "cosine_iterations": 4,
        "adaptive_restarts": 3,  # the restart ranking's and the probes' code path
        "adaptive_probe": 1,
        "torch_threads": 1,
    },
}

#: Papermill parameters of ``make smoke``: bundled stand-ins for MNIST, CIFAR-100 and LFW, smoke budget.
SMOKE_PARAMETERS = {"DATA_ROOT": "bundled", "BUDGET": "smoke"}

#: Images of each offline stand-in of a torchvision kind with DATA_ROOT = "bundled" (foolbox's
#: MNIST and CIFAR-100 test samples; skimage's LFW subset holds more).
STAND_IN_IMAGES = 20


def chapter_settings(cfg, data_root: str):
    """The notebook's settings: the profile ``cfg`` (``get_profile`` with the notebook's
    ``BUDGET``) for the notebook's ``DATA_ROOT``: with ``"bundled"`` at most
    :data:`STAND_IN_IMAGES` − 1 attacked images per kind (one more image is the client's earlier
    batch), so that the full profile runs on the stand-ins; otherwise ``cfg`` unchanged."""
    if str(data_root) == "bundled" and cfg.images_per_kind >= STAND_IN_IMAGES:
        return cfg.replace(images_per_kind=STAND_IN_IMAGES - 1)
    return cfg
