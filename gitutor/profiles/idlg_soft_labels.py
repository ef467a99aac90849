"""Settings of notebook 02_idlg_soft_labels (Wang, Liang & He, ICLR 2024, §4 and App. E)."""

QUICK = {
    "data": "bundled photographs (skimage.data crops, 32×32) and scikit-learn digits",
    "num_classes": 10,               # CIFAR-10-sized label space, as in Table 2
    "image_size": 32,
    "tolerance": 1e-3,               # L1 error under which a label counts as recovered
    "idlg_samples": 20,              # one-hot / smoothing / mixup samples for the sign-rule section
    "table2_samples": 10,            # random labels per network × augmentation (paper: 1000)
    "smoothing_max": 0.5,            # ε ~ U(0, 0.5)
    "digits_size": 8,                # trained LeNet (ReLU, bias-free fc) on the 8×8 grey digits
    "trained_split": 1500,           # first 1500 shuffled digits train the LeNet, the rest are attacked
    "train_epochs": 3,
    "train_batch": 64,
    "train_lr": 3e-3,
    "train_label_smoothing": 0.1,    # the client trains with label smoothing
    "curve_lambdas": (-8.0, 8.0, 4001),  # λ grid of the loss picture (Fig. 1)
    "fcn_widths": (4096, 1024, 256),     # FCN-4 as in the paper; input 3·32·32 instead of 3·64·64
    "fcn_image_size": 32,
    "fcn_images": 4,
    "table3_image_size": 16,         # reconstructions on 16×16 crops to fit the CPU budget (paper 32×32)
    "table3_iterations": 20,         # L-BFGS steps of DLG, L2 matching (paper: 300)
    "table3_ig_iterations": 300,     # signed-Adam steps of the cosine matching (inverting gradients)
    "table3_tv_weight": 1e-4,
    "noise_variances": [1e-4, 1e-3, 1e-2, 1e-1],
    "noise_samples": 4,              # paper: 100
    "noise_bound": 6.0,              # PSO windows up to |λ| = 6 (untrained ResNet18 has |λ| < 3)
}

FULL = {
    **QUICK,
    "data": "CIFAR-10 test images via torchvision (set DATA_ROOT); trained LeNet on CIFAR-10 train images",
    "data_root": "data",
    "idlg_samples": 200,
    "table2_samples": 1000,
    "trained_images": 11000,         # CIFAR-10 train images: 10000 train the LeNet, 1000 are attacked
    "trained_split": 10000,
    "train_epochs": 10,
    "fcn_image_size": 64,            # the paper's 64×64 FCN-4 input (12288 features)
    "fcn_images": 100,
    "table3_image_size": 32,
    "table3_iterations": 300,
    "table3_ig_iterations": 4000,
    "noise_samples": 100,
    "noise_bound": 70.0,
}
