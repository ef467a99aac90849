"""The choices of stepwise GradInversion that the paper leaves open, and the authors' code's answers.

Ye et al. (AAAI 2024) give Eq. 10–12 and §Experiments' numbers (β = 2, λ_tv = 0.01, λ_BN = 1e-4,
T1 = 3000, T2 = 5000, dropout 0.3, 15 000 iterations). Their released code
(``MiLab-HITSZ/2023YeHFGradInv``, a fork of breaching; ``main_attack.py`` with
``breaching/config/attack/our_res34_pretrained.yaml``) departs from the equations in several
places. :class:`StepwiseOptions` names each choice; ``StepwiseOptions()`` is the paper as written
(and what the book used before issue 35), :meth:`StepwiseOptions.authors` the authors' code. File
and line references are to that repository (commit 6faa004).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gitutor.models.resnet import IMAGENET_MEAN, IMAGENET_STD

TV_FORMS = ("paper", "authors")
STEP_RULES = ("sign", "quantised")
UNITS = ("pixels", "normalised")
KEEP = ("last", "best")

#: The authors' weights: TV (``total_variation.scale``) and R_BN (``deep_inversion.scale``, with
#: ``first_bn_multiplier`` 1.3 and ``second_bn_multiplier`` 3), our_res34_pretrained.yaml:41–55.
AUTHORS_TV_WEIGHT, AUTHORS_BN_WEIGHT, AUTHORS_BN_LAYER_WEIGHTS = 5e-3, 1e-4, (1.3, 3.0)


def quantised_sign(
    grad: torch.Tensor,
    iteration: int,
    *,
    levels: int = 4,
    floor: float = 0.2,
    boost: float = 2.0,
    boost_until: int = 100,
) -> torch.Tensor:
    """The authors' "hard_quantify" step direction (optimization_based_attack.py:386–396), a new tensor.

    With m the median of |g| over the whole batch (``torch.median``: the lower middle value),
    s = (levels/2)/(m + 1e−10):

        q = clamp(round(s·g) / (levels/2), −1, 1) · (1 − floor) + floor · sign(g),

    i.e. for the default 4 levels |q| ∈ {0.2, 0.6, 1.0} (|g| ≤ m/4, < 3m/4, ≥ 3m/4; ``round`` is
    half-to-even), 0 where g = 0; then × ``boost`` while ``iteration ≤ boost_until`` (the first
    101 iterations, 0-based, ``mul_scale: 2`` of the config). The paper's Eq. 12 uses Sign(g) instead.

    Args:
        grad: the image gradient, any shape (``(B, C, H, W)``), in the units of the optimised image.
        iteration: 0-based iteration t.

    Raises:
        ValueError: if ``levels < 1`` or ``floor`` is outside [0, 1].
    """
    if levels < 1 or not 0 <= floor <= 1:
        raise ValueError(f"need levels ≥ 1 and floor in [0, 1], got {levels}, {floor}")
    half = levels / 2
    scale = half / (torch.median(grad.abs()) + 1e-10)
    q = (grad * scale).round().div(half).clamp(-1, 1).mul(1 - floor) + torch.sign(
        grad
    ) * floor
    return q * boost if iteration <= boost_until else q


@dataclass(frozen=True)
class StepwiseOptions:
    """How :func:`gitutor.attacks.stepwise.stepwise_inversion` reads Eq. 10–12. Defaults: the paper.

    Where the paper states the choice (TV form, Sign, plain R_BN sum), the default is the paper's and
    the authors' code is the option. Where it is silent — units ("Truncate … limit the bound of
    pixel values", Eq. 12, reads as pixels but does not say), which iterate is returned, and the
    tie rule of the dropout draw — the default is what the book has used so far, so that chapter
    04's numbers do not move; :meth:`authors` switches every one of them to the authors' code.
    The paper-silent schedule details (0-based start 99 / floor 24, the authors' timing) live in
    :class:`~gitutor.attacks.stepwise_schedule.StepwiseSchedule`.

    Attributes:
        tv: ``"paper"`` — Eq. 11's R_tv with β = 2 summed over pixels
            (:func:`~gitutor.attacks.objectives.total_variation`); ``"authors"`` — breaching's
            mean of |Δ_v| + |Δ_h| with a zero-padded image
            (:func:`~gitutor.attacks.objectives.breaching_total_variation`, regularizers.py:104–152).
            Either acts on the optimised image (so, with ``units="normalised"``, in normalised units
            as the authors do).
        step: ``"sign"`` — Sign(g) (paper, Eq. 12); ``"quantised"`` — the authors' 3-level quantised
            sign with a 0.2 floor, doubled for t ≤ 100 (:func:`quantised_sign`).
        units: the optimised variable, and so the unit of ``lr``, of the box and of the start.
            ``"pixels"``: x in [0, 1], start clamp(N(0, 1), 0, 1) (the book's choice; the paper says
            only "Truncate"); ``"normalised"``: z = (x − mean)/std, start N(0, 1) unclamped
            (base_attack.py:225–229), box [−mean/std, (1 − mean)/std]
            (optimization_based_attack.py:226–227) — the authors' code. lr 0.1 in normalised units
            is 0.1·std ≈ 0.022 in pixels, 4.4× smaller than 0.1 in pixels.
        mean, std: the per-channel normalisation for ``units="normalised"`` (ImageNet's, as in the
            authors' ``ImageNet.yaml``). The model still takes images in [0, 1] (and normalises
            them itself); z·std + mean is what it sees.
        bn_layer_weights: multipliers of the first R_BN terms (:class:`~gitutor.attacks.bn_prior.BatchNormPrior`);
            ``()`` is Eq. 11 (paper), ``(1.3, 3.0)`` the authors' code.
        keep: ``"last"`` returns the last iterate (the paper is silent); ``"best"`` the iterate after
            the step with the lowest objective, reset whenever the matched tensors change and when a
            prior switches on (the authors' code: optimization_based_attack.py:228–232, where a prior
            that is off contributes a constant 100, regularizers.py:134–135, 261–262, so the first
            step with the prior on always wins).
        dropout_keep_equal: whether a uniform draw u equal to the dropout rate keeps its entry
            (``u ≥ rate``, the book) or drops it (``u > rate``, objectives.py:550). It matters for
            bit-for-bit equality only (probability 2⁻²⁴ per entry).
    """

    tv: str = "paper"
    step: str = "sign"
    units: str = "pixels"
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    bn_layer_weights: tuple[float, ...] = ()
    keep: str = "last"
    dropout_keep_equal: bool = True

    def __post_init__(self) -> None:
        for name, value, allowed in (
            ("tv", self.tv, TV_FORMS),
            ("step", self.step, STEP_RULES),
            ("units", self.units, UNITS),
            ("keep", self.keep, KEEP),
        ):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
        if len(self.mean) != len(self.std) or min(self.std) <= 0:
            raise ValueError(
                f"mean and std must have one entry per channel and std > 0, got {self.mean}, {self.std}"
            )

    @classmethod
    def authors(cls, **changes) -> "StepwiseOptions":
        """The authors' code's choices (our_res34_pretrained.yaml), with ``changes`` applied.

        Use with ``tv_weight=AUTHORS_TV_WEIGHT``, ``bn_weight=AUTHORS_BN_WEIGHT`` and
        ``StepwiseSchedule.paper(..., authors_timing=True)`` to run their configuration.
        """
        return cls(
            **{
                "tv": "authors",
                "step": "quantised",
                "units": "normalised",
                "bn_layer_weights": AUTHORS_BN_LAYER_WEIGHTS,
                "keep": "best",
                "dropout_keep_equal": False,
                **changes,
            }
        )

    def box(
        self, device: torch.device | None = None, dtype: torch.dtype = torch.float32
    ) -> tuple:
        """The clamp of the optimised variable: ``(0, 1)`` in pixels, tensors ``(1, C, 1, 1)`` when normalised."""
        if self.units == "pixels":
            return (0.0, 1.0)
        mean, std = self._stats(device, dtype)
        return (-mean / std, (1 - mean) / std)

    def to_pixels(self, z: torch.Tensor) -> torch.Tensor:
        """The image in [0, 1] units of the optimised variable ``z`` ``(B, C, H, W)``."""
        if self.units == "pixels":
            return z
        mean, std = self._stats(z.device, z.dtype)
        return z * std + mean

    def from_pixels(self, x: torch.Tensor) -> torch.Tensor:
        """The optimised variable for images ``x`` ``(B, C, H, W)`` in [0, 1] (the inverse of :meth:`to_pixels`)."""
        if self.units == "pixels":
            return x
        mean, std = self._stats(x.device, x.dtype)
        return (x - mean) / std

    def _stats(self, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        shape = (1, len(self.mean), 1, 1)
        return (
            torch.tensor(self.mean, device=device, dtype=dtype).view(shape),
            torch.tensor(self.std, device=device, dtype=dtype).view(shape),
        )
