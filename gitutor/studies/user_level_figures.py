"""Chapter 05's figures: Algorithm 1's schedules (Li et al. 2023, App. C, Fig. 5) and the identity matrices."""
from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
import torch

from gitutor.seeding import make_generator
from gitutor.viz import plot_curves


def schedules_figure(schedules: Mapping, steps: int, n_tensors: int, seed: int = 0):
    """Three panels for ``steps`` steps: τ_i with its noise (drawn from ``seed``) and its mean (Fig. 5a), ζ_i,
    and the layer window's weight of each of ``n_tensors`` parameter tensors per step (Fig. 5b).

    ``schedules``: :func:`gitutor.studies.diffusion_user_level.attack_schedules`. Returns the figure.

    Raises:
        ValueError: if ``steps`` or ``n_tensors`` is below 1.
    """
    if steps < 1 or n_tensors < 1:
        raise ValueError(f"steps and n_tensors must be >= 1, got {steps} and {n_tensors}")
    tau, zeta, window = schedules["tau_schedule"], schedules["zeta_schedule"], schedules["layer_window"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.2))
    plot_curves({"τ_i (with noise)": tau.sample(steps, make_generator(seed)).tolist(), "mean": tau.mean(steps).tolist()},
                xlabel="step i", ylabel="diffusion time τ", title="time schedule (Fig. 5a)", ax=axes[0])
    plot_curves({"ζ_i": zeta.values(steps).tolist()}, xlabel="step i", ylabel="ζ", title="clipping ratio", ax=axes[1])
    weights = torch.stack([window.weights(n_tensors, i / max(steps - 1, 1)) for i in range(steps)])
    image = axes[2].imshow(weights.T, aspect="auto", origin="lower", cmap="viridis")
    axes[2].set(xlabel="step i", ylabel="parameter tensor (0 = input side)", title="layer window (Fig. 5b)")
    fig.colorbar(image, ax=axes[2])
    fig.tight_layout()
    return fig


def identity_matrices(mse_matrix: np.ndarray, ssim_matrix: np.ndarray):
    """The ``(U, U)`` MSE and SSIM matrices of representative i against user j's mean photo, side by side."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for ax, matrix, title in zip(axes, (mse_matrix, ssim_matrix), ("MSE to user j's mean photo ↓", "SSIM to it ↑")):
        ax.imshow(matrix, cmap="viridis")
        ax.set(xlabel="user j", ylabel="representative of user i", title=title)
    fig.tight_layout()
    return fig
