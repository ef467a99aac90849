"""Settings of notebook 04_stepwise_gradinversion (Ye et al., AAAI 2024, Stage II and §Experiments).

FULL is the paper's setting: ImageNet-pretrained ResNet34 in eval mode, 224×224 ImageNet
validation images with distinct labels, batch 8, 15 000 iterations, dropout 0.3, β = 2,
λ_tv = 0.01, λ_BN = 1e-4, T1 = 3000, T2 = 5000, Adam lr 0.1 on the sign of the gradient.
QUICK keeps the algorithm and every schedule *fraction* (the schedule is
``StepwiseSchedule.paper(iterations, ...)``, which scales interval, T1, T2 and the lr steps with
the budget) but runs a randomly initialised ResNet34 whose BatchNorm statistics are calibrated
on auxiliary crops, on 64×64 crops of the bundled photographs, for a few dozen iterations
(a ResNet34 attack iteration costs about a second of CPU time; the whole chapter has to fit in
five minutes on two cores).
"""

QUICK = {
    "model": "resnet34",
    "pretrained": False,             # no ImageNet weights offline
    "calibrate_bn_images": 64,       # auxiliary crops (pool="aux") for the BN running statistics
    "num_classes": 1000,
    "image_size": 64,
    "batch_size": 4,
    "data": "bundled photographs (skimage.data crops, held-out pool='target')",
    "image_root": None,
    # Table 1: every method gets the same number of image updates
    "iterations": 50,
    "dlg_inner_steps": 20,           # L-BFGS function evaluations per DLG step (max_iter)
    # ablations, dropout, batch size and blocks run with a smaller budget (stated on the page)
    "ablation_iterations": 20,
    "batch_sizes": [1, 2, 4],
    "first_blocks": ["layer4", "layer1"],   # Fig. 8: match from this residual block to fc
    # the paper's hyper-parameters (Ye et al. §Experiments); the schedule scales T1, T2 to the budget
    "dropout": 0.3,
    "tv_weight": 0.01,
    "bn_weight": 1e-4,
    "t1": 3000,                      # in paper iterations (out of 15 000)
    "t2": 5000,
    "lr": 0.1,
    "ig_tv_weight": 0.01,
    "record_every": 10,
}

FULL = {
    **QUICK,
    "pretrained": True,              # torchvision ResNet34_Weights.IMAGENET1K_V1, eval mode
    "calibrate_bn_images": 0,        # use the pretrained ImageNet running statistics
    "image_size": 224,
    "batch_size": 8,
    "data": "ImageNet ILSVRC2012 validation images (ImageFolder tree given by IMAGE_ROOT)",
    "iterations": 15_000,
    "ablation_iterations": 15_000,
    "batch_sizes": [1, 2, 4, 8, 16, 32],
    "first_blocks": ["layer4", "layer3", "layer2", "layer1"],
    "record_every": 500,
}
