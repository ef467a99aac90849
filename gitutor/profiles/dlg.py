"""Settings of notebook 01_dlg (Zhu et al. 2019, §4 and the DLG public code).

The quick profile keeps the paper's model, image size and 300 L-BFGS steps for the main attack,
and runs the sweeps (seeds, batch sizes, defenses, extra data) on 16×16 crops with 50 steps so
the chapter executes in about three minutes on two CPU cores.
"""

QUICK = {
    "torch_threads": 1,              # LeNet-sized work is fastest single-threaded on a CPU
    "image_size": 32,
    "num_classes": 100,              # DLG LeNet for CIFAR-100
    "iterations": 300,               # the paper's 300 L-BFGS steps (main attack)
    "record_every": 10,
    "data": "32×32 crops of the photographs bundled in scikit-image",
    "source": "photos",              # CIFAR-100 stand-in
    "extra_sources": ["digits"],     # scikit-learn digits, an MNIST stand-in
    "data_root": "data",
    "progress": False,               # no progress bars in the rendered book
    "known_iterations": 60,
    "sweep_image_size": 16,          # seed, batch, data and defense sweeps on 16×16 crops (CPU budget)
    "seeds": [0, 1, 2],
    "seed_iterations": 50,
    "batch_sizes": [1, 2, 4],
    "batch_iterations": 50,
    "extra_iterations": 50,
    "prune_rates": [0.1, 0.3],
    "noise_variances": [1e-4, 1e-2],
    "defense_iterations": 50,
    "success_psnr": 30.0,            # dB
}

FULL = {
    **QUICK,
    "torch_threads": None,           # leave torch's default (GPU run)
    "data": "CIFAR-100 and MNIST test images via torchvision",
    "source": "cifar100",
    "extra_sources": ["mnist"],
    "progress": True,
    "known_iterations": 300,
    "extra_iterations": 300,
    "seeds": list(range(10)),
    "seed_iterations": 300,
    "batch_sizes": [1, 2, 4, 8],
    "batch_iterations": 300,
    "prune_rates": [0.01, 0.1, 0.2, 0.3, 0.5, 0.7],
    "noise_variances": [1e-4, 1e-3, 1e-2, 1e-1],
    "defense_iterations": 300,
    "sweep_image_size": 32,
}
