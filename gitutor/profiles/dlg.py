"""Settings of notebook 01_dlg (Zhu et al. 2019, §4 and the DLG public code)."""

QUICK = {
    "image_size": 32,
    "num_classes": 100,          # DLG LeNet for CIFAR-100
    "iterations": 300,           # the paper's 300 L-BFGS steps
    "record_every": 10,
    "data": "bundled photographs (skimage.data crops)",
    "seeds": [0, 1, 2, 3],       # seed sensitivity (model init and dummy init)
    "batch_sizes": [1, 2, 4],
    "batch_iterations": 100,
    "prune_rates": [0.0, 0.1, 0.3, 0.5, 0.7],
    "noise_variances": [1e-4, 1e-3, 1e-2, 1e-1],
    "defense_iterations": 100,
    "success_psnr": 30.0,        # dB, what counts as a successful reconstruction here
}

FULL = {
    **QUICK,
    "data": "CIFAR-100 and MNIST test images via torchvision",
    "datasets": ["cifar100", "mnist"],
    "data_root": "data",
    "seeds": list(range(10)),
    "batch_sizes": [1, 2, 4, 8],
    "batch_iterations": 300,
    "defense_iterations": 300,
}
