"""Settings of notebook 05 (Li et al. 2023, user-level gradient inversion with a diffusion prior).

QUICK: CPU, offline — the shipped 32×32 grey LFW face DDPM, users made of variations of held-out
LFW faces (gitutor.user_batches.lfw_user), an untrained GapCNN (ResNet-18's global-average-pooling
head on three convolutions) with 2 classes; 100 steps, so τ anneals to 200 (not 500) and the final
denoising starts at t* = 100 (not 200), see the notebook.
FULL: the paper's §3 setup — CelebA identities at 64×64, B = 30, first 50 users with >= 30
images, "Attractive" labels, random ResNet-18, a 256×256 hub face DDPM, 4 000 steps, IG with
24 000 steps.
"""

QUICK = dict(
    data="lfw", users=[85, 92], image_size=32, channels=1, batch_size=30, large_batch_size=100,
    model="gap-cnn", prior="lfw32", steps=100, lr=0.1, t_star=100,
    tau=dict(t_max=999, t_min=200, noise=50), zeta=dict(start=1.5, end=1.0), window=dict(width=2.0, open_at=0.5),
    ig_steps=100, ig_tv_weight=1e-2, ig_lr=0.1, record_every=20, prior_samples=16, prior_sampling_steps=100,
    data_root="data",
)

FULL = dict(
    data="celeba", users=50, image_size=64, channels=3, batch_size=30, large_batch_size=None,
    model="resnet18", prior="google/ddpm-celebahq-256", steps=4000, lr=0.01, t_star=200,
    tau=dict(t_max=999, t_min=500, noise=50), zeta=dict(start=1.5, end=1.0), window=dict(width=6.0, open_at=0.5),
    ig_steps=24000, ig_tv_weight=1e-4, ig_lr=0.1, record_every=500, prior_samples=16, prior_sampling_steps=1000,
    data_root="data",
)
