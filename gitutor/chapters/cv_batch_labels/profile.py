"""Settings of notebook 03_cv_batch_labels (Ye et al., AAAI 2024, Stage I and §Label Inference).

FULL is the paper's setting: ImageNet-pretrained ResNet34 in eval mode, 224×224 ImageNet validation
images (an ImageFolder tree given by IMAGE_ROOT), 40 auxiliary web images (AUX_ROOT), M = 20,
population 20, p_r = 0.5, < 200 generations. QUICK keeps the algorithm and its hyper-parameters
but runs a randomly initialised ResNet34 (eval mode, default BatchNorm statistics) on 64×64 crops
of the bundled photographs, auxiliary crops from the disjoint pool="aux" half of every photograph.
Both profiles also run Stage I on the shipped trained substitute (a ResNet-20, no download) against
the same architecture with random weights (``substitute*`` settings).

:data:`BUDGETS` are overrides applied on top of a profile by the notebook's ``BUDGET`` parameter:
``"smoke"`` runs a profile's code path on a few batches. A root of ``"bundled"`` (IMAGE_ROOT, AUX_ROOT)
takes the bundled photographs instead of an ImageFolder tree (offline substitute).
"""

QUICK = {
    "torch_threads": 2,  # pinned so that ResNet34's features (and every number) repeat across machines
    "pretrained": False,  # no ImageNet weights offline
    "num_classes": 1000,
    "image_size": 64,
    "data": "bundled photographs (skimage.data crops; attacked pool='target', auxiliary pool='aux')",
    "image_root": "bundled",  # attacked images: bundled photographs, or an ImageNet validation ImageFolder
    "aux_root": "bundled",  # auxiliary images: bundled photographs, or an ImageFolder with one sub-folder
    "aux_images": 40,  # the paper's 40 auxiliary images
    "target_pool": 128,  # attacked crops; batches are random subsets with random labels
    "top_m": 20,  # M (Eq. 5)
    "population": 20,  # m
    "iterations": 200,  # generations (paper: < 200)
    "crossover": 0.5,  # p_r (Eq. 7)
    "batch_size": 8,  # acceptance setting: B = 8, repeats over ≤ 5 classes
    "max_classes": 5,
    "trials": 20,
    "batch_sizes": [4, 8, 16, 32, 64],
    "sweep_trials": 8,  # batches per batch size in the sweep
    "sweep_class_fraction": 0.5,  # a batch of N holds at most max(2, N/2) classes
    "figure_batch_size": 64,  # Fig. 4(a): the paper draws 64 ImageNet validation images
    "figure_classes": 20,  # classes in that batch (quick: so that labels repeat)
    "m_values": [5, 20, 50, 200],
    "aux_counts": [5, 10, 20, 40, 80],
    "head_steps": 10,  # plain SGD steps of the FC layer on the batch ("trained model")
    "head_lr": 0.5,
    # random vs trained network (gitutor.models.substitute): the shipped ResNet-20 trained on other
    # bundled photographs (16 classes), the same architecture with random weights, and the trained
    # features with a new head, on the same batches of crops of the photographs it never saw
    "substitute": "resnet20",
    "substitute_image_size": 32,  # the substitute's training resolution
    "substitute_pool": 128,  # attacked crops (left halves of ATTACKED_PHOTOGRAPHS)
    "substitute_trials": 100,  # batches of batch_size per network (the same batches for all)
    # the headline, the paper's kind of setting (chapter package .imagenet): ImageNet-trained EfficientNet-Lite0
    # (gitutor.models.pretrained), foolbox's 20 ImageNet photographs with their true labels, augmented views
    # for repeated classes, auxiliary images = the photographs whose class is not in the batch
    "imagenet_threads": 1,  # this section's many small (1000, 1280) operations: 1 thread, no contention
    "imagenet_size": 224,  # the network's and the paper's input side
    "imagenet_source": 448,  # views are cut from this centre crop of each photograph (resize 512)
    "imagenet_views": 8,  # views per photograph (a class holds at most 8 images, a jeep 16)
    "imagenet_scale": [
        0.25,
        1.0,
    ],  # share of the photograph's area a view keeps (RandomResizedCrop)
    "imagenet_trials": 100,  # batches of batch_size (the headline)
    "imagenet_batch_sizes": [4, 8, 16, 32],
    "imagenet_sweep_trials": 30,  # batches per other N (N = batch_size reuses the headline's)
    "imagenet_max_classes": 9,  # so that ≥ 10 of the 20 photographs stay auxiliary
}

FULL = {
    **QUICK,
    "torch_threads": None,  # leave torch's default (GPU run)
    "pretrained": True,  # torchvision ResNet34_Weights.IMAGENET1K_V1, eval mode
    "image_size": 224,
    "data": "ImageNet ILSVRC2012 validation images (IMAGE_ROOT) and 40 auxiliary web images (AUX_ROOT)",
    "image_root": "data/imagenet/val",
    "aux_root": "data/aux_web",
    "target_pool": 5000,  # ~5 validation images per class, so classes can repeat
    "trials": 100,
    "sweep_trials": 50,
    "aux_counts": [5, 10, 20, 40],
    "imagenet_threads": None,
    "imagenet_views": 16,
    "imagenet_trials": 500,
    "imagenet_batch_sizes": [4, 8, 16, 32, 64],
    "imagenet_sweep_trials": 200,
}

BUDGETS = {
    # `make smoke`: the code path of a profile (full: ResNet34 at 224×224) on a few batches
    "smoke": {
        "target_pool": 64,
        "trials": 2,
        "sweep_trials": 1,
        "batch_sizes": [4, 8],
        "iterations": 20,
        "m_values": [5, 20],
        "aux_counts": [5, 40],
        "substitute_pool": 32,
        "substitute_trials": 2,
        "imagenet_views": 4,
        "imagenet_trials": 3,
        "imagenet_sweep_trials": 1,
        "imagenet_batch_sizes": [4, 8],
    },
}

#: Papermill parameters of ``make smoke`` (scripts/smoke.py): the profile's code path, offline, a few batches.
SMOKE_PARAMETERS = {
    "PRETRAINED": False,
    "IMAGE_ROOT": "bundled",
    "AUX_ROOT": "bundled",
    "BUDGET": "smoke",
}
