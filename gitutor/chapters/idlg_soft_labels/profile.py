"""Settings of notebook 02_idlg_soft_labels (Wang, Liang & He, ICLR 2024, §4 and App. E).

:data:`BUDGETS` are overrides applied on top of a profile by the notebook's ``BUDGET`` parameter:
``"smoke"`` runs a profile's code path for a few samples and steps. With ``DATA_ROOT="bundled"`` the
full profile runs on the bundled photographs and digits instead of CIFAR-10 (offline substitute).
"""

from gitutor.controls import RECOGNISABLE_PSNR

QUICK = {
    "torch_threads": 1,  # pinned: LeNet-sized CPU work, and the same numbers on any core count
    "data": "bundled photographs (skimage.data: crops for label trials, whole photographs for reconstructions) "
    "and scikit-learn digits",
    "num_classes": 10,  # CIFAR-10-sized label space, as in Table 2
    "image_size": 32,
    "tolerance": 1e-3,  # L1 error under which a label counts as recovered
    "idlg_samples": 20,  # one-hot / smoothing / mixup samples for the sign-rule section
    "table2_samples": 15,  # labels per network × augmentation (count not stated in Table 2); the
    # headline pools the 6 soft-label cells: 90 labels, so that 100 % has a
    # 95 % Wilson interval above the paper's 99.7 % less the 5 % allowance
    "smoothing_max": 0.5,  # ε ~ U(0, 0.5)
    "digits_size": 8,  # trained LeNet (ReLU, bias-free fc) on the 8×8 grey digits
    "trained_split": 1500,  # first 1500 shuffled digits train the LeNet, the rest are attacked
    "train_epochs": 3,
    "train_batch": 64,
    "train_lr": 3e-3,
    "train_label_smoothing": 0.1,  # the client trains with label smoothing
    "curve_lambdas": (-8.0, 8.0, 4001),  # λ grid of the loss picture (Fig. 1)
    "fcn_widths": (
        4096,
        1024,
        256,
    ),  # FCN-4 as in the paper; input 3·32·32 instead of 3·64·64
    "fcn_image_size": 32,
    "fcn_images": 4,
    "table3_image_size": 16,  # reconstructions on 16×16 images to fit the CPU budget (paper 32×32)
    "table3_samples": {
        "mixup": 5,
        "smoothing": 5,
    },  # paper: 45 mixup class pairs, 30 smoothing images
    "table3_repeats": 2,  # random starts per image: 10 runs per cell (paper: 10 repeats)
    "table3_iterations": 6,  # L-BFGS steps of DLG with its label optimised (paper: not stated)
    "table3_ig_iterations": 200,  # signed-Adam steps of cosine and L2 matching with a fixed label, all
    # runs of a setting batched (exact: the steps are per pixel)
    "table3_tv_weight": 1e-4,
    "recognisable_psnr": RECOGNISABLE_PSNR,  # dB: the book's one "recognisable" (gitutor.controls), checked
    # against the controls on Table 3's images by the notebook
    # Table 5's noise levels as the authors' code draws them: σ of N(0, σ²) (the paper's text: "variance")
    "noise_sigmas": [1e-4, 1e-3, 1e-2, 1e-1],
    "noise_samples": 30,  # per level, each variant (paper: 100)
    "imagenet_network": "efficientnet_lite0",  # gitutor.models.pretrained: ImageNet weights, eval mode
    "imagenet_photos": 20,  # foolbox's 20 ImageNet photographs, true labels, 224 px (all of them)
    "imagenet_kinds": (
        "smoothing",
        "mixup",
    ),  # one-hot: confident predictions put |λ| far out, so its PSO
    # runs through most windows (≈ 4 s a label): full profile only
}

FULL = {
    **QUICK,
    "torch_threads": None,  # leave torch's default (GPU run)
    "data": "CIFAR-10 test images via torchvision (set DATA_ROOT); trained LeNet on CIFAR-10 train images",
    "idlg_samples": 200,
    "table2_samples": 1000,  # as the paper's Table 1
    "trained_images": 11000,  # CIFAR-10 train images: 10000 train the LeNet, 1000 are attacked
    "trained_split": 10000,
    "train_epochs": 10,
    "fcn_image_size": 64,  # the paper's 64×64 FCN-4 input (12288 features)
    "fcn_images": 100,
    "table3_image_size": 32,
    "table3_samples": {"mixup": 45, "smoothing": 30},
    "table3_repeats": 10,
    "table3_iterations": 300,
    "table3_ig_iterations": 4000,
    "noise_samples": 100,
    "imagenet_kinds": ("smoothing", "mixup", "one-hot"),
}

BUDGETS = {
    # `make smoke`: the code path of a profile (full: FCN-4 at 64×64, ResNet18, 32×32 Table 3) for a few samples
    "smoke": {
        "idlg_samples": 3,
        "table2_samples": 2,
        "trained_split": 1500,
        "train_epochs": 1,
        "fcn_images": 2,
        "table3_samples": {"mixup": 1, "smoothing": 1},
        "table3_repeats": 1,
        "table3_iterations": 2,
        "table3_ig_iterations": 4,
        "noise_samples": 2,
        "imagenet_photos": 3,
        "torch_threads": 1,  # LeNet-sized steps: two OpenMP threads on a busy CPU thrash (no effect on a GPU)
    },
}

#: Papermill parameters of ``make smoke`` (scripts/smoke.py): the profile's code path, offline, a few samples.
SMOKE_PARAMETERS = {"DATA_ROOT": "bundled", "BUDGET": "smoke"}
