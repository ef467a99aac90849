"""Chapter 05's figures (Li et al. 2023): the users, Algorithm 1's schedules (App. C, Fig. 5) and its
course on one user (Fig. 4b), the matching weight, the runs' budgets, Table 1a's examples, the identity matrices and
the failure case (App. D)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

from gitutor.seeding import make_generator
from gitutor.viz import legible, plot_curves, show_grid


def schedules_figure(schedules: Mapping, steps: int, n_tensors: int, seed: int = 0):
    """Three panels for ``steps`` steps: τ_i with its noise (drawn from ``seed``, legend "τ_i") and its mean (Fig. 5a), ζ_i,
    and the layer window's weight of each of ``n_tensors`` parameter tensors per step (Fig. 5b).

    ``schedules``: :func:`gitutor.chapters.diffusion_user_level.experiments.attack_schedules`. Returns the figure.

    Raises:
        ValueError: if ``steps`` or ``n_tensors`` is below 1.
    """
    if steps < 1 or n_tensors < 1:
        raise ValueError(
            f"steps and n_tensors must be >= 1, got {steps} and {n_tensors}"
        )
    tau, zeta, window = (
        schedules["tau_schedule"],
        schedules["zeta_schedule"],
        schedules["layer_window"],
    )
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.6))
    plot_curves(
        {
            "τ_i": tau.sample(steps, make_generator(seed)).tolist(),
            "mean": tau.mean(steps).tolist(),
        },
        xlabel="step i",
        ylabel="diffusion time τ",
        title="time schedule (Fig. 5a)",
        ax=axes[0],
    )
    axes[0].legend(
        loc="lower left"
    )  # the curves run from top left to bottom right: the corner is empty
    plot_curves(
        {"ζ_i": zeta.values(steps).tolist()},
        xlabel="step i",
        ylabel="ζ",
        title="clipping ratio",
        ax=axes[1],
    )
    weights = torch.stack(
        [window.weights(n_tensors, i / max(steps - 1, 1)) for i in range(steps)]
    )
    image = axes[2].imshow(weights.T, aspect="auto", origin="lower", cmap="viridis")
    axes[2].set(
        xlabel="step i", ylabel="tensor (0 = input)", title="layer window (Fig. 5b)"
    )
    axes[0].set_title("τ schedule (Fig. 5a)")
    fig.colorbar(image, ax=axes[2])
    return legible(fig)


def identity_matrices(matrices: Mapping[str, np.ndarray]):
    """One panel per entry of ``matrices``: the ``(U, U)`` correlation of representative i with user j's
    mean photo, images standardised (:func:`~gitutor.attacks.user_level.identity.correlation_matrix`).
    A bright diagonal: each representative resembles its own user more than the others. All panels share one
    colour scale. Returns the figure."""
    fig, axes = plt.subplots(
        1, len(matrices), figsize=(4.4 * len(matrices), 3.8), squeeze=False
    )
    low, high = (
        min(float(np.min(m)) for m in matrices.values()),
        max(float(np.max(m)) for m in matrices.values()),
    )
    for ax, (name, matrix) in zip(
        axes[0], matrices.items()
    ):  # one colour scale, so panels compare
        image = ax.imshow(matrix, cmap="viridis", vmin=low, vmax=high)
        ax.set(
            xlabel="user j (mean photo)", ylabel="representative of user i", title=name
        )
        fig.colorbar(image, ax=ax, fraction=0.046, label="correlation r")
    return legible(fig)


def users_figures(users, shown: int = 16):
    """One photo of each user (titled with its label), then ``shown`` of user 0's photos.

    ``users``: ``[(x (B, C, H, W) in [0, 1], y (B,))]`` per user, as
    :func:`gitutor.chapters.diffusion_user_level.experiments.chapter_users` returns. Returns the two figures.

    Raises:
        ValueError: if ``users`` is empty.
    """
    if not users:
        raise ValueError("users is empty: the chapter needs at least one user")
    firsts = torch.cat([x[:1].cpu() for x, _ in users])
    titles = [f"{k} ({int(y[0])})" for k, (_, y) in enumerate(users)]
    batch = users[0][0]
    first = show_grid(
        firsts,
        titles=titles,
        ncols=len(users),
        scale=min(1.4, 9.5 / len(users)),
        suptitle="one photo of each user (title: user (label))",
    )
    title = f"user 0: {min(shown, len(batch))} of its B = {len(batch)} photos"
    return legible(first), legible(
        show_grid(batch[:shown].cpu(), ncols=8, scale=1.1, suptitle=title)
    )


def attack_figures(result, truth: torch.Tensor, t_star: int):
    """Algorithm 1 on one user (Li et al. Fig. 4b): x̂ at the recorded steps, the denoised image
    (``result.images``, ``(1, C, H, W)``) and the mean of the user's ``(B, C, H, W)`` photos ``truth``;
    then the cosine gradient distance per step. Returns ``(figure, axes of the curve)``."""
    strip = torch.cat(
        [image for _, image in result.snapshots]
        + [result.images, truth.mean(0, keepdim=True).cpu()]
    )
    titles = [f"step {i}" for i, _ in result.snapshots] + [
        f"denoised\n(t*={t_star})",
        "batch\nmean",
    ]
    ncols = (
        (len(titles) + 1) // 2 if len(titles) > 5 else len(titles)
    )  # two rows: thumbnails stay legible
    fig = legible(
        show_grid(strip, titles=titles, ncols=ncols, scale=min(1.6, 9.5 / ncols))
    )
    ax = plot_curves(
        {"cosine gradient distance": result.history["gradient_distance"]},
        xlabel="step",
        ylabel="1 − cosine (no unit)",
        title="matching loss during Algorithm 1",
    )
    legible(ax.figure)
    return fig, ax


def matching_weight_figures(plain: Sequence, weighted: Sequence, weight: float):
    """Why λ matters (Eq. 14 as written vs weighted), paired: the ratio ‖λ∇d‖ / ‖g_p‖ per step for λ = 1
    (``plain[0]``) and λ = ``weight`` (``weighted[0]``), both user 0 with the same seed, with the clip ζ_i,
    on a log axis; then users 0 and 1, each with λ = 1 next to λ = ``weight`` (same seed).
    ``plain``/``weighted``: :func:`gitutor.chapters.diffusion_user_level.experiments.diffula_users` (>= 2 users).
    Returns ``(axes of the curves, image figure)``.

    Raises:
        ValueError: naming ``plain`` if it or ``weighted`` holds fewer than two users.
    """
    if min(len(plain), len(weighted)) < 2:
        raise ValueError(
            f"plain and weighted must hold >= 2 users, got {len(plain)} and {len(weighted)}"
        )
    curves = {
        "λ = 1": plain[0].history["grad_ratio"],
        f"λ = {weight:g}": weighted[0].history["grad_ratio"],
        "ζ_i (the clip)": weighted[0].history["zeta"],
    }
    ax = plot_curves(
        curves,
        xlabel="step",
        ylabel="‖λ∇d‖ / ‖g_p‖",
        logy=True,
        title="matching vs prior gradient, user 0",
    )
    legible(ax.figure)
    images = torch.cat(
        [plain[0].images, weighted[0].images, plain[1].images, weighted[1].images]
    ).cpu()
    titles = [f"user {k}, λ = {w}" for k in (0, 1) for w in ("1", f"{weight:g}")]
    return ax, legible(show_grid(images, titles=titles, ncols=4, scale=1.8))


def budget_figure(baseline: Sequence, diffula: Sequence):
    """The matching loss d(F(𝒜(x̂)), ∇w) over each run's steps, median over users with the band from the
    lowest to the highest user: the user-level Inverting Gradients runs (``baseline``) and DiffULA's
    (``diffula``), each an :class:`~gitutor.attacks.result.AttackResult` with
    ``history["gradient_distance"]``. Dashed lines mark Inverting Gradients' learning-rate drops (×0.1
    at 3/8, 5/8 and 7/8 of its steps, :func:`~gitutor.attacks.inverting_gradients.step_milestones`): a
    curve flat after them has stopped moving, which is not convergence. Returns the axes.

    Raises:
        ValueError: naming ``baseline`` or ``diffula`` when it holds no run.
    """
    from gitutor.attacks.inverting_gradients import step_milestones

    fig, ax = plt.subplots(figsize=(7, 3.6))
    for name, runs, label in (
        ("baseline", baseline, "IG user level, no prior"),
        ("diffula", diffula, "DiffULA (before its final denoising)"),
    ):
        if not runs:
            raise ValueError(f"{name} must hold at least one run, got none")
        curves = np.array([r.history["gradient_distance"] for r in runs], dtype=float)
        steps = np.arange(1, curves.shape[1] + 1)
        (line,) = ax.plot(steps, np.median(curves, axis=0), label=label)
        ax.fill_between(
            steps, curves.min(0), curves.max(0), color=line.get_color(), alpha=0.2
        )
    for milestone in step_milestones(len(baseline[0].history["gradient_distance"])):
        ax.axvline(milestone, color="grey", linestyle="--", linewidth=0.8)
    ax.set(
        xlabel="step",
        ylabel="matching loss (cosine distance)",
        yscale="log",
        title="matching loss over each run's budget (median, range over users)",
    )
    ax.legend()
    legible(fig)
    return ax


def examples_figure(examples: Sequence):
    """Per user one row (Table 1a's methods side by side): a photo, the batch mean, the matched
    sample-level IG image, user-level IG without prior, DiffULA.

    ``examples``: :func:`gitutor.chapters.diffusion_user_level.experiments.evaluate_users`'s second output.
    Returns the figure."""
    grid, titles = [], []
    for truth, matched, user_ig, diff in examples:
        grid += [
            truth[0:1],
            truth.mean(0, keepdim=True),
            matched[0:1],
            user_ig.images,
            diff.images,
        ]
        titles += (
            [""] * 5
            if titles
            # column titles on the first row only
            else [
                "a photo",
                "batch\nmean",
                "IG sample\n(matched)",
                "IG user,\nno prior",
                "DiffULA",
            ]
        )
    return legible(show_grid(torch.cat(grid), titles=titles, ncols=5, scale=1.6))


def failure_figure(truth: torch.Tensor, diff, shown: int = 6):
    """App. D's failure case: ``shown`` of the user's ``(B, C, H, W)`` photos, their mean, DiffULA's x̂
    before the final denoising (its last snapshot) and after (``diff.images``). Returns the figure."""
    shown = min(shown, len(truth))
    images = torch.cat(
        [truth[:shown], truth.mean(0, keepdim=True), diff.snapshots[-1][1], diff.images]
    )
    titles = [f"photo {i}" for i in range(shown)] + [
        "batch\nmean",
        "before\ndenoising",
        "DiffULA",
    ]
    ncols = (len(titles) + 1) // 2  # two rows: thumbnails stay legible at page width
    return legible(
        show_grid(images, titles=titles, ncols=ncols, scale=min(1.6, 9.5 / ncols))
    )
