"""Settings of notebook 05 (Li et al. 2023, user-level gradient inversion with a diffusion prior).

QUICK: CPU, offline — the shipped 32×32 grey LFW face DDPM, 10 users made of variations of held-out
LFW faces (gitutor.federated.users.lfw_user; 5 of each label, so the identity test also has same-label pairs), an untrained ReLU LeNet with 2 classes (the notebook's
COMPARE_GAP_CNN adds GapCNN, ResNet-18's global-average-pooling head on three convolutions); 100 steps, so τ anneals to 200 (not 500) and the final
denoising starts at t* = 100 (not 200); matching weight λ so that the matching gradient reaches the
clip (see gitutor.attacks.user_level.attack), see the notebook; the first ``weight_users`` users are
attacked again with λ = 1 (same gradient, same seed) for the paired λ comparison.
FULL: the paper's §3 setup — CelebA identities at 64×64, B = 30, first 50 users with >= 30
images, "Attractive" labels, random ResNet-18, a 256×256 hub face DDPM, 4 000 steps, IG with
24 000 steps.
:data:`BUDGETS` (the notebook's ``BUDGET``) and the offline substitutes (``DATA_ROOT = "bundled"``: LFW users
at the profile's size; ``PRETRAINED = False``: an untrained DDPM of the shipped architecture at the
profile's size) let ``make smoke`` run the full profile's code path for a few steps offline.
"""

from __future__ import annotations

from pathlib import Path

QUICK = dict(
    data="lfw",
    users=[81, 84, 87, 90, 93, 86, 89, 95, 97, 98],
    image_size=32,
    channels=1,
    batch_size=30,
    large_batch_size=None,
    model="lenet",
    prior="lfw32",
    steps=100,
    lr=0.1,
    t_star=100,
    matching_weight=1e5,
    tau=dict(t_max=999, t_min=200, noise=50),
    zeta=dict(start=1.5, end=1.0),
    window=dict(width=2.0, open_at=0.5),
    ig_steps=100,
    ig_tv_weight=1e-2,
    ig_lr=0.1,
    record_every=20,
    prior_samples=8,
    prior_sampling_steps=50,
    weight_users=5,  # users attacked again with λ = 1 (same seed) for the paired λ comparison
    torch_threads=1,  # the attack runs many tiny ops: one thread avoids OpenMP contention on a shared CPU
)

FULL = dict(
    data="celeba",
    users=50,
    image_size=64,
    channels=3,
    batch_size=30,
    large_batch_size=None,
    model="resnet18",
    prior="google/ddpm-celebahq-256",
    steps=4000,
    lr=0.01,
    t_star=200,
    matching_weight=1e5,
    tau=dict(t_max=999, t_min=500, noise=50),
    zeta=dict(start=1.5, end=1.0),
    window=dict(width=6.0, open_at=0.5),
    ig_steps=24000,
    ig_tv_weight=1e-4,
    ig_lr=0.1,
    record_every=500,
    prior_samples=16,
    prior_sampling_steps=1000,
    weight_users=10,
    torch_threads=4,
)


def missing_inputs(settings, data_root: str | Path) -> list[str]:
    """Everything the profile needs that is not on this machine, one line each with the fix (disk checks only).

    The lines name the notebook parameter ``DATA_ROOT`` and the exact download commands.
    """
    from gitutor.federated.users import celeba_missing
    from gitutor.priors import hub_download_command, hub_prior_cached

    missing = []
    if settings.prior not in ("lfw32", "untrained") and not hub_prior_cached(
        settings.prior
    ):
        missing.append(
            f"the diffusion prior {settings.prior!r} is not in the Hugging Face cache: run "
            f"`{hub_download_command(settings.prior)}` on a machine with network (≈450 MB), "
            "then copy the cache here (or point the environment variable $HF_HOME at it); PRETRAINED = False "
            "runs an untrained DDPM instead (a smoke test of the code path, not a result)"
        )
    if settings.data == "celeba" and celeba_missing(data_root):
        missing.append(
            f"CelebA is incomplete under DATA_ROOT = {str(data_root)!r}: missing "
            f"{', '.join(celeba_missing(data_root))}; download img_align_celeba.zip (unzipped) and the "
            "list_*.txt / identity_CelebA.txt files from the CelebA page "
            "(https://mmlab.ie.cuhk.edu.hk/projects/CelebA.html) into DATA_ROOT/celeba, or set DATA_ROOT "
            "to the folder that holds celeba/ (or DATA_ROOT = 'bundled': LFW users, an offline substitute)"
        )
    return missing


#: Budgets applied on top of a profile by the notebook's ``BUDGET`` parameter (``get_profile(..., budget=)``;
#: ``"smoke"``: ``make smoke``).
BUDGETS = {
    "smoke": dict(
        users=[81, 84],
        weight_users=2,
        steps=3,
        ig_steps=3,
        record_every=1,
        prior_samples=2,
        prior_sampling_steps=2,
    ),
}


def chapter_settings(
    cfg,
    budget: str | None = None,
    data_root: str | Path = "data",
    pretrained: bool | None = None,
):
    """The notebook's settings: the profile of ``cfg`` with :data:`BUDGETS` ``[budget]``
    (:func:`gitutor.chapters.get_profile`) and the offline substitutes: ``data_root == "bundled"``: LFW users
    at the profile's size (the quick profile's faces unless the budget names faces); ``pretrained`` False:
    ``prior = "untrained"``.

    Raises:
        ValueError: naming ``BUDGET`` for an unknown budget name.
    """
    from gitutor.chapters import get_profile

    cfg = (
        cfg if budget is None else get_profile(cfg.notebook, cfg.profile, budget=budget)
    )
    if str(data_root) == "bundled":
        cfg = cfg.replace(
            data="lfw",
            users=cfg.users if isinstance(cfg.users, list) else list(QUICK["users"]),
        )
    return cfg.replace(prior="untrained") if pretrained is False else cfg


#: Papermill parameters of ``make smoke`` (scripts/smoke.py): the profile's code path, offline, a few steps.
SMOKE_PARAMETERS = {"DATA_ROOT": "bundled", "PRETRAINED": False, "BUDGET": "smoke"}
