"""Chapter 04's figures: which parameter tensors the stepwise attack matches when, each method's loss,
and its quality along a recorded run (Ye et al. Stage II), each readable at page width
(:func:`gitutor.viz.legible`: text at least the body's size)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import torch

from gitutor.attacks.stepwise_schedule import StepwiseSchedule
from gitutor.stats import BOUNDS, interval
from gitutor.viz import legible


def schedule_figure(
    schedules: Mapping[str, StepwiseSchedule], block_start: Mapping[str, int]
):
    """One panel per schedule (title → schedule): the start index s(t) against t, the residual blocks'
    first tensors (dotted), T1 (TV on), T2 (R_BN on) and the lr steps (purple). Returns the figure.

    Raises:
        ValueError: if ``schedules`` is empty.
    """
    if not schedules:
        raise ValueError("schedules must map at least one title to a StepwiseSchedule")
    fig, axes = plt.subplots(
        1, len(schedules), figsize=(4 * len(schedules), 3.6), squeeze=False
    )
    for ax, (title, sched) in zip(axes[0], schedules.items()):
        ts = range(sched.iterations)
        ax.step(
            ts,
            [sched.start_index(t) for t in ts],
            where="post",
            label="start index s(t)",
        )
        for block, index in block_start.items():
            ax.axhline(index, color="grey", lw=0.6, ls=":")
            ax.text(sched.iterations, index, f" {block}", va="bottom", ha="right")
        ax.axvline(sched.t1, color="tab:green", ls="--", label="T1: TV on")
        ax.axvline(sched.t2, color="tab:red", ls="--", label="T2: R_BN on")
        for m in sched.lr_milestones:
            ax.axvline(m, color="tab:purple", lw=0.8, alpha=0.6)
        ax.set(
            title=title,
            xlabel="iteration t",
            ylabel="first matched tensor",
            ylim=(0, sched.start + 12),
        )
    fig.legend(
        *axes[0][0].get_legend_handles_labels(),
        loc="lower center",
        ncol=3,
        frameon=False,
    )
    fig.suptitle("tensors ≥ s(t) are matched; purple lines: lr × 0.33")
    legible(fig)
    fig.subplots_adjust(bottom=0.3)
    return fig


def loss_curves(losses: Mapping[str, list[float]], dlg_inner_steps: int):
    """Each method's objective per iteration on a log axis (method → per-step losses); DLG's L-BFGS step k
    is placed at iteration ``dlg_inner_steps · k``, the count of its gradient evaluations. Returns the figure.

    Raises:
        ValueError: if ``dlg_inner_steps`` is below 1.
    """
    if dlg_inner_steps < 1:
        raise ValueError(f"dlg_inner_steps must be >= 1, got {dlg_inner_steps}")
    fig, ax = plt.subplots(figsize=(8, 3.4))
    for method, loss in losses.items():
        step = dlg_inner_steps if method == "DLG" else 1
        ax.plot([step * (t + 1) for t in range(len(loss))], loss, label=method, lw=1)
    ax.set(
        xlabel="iteration (image updates / gradient evaluations)",
        ylabel="objective",
        yscale="log",
        title="loss curves, batch 0",
    )
    ax.legend(ncol=2)
    return legible(fig)


def along_run(curves: Mapping[str, Sequence[torch.Tensor]]):
    """PSNR and SSIM along each method's run (method → one (K, 3) curve per batch: iteration, PSNR,
    SSIM, as :func:`gitutor.chapters.stepwise_gradinversion.recording.snapshot_curve`), mean over the batches with
    its 95 % interval as a band, log iteration axis from the first snapshot after x_0. Returns the
    figure.

    Raises:
        ValueError: if ``curves`` is empty or a method's batches were snapshotted at different iterations.
    """
    if not curves:
        raise ValueError("curves must map at least one method to its per-batch curves")
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    for method, per_batch in curves.items():
        if any(not torch.equal(c[:, 0], per_batch[0][:, 0]) for c in per_batch):
            raise ValueError(
                f"the batches of {method!r} were snapshotted at different iterations"
            )
        ts = per_batch[0][1:, 0].numpy()
        for ax, column, metric in zip(axes, (1, 2), ("PSNR", "SSIM")):
            spans = [
                interval(
                    [float(c[k, column]) for c in per_batch], bounds=BOUNDS[metric]
                )
                for k in range(1, len(ts) + 1)
            ]
            (line,) = ax.plot(ts, [s.mean for s in spans], label=method)
            ax.fill_between(
                ts,
                [s.low for s in spans],
                [s.high for s in spans],
                color=line.get_color(),
                alpha=0.2,
            )
            ax.set(
                xscale="log",
                xlabel="iteration (log)",
                ylabel=metric + (" (dB)" if metric == "PSNR" else ""),
            )
    axes[0].legend()
    fig.suptitle(f"along the run: mean and 95 % interval over {len(per_batch)} batches")
    return legible(fig)
