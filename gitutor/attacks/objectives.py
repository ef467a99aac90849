"""Gradient-matching objectives and image priors shared by the optimisation attacks.

- squared-L2 gradient distance: DLG (Zhu et al. 2019, Algorithm 1 line 5);
- cosine gradient distance: Inverting Gradients (Geiping et al. 2020, Eq. 4), also the matching
  term of stepwise GradInversion (Ye et al. 2024, Eq. 9–10) and of the user-level attack
  (Li et al. 2023, Eq. 6);
- total variation TV: Inverting Gradients (Eq. 4) and Ye et al. (Eq. 11); the authors' code's
  TV (breaching's, :func:`breaching_total_variation`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from gitutor.checks import check_layout, input_channels
from gitutor.federated.client import check_parameter_list


def check_target_gradients(
    model: nn.Module, target_grads: Sequence[torch.Tensor]
) -> list[torch.Tensor]:
    """Check that ``target_grads`` is aligned with ``model.parameters()`` and finite.

    Returns:
        The gradients as a list of detached tensors.

    Raises:
        TypeError: if ``target_grads`` is not a sequence of tensors, or one is not floating point.
        ValueError: on a count mismatch, or naming the first parameter whose gradient has the wrong
            shape or contains NaN/inf.
    """
    grads = check_parameter_list(model, target_grads, "target_grads")
    for (name, _), grad in zip(model.named_parameters(), grads):
        if not torch.isfinite(grad).all():
            raise ValueError(f"gradient for parameter {name!r} contains NaN or inf")
    return [g.detach() for g in grads]


def check_input_shape(
    input_shape: Sequence[int], model: nn.Module | None = None
) -> tuple[int, ...]:
    """``input_shape`` as a tuple ``(B, C, H, W)`` of positive ints, channels first.

    Args:
        input_shape: the shape of the private batch.
        model: when given, C must equal the ``in_channels`` of its first convolution.

    Raises:
        ValueError: naming ``input_shape`` if it does not have four positive entries, C differs from
            the model's input channels, or it looks channels-last ``(B, H, W, C)`` (last entry 1 or 3,
            C neither; :func:`gitutor.checks.check_layout`).
    """
    shape = tuple(int(s) for s in input_shape)
    if len(shape) != 4 or min(shape) < 1:
        raise ValueError(
            f"input_shape must be (B, C, H, W) with positive sizes, got {input_shape!r}"
        )
    return check_layout(shape, "input_shape", channels=input_channels(model))


def _check_pair(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> None:
    if len(a) != len(b):
        raise ValueError(f"gradient lists differ in length: {len(a)} vs {len(b)}")
    for i, (x, y) in enumerate(zip(a, b)):
        if x.shape != y.shape:
            raise ValueError(
                f"gradient tensor {i} differs in shape: {tuple(x.shape)} vs {tuple(y.shape)}"
            )


def gradient_l2_distance(
    dummy: Sequence[torch.Tensor], target: Sequence[torch.Tensor]
) -> torch.Tensor:
    """DLG's distance Σ_l ||∇W'_l − ∇W_l||² (Zhu et al. 2019, Algorithm 1 line 5), a scalar tensor.

    Raises:
        ValueError: if the lists differ in length or any pair differs in shape.
    """
    _check_pair(dummy, target)
    return sum(((d - t) ** 2).sum() for d, t in zip(dummy, target))


def cosine_gradient_distance(
    dummy: Sequence[torch.Tensor],
    target: Sequence[torch.Tensor],
    *,
    indices: Sequence[int] | None = None,
    masks: Sequence[torch.Tensor] | None = None,
) -> torch.Tensor:
    """Cosine gradient distance 1 − ⟨g', g⟩ / (||g'|| ||g||) over the chosen parameter tensors.

    The inner product and norms run over all selected tensors together, as in Inverting Gradients
    (Geiping et al. 2020, Eq. 4). Stepwise GradInversion (Ye et al. 2024, Eq. 10) selects the
    deep tensors with ``indices`` and drops entries of both gradients with ``masks``.

    Args:
        dummy, target: gradient lists aligned with ``model.parameters()``.
        indices: which tensors to use (default: all).
        masks: one 0/1 tensor per selected tensor (same order as ``indices``), multiplied into both
            gradients.

    Returns:
        Scalar tensor in [0, 2].

    Raises:
        ValueError: on mismatched lists or masks, or an empty selection.
    """
    _check_pair(dummy, target)
    selected = list(range(len(dummy))) if indices is None else list(indices)
    if not selected:
        raise ValueError("indices selects no gradient tensor")
    if masks is not None and len(masks) != len(selected):
        raise ValueError(f"got {len(masks)} masks for {len(selected)} selected tensors")
    dot = norm_dummy = norm_target = 0.0
    for position, i in enumerate(selected):
        d, t = dummy[i], target[i]
        if masks is not None:
            d, t = d * masks[position], t * masks[position]
        dot = dot + (d * t).sum()
        norm_dummy = norm_dummy + d.pow(2).sum()
        norm_target = norm_target + t.pow(2).sum()
    return 1 - dot / (norm_dummy.sqrt() * norm_target.sqrt() + 1e-12)


class _FusedCosine(torch.autograd.Function):
    """1 − ⟨d ⊙ m, t⟩ / (‖d ⊙ m‖ ‖t ⊙ m‖) over lists of tensors, fused, into reused buffers.

    ``apply(target_norm, buffers, count, d_1…d_n, t_1…t_n[, m_1…m_n])`` with 0/1 float masks m
    (optional), ``target_norm`` = ‖t ⊙ m‖ and ``buffers = (kept, grads)``, two lists of one
    buffer per d_i reused every call (d ⊙ m, and the returned gradient). The gradient with respect to d_i is
    a·(t_i ⊙ m_i) + b·(d_i ⊙ m_i) with a = −1/D, b = ⟨d ⊙ m, t⟩‖t‖/(‖d ⊙ m‖ D²), D = ‖d‖‖t‖ + 1e−12.
    """

    @staticmethod
    def forward(
        ctx,
        target_norm: torch.Tensor,
        buffers: tuple[list[torch.Tensor], list[torch.Tensor]],
        count: int,
        *tensors: torch.Tensor,
    ) -> torch.Tensor:
        candidate, target, masks = (
            tensors[:count],
            tensors[count : 2 * count],
            tensors[2 * count :],
        )
        kept = (
            [torch.mul(d, m, out=k) for d, m, k in zip(candidate, masks, buffers[0])]
            if masks
            else candidate
        )
        dot = sum(torch.dot(d.reshape(-1), t.reshape(-1)) for d, t in zip(kept, target))
        norm = torch.sqrt(sum(torch.dot(d.reshape(-1), d.reshape(-1)) for d in kept))
        denominator = norm * target_norm + 1e-12
        ctx.kept, ctx.target, ctx.masks, ctx.grads = kept, target, masks, buffers[1]
        ctx.values = dot, norm, target_norm, denominator
        return 1 - dot / denominator

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: torch.Tensor):
        dot, norm, target_norm, denominator = ctx.values
        a = float(-grad / denominator)
        b = float(grad * dot * target_norm / (norm * denominator**2))
        grads = [torch.mul(d, b, out=out) for d, out in zip(ctx.kept, ctx.grads)]
        for g, t, m in zip(grads, ctx.target, ctx.masks or [None] * len(grads)):
            g.add_(t, alpha=a) if m is None else g.addcmul_(t, m, value=a)
        return (None, None, None, *grads, *[None] * (len(ctx.target) + len(ctx.masks)))


class CosineToTarget:
    """The cosine gradient distance to one fixed target gradient, fused and with its constants precomputed.

    ``CosineToTarget(target)(candidate, start, masks)`` is
    ``cosine_gradient_distance(candidate, target[start:], masks=masks)`` (Geiping et al. 2020 Eq. 4;
    Ye et al. 2024 Eq. 10 with ``masks``) up to float rounding, computed with one fused reduction
    per tensor and a two-pass backward into buffers reused from call to call (no per-step
    allocation of gradient-sized tensors; the gradient it returns is overwritten by the next
    call), and with ‖t‖² of every target tensor computed once (the target norm is a constant
    unless masks are given; with masks, ‖t ⊙ m‖² = ⟨m, t²⟩ with t² precomputed). Masks are 0/1
    float tensors like the selected targets.

    Raises:
        ValueError: (on call) on a length or shape mismatch between ``candidate`` and
            ``target[start:]``, or masks that do not match.
    """

    def __init__(self, target: Sequence[torch.Tensor]) -> None:
        self.target = [t.detach() for t in target]
        self.squares = [t * t for t in self.target]
        self.square_sums = [sq.sum() for sq in self.squares]
        self.grads = [torch.empty_like(t) for t in self.target]  # reused by every call
        self.kept: list[torch.Tensor] = []  # d ⊙ m, allocated on the first masked call

    def __call__(
        self,
        candidate: Sequence[torch.Tensor],
        start: int = 0,
        masks: Sequence[torch.Tensor] | None = None,
    ) -> torch.Tensor:
        target = self.target[start:]
        _check_pair(candidate, target)
        if masks is None:
            target_norm = torch.sqrt(sum(self.square_sums[start:]))
            return _FusedCosine.apply(
                target_norm, ([], self.grads[start:]), len(target), *candidate, *target
            )
        _check_pair(masks, target)
        target_norm = torch.sqrt(
            sum(
                torch.dot(m.reshape(-1), sq.reshape(-1))
                for m, sq in zip(masks, self.squares[start:])
            )
        )
        self.kept = self.kept or [torch.empty_like(t) for t in self.target]
        buffers = (self.kept[start:], self.grads[start:])
        return _FusedCosine.apply(
            target_norm, buffers, len(target), *candidate, *target, *masks
        )


def total_variation(
    x: torch.Tensor, beta: float = 1.0, reduction: str = "mean"
) -> torch.Tensor:
    """Total variation TV of images ``(B, C, H, W)``, a scalar tensor.

    ``beta = 1``: the anisotropic TV of Inverting Gradients (Geiping et al. 2020, §4), mean
    |x_{i,j+1} − x_{ij}| + mean |x_{i+1,j} − x_{ij}|. Other ``beta``: the R_tv of Ye et al. 2024,
    Eq. 11, TV_β = Σ_{b,c,i,j} ((Δ_h x)² + (Δ_v x)²)^{β/2} over *every* pixel (i, j), a
    difference that would reach past the last column or row counting 0 (Neumann boundary), so that
    each pixel, the bottom-right one included, enters at least one term. (Until issue 35 the sum
    ran over the (H−1)·(W−1) pixels with both neighbours, which left the bottom-right pixel of
    every channel out of R_tv; the attacks then let it saturate.) The authors' code uses another
    TV altogether (breaching's, :func:`breaching_total_variation`).

    ``reduction``: ``"sum"`` is Eq. 11 as written, a sum over every pixel, channel and image of
    the batch, so that the paper's λ_tv = 0.01 means what it means there (the stepwise objective
    and GradInversion use it); ``"mean"`` divides by the number of terms (Geiping et al.'s
    convention, for their α_TV). The two differ by B·C·H·W for β ≠ 1 (3 072 for one 32 px RGB
    image, 150 528 at 224 px), which is why a λ copied from one to the other is off by three to
    five orders of magnitude.

    Raises:
        ValueError: if ``x`` is not ``(B, C, H, W)`` (:func:`gitutor.checks.check_layout`, e.g.
            channels-last, where TV would mix the channels into the pixel differences), ``beta <= 0``
            or ``reduction`` is not ``"mean"`` or ``"sum"``.
    """
    check_layout(x.shape, "x")
    if not beta > 0:
        raise ValueError(f"beta must be > 0, got {beta!r}")
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    reduce = torch.mean if reduction == "mean" else torch.sum
    dh = x[:, :, :, 1:] - x[:, :, :, :-1]
    dv = x[:, :, 1:, :] - x[:, :, :-1, :]
    if beta == 1.0:
        return reduce(dh.abs()) + reduce(dv.abs())
    squares = torch.nn.functional.pad(dh**2, (0, 1)) + torch.nn.functional.pad(
        dv**2, (0, 0, 0, 1)
    )
    return reduce(squares if beta == 2.0 else squares.pow(beta / 2))


def breaching_total_variation(
    x: torch.Tensor,
    *,
    inner_exp: float = 1.0,
    outer_exp: float = 1.0,
    eps: float = 1e-8,
) -> torch.Tensor:
    """The TV of the authors' code (breaching ``TotalVariation``, regularizers.py:104–152), a scalar tensor.

    mean over (b, c, i, j) of ((|Δ_v x| + ε)^p + (|Δ_h x| + ε)^p)^q with p = ``inner_exp``,
    q = ``outer_exp`` (the authors' config ``our_res34_pretrained.yaml``: p = q = 1, weight 5e-3),
    where Δ_h x_{ij} = x_{i,j+1} − x_{ij} and Δ_v x_{ij} = x_{i+1,j} − x_{ij} come from a 3×3
    convolution with *zero padding* (regularizers.py:122–125, 147–149): past the last column or row
    the image counts as 0, so the boundary difference is −x_{ij} itself. The authors apply it to the
    normalised image (x − mean)/std, where 0 is the dataset's mean colour. Not Eq. 11 (which is
    :func:`total_variation` with β = 2 and a sum).

    Raises:
        ValueError: if ``x`` is not ``(B, C, H, W)``.
    """
    check_layout(x.shape, "x")
    padded = torch.nn.functional.pad(x, (0, 1, 0, 1))
    dh = padded[:, :, :-1, 1:] - x
    dv = padded[:, :, 1:, :-1] - x
    return (
        ((dv.abs() + eps).pow(inner_exp) + (dh.abs() + eps).pow(inner_exp))
        .pow(outer_exp)
        .mean()
    )
