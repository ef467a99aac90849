"""Chapter 01's experiments around DLG (Zhu, Liu & Han 2019; the reproduction report §6 on seeds).

``dlg_case`` builds one seeded attack case (the DLG LeNet, a private image, its label);
``seed_study`` runs DLG on one case per seed and scores it (``score_run``), ``showcase_row`` picks its median
run and ``defense_seed`` the first run recognisable at a given step (the image the page's defended run
attacks), ``psnr_curves`` follows those runs step by step; ``batch_sweep`` and ``source_sweep`` rerun DLG on
batches and other image sources; ``restart_failures`` reruns the runs an attacker sees fail (final gradient
distance at or above ``match_loss``) from a new dummy start; ``dummy_start`` is DLG's N(0, 1) start as a
control beside the book's (:mod:`gitutor.controls`) and ``noise_ladder`` shows an image at given PSNRs
(together the yardstick of the recognisability threshold); ``gradient_scale`` measures the shared gradient's
size, the yardstick a noise σ must be compared with. The defenses of DLG §5 are a recorded study of their own
(:mod:`.defense_study`). The server's view of every run is built with
:func:`gitutor.federated.case.gradient_case`; every attack is :func:`gitutor.attacks.dlg`, run for its whole
budget (no stop rule).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from gitutor.attacks import AttackResult, dlg
from gitutor.checks import check_real
from gitutor.data import (
    REAL_PHOTOGRAPHS,
    digits,
    sample_set,
    torchvision_images,
    whole_photographs,
)
from gitutor.federated.case import Case, gradient_case
from gitutor.metrics import match_batch, psnr, ssim
from gitutor.models import LeNet, init_uniform_
from gitutor.seeding import make_generator
from gitutor.stats import Interval, success_interval

#: ``dlg_case`` sources: ``"<set>_samples"`` are foolbox's 20 real samples with their true labels (offline).
SOURCES = ("cifar100_samples", "mnist_samples", "photos", "digits", "cifar100", "mnist")
#: What the page calls each source (its data set; the prose says whether samples or the test set).
SOURCE_NAMES = {
    "cifar100_samples": "CIFAR-100",
    "mnist_samples": "MNIST",
    "photos": "photographs",
    "digits": "scikit-learn digits",
    "cifar100": "CIFAR-100",
    "mnist": "MNIST",
}


def dlg_case(
    seed: int,
    *,
    size: int = 32,
    source: str = "cifar100_samples",
    batch_size: int = 1,
    num_classes: int = 100,
    data_root: str = "data",
    device: str | torch.device = "cpu",
):
    """``(model, x, y)``: the DLG LeNet (U(−0.5, 0.5) from ``seed``) and a private batch drawn by ``seed``.

    ``"cifar100_samples"`` / ``"mnist_samples"``: foolbox's 20 real CIFAR-100 / MNIST test samples
    (:func:`gitutor.data.sample_set`, the DLG paper's data) with their true labels, sample
    ``(seed + i) mod 20`` for batch position ``i``; ``"photos"``: whole bundled photographs of real scenes (:data:`gitutor.data.REAL_PHOTOGRAPHS`, photo
    ``seed mod 12`` first) with random labels; ``"digits"``:
    scikit-learn digits; ``"cifar100"``/``"mnist"``: torchvision test images from ``data_root`` (full
    profile). Grey images are replicated to 3 channels. ``x`` is ``(batch_size, 3, size, size)``.

    Raises:
        ValueError: for an unknown ``source``. OfflineDataError: a torchvision dataset is not on disk.
    """
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    generator = make_generator(seed)
    model = init_uniform_(
        LeNet(num_classes=num_classes, in_channels=3, image_size=size),
        0.5,
        make_generator(seed),
    )
    if source.endswith(
        "_samples"
    ):  # sample ``seed + i`` (mod 20): distinct images for distinct seeds
        pool, pool_labels = sample_set(source.removesuffix("_samples"), size)
        index = torch.tensor([(seed + i) % len(pool) for i in range(batch_size)])
        images, labels = pool[index], pool_labels[index]
    elif source == "photos":
        pool = whole_photographs(size, REAL_PHOTOGRAPHS)
        images = pool[[(seed + i) % len(pool) for i in range(batch_size)]]
        labels = torch.randint(num_classes, (batch_size,), generator=generator)
    elif source == "digits":
        pool, pool_labels = digits(size=size)
        index = torch.randperm(len(pool), generator=generator)[:batch_size]
        images, labels = pool[index], pool_labels[index]
    else:
        images, labels = torchvision_images(
            source, batch_size, root=data_root, size=size, seed=seed
        )
    return (
        model.to(device),
        images.expand(-1, 3, -1, -1).contiguous().to(device),
        labels.to(device),
    )


def score_run(
    seed: int, result: AttackResult, x: torch.Tensor, y: torch.Tensor
) -> dict:
    """``{seed, psnr (dB, mean over the batch), ssim, label_ok, loss, steps, truth, result}`` of one DLG run on
    ``(x, y)``. The reconstruction is scored clipped to [0, 1] (it estimates an image in [0, 1]); ``loss`` is
    the gradient distance at the returned reconstruction (``info["final_loss"]`` of
    :func:`gitutor.attacks.dlg`: what the attacker sees, after the last step) and ``steps`` the L-BFGS steps it computed:
    the whole budget, or fewer when L-BFGS reached a fixed point of its iteration (a step that left the
    dummy unchanged, ``info["converged_at"]``; every later step would repeat it), or a stop rule's step
    (``info["stopped_at"]``; chapter 01 passes none)."""
    truth, images = x.cpu(), result.images.clamp(0, 1)
    info = result.info  # a stop rule's step, a fixed point's, else every step run
    steps = info.get(
        "stopped_at", info.get("converged_at", len(result.history.get("loss", [])))
    )
    return {
        "seed": seed,
        "psnr": float(psnr(images, truth).mean()),
        "ssim": float(ssim(images, truth).mean()),
        "label_ok": bool((result.labels == y.cpu()).all()),
        "loss": info["final_loss"],
        "steps": steps,
        "truth": truth,
        "result": result,
    }


def seed_study(
    seeds: Sequence[int],
    *,
    iterations: int,
    line_search: str | None = None,
    record_every: int = 10,
    dummy_offset: int = 0,
    progress: bool = False,
    **case,
) -> list[dict]:
    """DLG (label unknown) on ``dlg_case(seed, **case)`` for every seed: one :func:`score_run` dict per seed.

    The seed draws the model, the image, the label and (shifted by ``dummy_offset``) the dummy start
    together (the report's "random seed", §6). Each seed is one call of :func:`gitutor.attacks.dlg` for
    ``iterations`` L-BFGS steps, with no stop rule (the paper runs its whole budget); ``line_search`` is
    DLG's. ``case`` goes to :func:`dlg_case`.

    Raises:
        ValueError: as :func:`dlg_case` (for every seed, before any attack runs) and
            :func:`gitutor.attacks.dlg` (e.g. ``iterations < 1``; the first attack, before it runs).
    """
    views = [gradient_case(*dlg_case(seed, **case)) for seed in seeds]
    options = {
        "iterations": iterations,
        "record_every": record_every,
        "line_search": line_search,
        "progress": progress,
    }
    results = [
        attack(view, seed=seed + dummy_offset, **options)
        for seed, view in zip(seeds, views)
    ]
    return [
        score_run(seed, result, view.inputs, view.labels)
        for seed, result, view in zip(seeds, results, views)
    ]


def showcase_row(rows: Sequence[dict]) -> dict:
    """The median run of a :func:`seed_study` by PSNR (the upper median, ``sorted(rows)[n // 2]``, for an even
    n; ties keep the rows' order): the run the page shows as representative, one the study made.

    Raises:
        ValueError: if ``rows`` is empty.
    """
    if not rows:
        raise ValueError("rows must hold at least one seed_study run")
    return sorted(rows, key=lambda row: row["psnr"])[len(rows) // 2]


def defense_seed(rows: Sequence[dict], step: int, threshold: float) -> int:
    """The seed the page's defended run attacks: the first :func:`seed_study` run (in the rows' order) whose
    snapshot at ``step`` (the defended run's L-BFGS budget) has PSNR ≥ ``threshold`` dB, clipped to [0, 1]. An
    undefended run on that seed's case and dummy start repeats that run's first ``step`` steps, so DLG
    recovers the image without a defense and a defense has something to stop. The first row's seed when no
    run is recognisable there (or none has a snapshot at ``step``).

    Raises:
        ValueError: if ``rows`` is empty.
    """
    if not rows:
        raise ValueError("rows must hold at least one seed_study run")
    for row in rows:
        snapshot = dict(row["result"].snapshots).get(step)
        if (
            snapshot is not None
            and float(psnr(snapshot.clamp(0, 1), row["truth"]).mean()) >= threshold
        ):
            return row["seed"]
    return rows[0]["seed"]


def restart_failures(
    rows: Sequence[dict],
    *,
    match_loss: float,
    offset: int = 1000,
    limit: int | None = None,
    **study,
) -> dict[int, dict]:
    """Rerun, from a new dummy start (seed + ``offset``), every :func:`seed_study` run whose final gradient
    distance stayed at or above ``match_loss`` (the run did not match the client's gradient): the failures an
    attacker sees without knowing the image (only the first ``limit`` of them, in the rows' order, when
    ``limit`` is given: a CPU budget). ``match_loss`` is a criterion read after the run, never a stop rule.

    Returns ``{seed: score_run dict of the restart}``; ``study`` (iterations, record_every, size, …) goes
    to :func:`seed_study`.

    Raises:
        ValueError: for a ``match_loss`` that is not a positive finite number.
    """
    match_loss = check_real(match_loss, "match_loss", low=0.0, low_open=True)
    failed = [row["seed"] for row in rows if not row["loss"] < match_loss][:limit]
    return {
        row["seed"]: row for row in seed_study(failed, dummy_offset=offset, **study)
    }


def attack(case: Case, **options) -> AttackResult:
    """DLG (labels unknown) from the server's view of ``case``; ``options`` go to :func:`gitutor.attacks.dlg`."""
    view = case.server_view
    return dlg(
        view["model"],
        view["update"],
        tuple(case.inputs.shape),
        view["model"].fc.out_features,
        **options,
    )


def psnr_curves(studies: Mapping[str, Sequence[dict]], threshold: float):
    """PSNR (dB, batch mean, snapshot clipped to [0, 1]) at every snapshot of every :func:`seed_study` run
    (after an L-BFGS fixed point, the iterate it stopped at: :func:`gitutor.attacks.loop.optimise_images`).

    Returns ``(curves, reached)``: ``curves[f"{name}, seed {s}"] = (steps, psnr values)`` and
    ``reached[(name, s)]``, the first recorded step with PSNR ≥ ``threshold`` (None if never).
    """
    curves, reached = {}, {}
    for name, rows in studies.items():
        for row in rows:
            steps, values = zip(
                *[
                    (step, float(psnr(images.clamp(0, 1), row["truth"]).mean()))
                    for step, images in row["result"].snapshots
                ]
            )
            curves[f"{name}, seed {row['seed']}"] = (steps, values)
            reached[name, row["seed"]] = next(
                (s for s, v in zip(steps, values) if v >= threshold), None
            )
    return curves, reached


def success_rates(
    studies: Mapping[str, Sequence[dict]], threshold: float
) -> dict[str, Interval]:
    """Per study name, the fraction of :func:`seed_study` runs with PSNR ≥ ``threshold`` dB and its 95 %
    Wilson interval (:func:`gitutor.stats.success_interval`; the report's "success rate", §6).

    Raises:
        ValueError: if a study has no runs.
    """
    return {
        name: success_interval([row["psnr"] >= threshold for row in rows])
        for name, rows in studies.items()
    }


def batch_sweep(
    batch_sizes: Sequence[int],
    *,
    iterations: int,
    seed: int = 0,
    progress: bool = False,
    **case,
) -> list[dict]:
    """DLG on a batch of each size (DLG Fig. 4): ``[{"B", "psnr" (dB, mean after clipping to [0, 1] and
    Hungarian matching on MSE),
    "images" ((2B, C, H, W): the truth, then the matched reconstructions)}]``; ``case`` goes to :func:`dlg_case`."""
    rows = []
    for batch_size in batch_sizes:
        view = gradient_case(*dlg_case(seed, batch_size=batch_size, **case))
        truth = view.inputs.cpu()
        found = attack(
            view, iterations=iterations, seed=seed, progress=progress
        ).images.clamp(0, 1)
        matched = match_batch(found, truth)
        rows.append(
            {
                "B": batch_size,
                "psnr": float(psnr(matched, truth).mean()),
                "images": torch.cat([truth, matched]),
            }
        )
    return rows


def source_sweep(
    sources: Sequence[str],
    *,
    iterations: int,
    seed: int = 0,
    progress: bool = False,
    **case,
) -> dict[str, tuple[float, AttackResult, torch.Tensor]]:
    """DLG on one image of each source: ``{source: (psnr dB of the image clipped to [0, 1], result with 5
    snapshots, (1, 3, H, W) truth)}``."""
    out = {}
    for source in sources:
        view = gradient_case(*dlg_case(seed, **dict(case, source=source)))
        run = attack(
            view,
            iterations=iterations,
            seed=seed,
            record_every=max(1, iterations // 5),
            progress=progress,
        )
        out[source] = (
            float(psnr(run.images.clamp(0, 1), view.inputs.cpu())[0]),
            run,
            view.inputs.cpu(),
        )
    return out


def noise_ladder(
    image: torch.Tensor, levels: Sequence[float], seed: int = 0
) -> list[tuple[float, torch.Tensor]]:
    """``image`` ``(1, C, H, W)`` in [0, 1] with Gaussian pixel noise of σ = 10^(−level/20) added for every
    PSNR ``level`` (dB) and the result clipped to [0, 1]: ``[(measured PSNR dB, noisy image)]``. The
    yardstick for a recognisability threshold: how the photograph looks at a given PSNR.

    Raises:
        ValueError: for an image that is not one ``(1, C, H, W)`` image or an empty ``levels``.
    """
    if image.dim() != 4 or image.shape[0] != 1 or not levels:
        raise ValueError(
            f"image must be (1, C, H, W) and levels non-empty, got {tuple(image.shape)} and {levels!r}"
        )
    generator = make_generator(seed)
    out = []
    for level in levels:
        noise = torch.randn(image.shape, generator=generator) * 10 ** (-level / 20)
        noisy = (image.cpu() + noise).clamp(0, 1)
        out.append((float(psnr(noisy, image.cpu())[0]), noisy))
    return out


def dummy_start(shape: Sequence[int], seed: int = 0) -> torch.Tensor:
    """DLG's dummy start as a control: ``x' ~ N(0, 1)`` of ``shape`` ``(N, C, H, W)`` (DLG Algorithm 1, line 2),
    drawn from ``seed`` and clipped to [0, 1] as every reconstruction of the chapter is scored (the
    attack's step 0 knows nothing of the image).

    Raises:
        ValueError: for a ``shape`` that is not ``(N, C, H, W)``.
    """
    if len(shape) != 4:
        raise ValueError(f"shape must be (N, C, H, W), got {tuple(shape)}")
    return torch.randn(tuple(shape), generator=make_generator(seed)).clamp(0, 1)


def gradient_scale(grads: Sequence[torch.Tensor]) -> dict[str, float]:
    """Root-mean-square and median absolute value of all gradient entries, and the largest entry's size.

    A Gaussian defense of standard deviation σ drowns entries smaller than σ: compare σ with these.
    """
    flat = torch.cat([g.detach().flatten().abs() for g in grads])
    return {
        "rms": float(flat.pow(2).mean().sqrt()),
        "median_abs": float(flat.median()),
        "max_abs": float(flat.max()),
    }
