"""The checks of arguments that every public function shares: images (layout and value range), and
numbers, flags, seeds and names (:func:`check_real`, :func:`check_int`, :func:`check_flag`,
:func:`check_seed`, :func:`check_choice`).

gitutor's convention (``DESIGN.md``): images are float tensors ``(B, C, H, W)`` in [0, 1], and a
model normalises internally if it needs to. Three mistakes are easy to make and otherwise end in a
torch RuntimeError deep inside a model or in a silently wrong number:

- **layout**: channels-last images ``(B, H, W, C)`` — the order of NumPy, PIL and matplotlib;
- **value range**: 8-bit pixel values in 0–255 instead of [0, 1];
- **normalisation**: images already standardised with a mean and a std (values below 0).

Channels-last is recognised by a heuristic, stated in the message: the last dimension is a channel
count (1 or 3) and the channel dimension is not, or the channel dimension differs from the
``in_channels`` of the model's first convolution. This module imports nothing from gitutor, so
every room may use it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

#: Images may leave [0, 1] by this much (float rounding of e.g. mixup λ x₁ + (1 − λ) x₂).
RANGE_TOLERANCE = 1e-6
#: Channel counts of images: grey and RGB.
IMAGE_CHANNELS = (1, 3)
#: Layouts by the number of leading (batch) dimensions, channels first and channels last.
LAYOUTS = {0: "(C, H, W)", 1: "(B, C, H, W)", 2: "(N, B, C, H, W)"}
_CHANNELS_LAST = {
    0: ("(H, W, C)", "permute(2, 0, 1)"),
    1: ("(B, H, W, C)", "permute(0, 3, 1, 2)"),
    2: ("(N, B, H, W, C)", "permute(0, 1, 4, 2, 3)"),
}


def input_channels(model: nn.Module | None) -> int | None:
    """``in_channels`` of the first ``nn.Conv2d`` of ``model`` (in registration order), or None when
    there is no model or it has no convolution (e.g. a fully connected network)."""
    if model is None:
        return None
    return next(
        (m.in_channels for m in model.modules() if isinstance(m, nn.Conv2d)), None
    )


def check_layout(
    shape: Sequence[int], name: str, *, channels: int | None = None, leading: int = 1
) -> tuple[int, ...]:
    """Check that ``shape`` is an image layout, channels first: ``(C, H, W)`` (``leading=0``),
    ``(B, C, H, W)`` (1) or ``(N, B, C, H, W)`` (2). Only the shape is read, so it costs nothing.

    Args:
        shape: a tensor's ``.shape`` or an ``input_shape`` tuple.
        name: the argument's name, used in the message.
        channels: the channel count the model takes (:func:`input_channels`), or None (unknown).
        leading: number of batch dimensions before ``C``.

    Returns:
        The shape as a tuple of ints.

    Raises:
        ValueError: naming ``name`` and the expected layout, if the number of dimensions is wrong, C
            differs from ``channels``, or (``channels`` unknown) the shape looks channels-last: its last
            dimension is 1 or 3 while C is neither.
    """
    shape = tuple(int(s) for s in shape)
    layout = LAYOUTS[leading]
    if len(shape) != leading + 3:
        hint = (
            " (one image is (1, C, H, W))" if leading == 1 and len(shape) == 3 else ""
        )
        raise ValueError(f"{name} must be {layout}, got shape {shape}{hint}")
    c, w = shape[-3], shape[-1]
    last, permute = _CHANNELS_LAST[leading]
    looks_last = (
        f"; it looks channels-last {last} (its last dimension, {w}, is a channel count): "
        f"move the channels first with .{permute}"
    )
    if channels is not None and c != channels:
        hint = (
            looks_last
            if w == channels
            else (
                "; grey images? repeat the channel with .expand(-1, 3, -1, -1)"
                if c == 1 and channels == 3
                else ""
            )
        )
        raise ValueError(
            f"{name} must be {layout} with C = {channels}, the input channels of the model's first "
            f"convolution; got shape {shape}{hint}"
        )
    if channels is None and w in IMAGE_CHANNELS and c not in IMAGE_CHANNELS:
        raise ValueError(
            f"{name} must be {layout}, channels first; got shape {shape}, whose channel dimension is "
            f"{c}{looks_last}"
        )
    return shape


def check_images(
    images: torch.Tensor,
    name: str,
    *,
    channels: int | None = None,
    leading: int = 1,
    in_range: bool = True,
) -> None:
    """Check an image argument: a float tensor in the layout of :func:`check_layout`, finite, and
    (``in_range``) with every value in [0, 1] up to :data:`RANGE_TOLERANCE` — nothing is clipped.

    Set ``in_range=False`` for tensors that are images in shape only (an attack's unbounded dummy
    images, a reconstruction that is still to be clipped).

    Raises:
        TypeError: naming ``name`` if ``images`` is not a float tensor (integer pixels: divide by 255).
        ValueError: naming ``name``: a wrong layout (:func:`check_layout`), NaN/inf, or (``in_range``)
            values outside [0, 1], with the likely cause (0–255 pixels, mean/std normalisation).
    """
    layout = LAYOUTS[leading]
    if not isinstance(images, torch.Tensor) or not images.is_floating_point():
        got = (
            images.dtype if isinstance(images, torch.Tensor) else type(images).__name__
        )
        hint = (
            "; 8-bit pixels? use images.float() / 255"
            if isinstance(images, torch.Tensor)
            else ""
        )
        raise TypeError(
            f"{name} must be a float tensor {layout} in [0, 1], got {got}{hint}"
        )
    check_layout(images.shape, name, channels=channels, leading=leading)
    if images.numel() == 0:
        return
    if not in_range:
        if not torch.isfinite(images).all():
            raise ValueError(f"{name} contain NaN or inf")
        return
    low, high = (float(v) for v in torch.aminmax(images.detach()))
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"{name} contain NaN or inf")
    if low < -RANGE_TOLERANCE or high > 1 + RANGE_TOLERANCE:
        if low >= 0 and high <= 255:
            hint = "; 8-bit pixels in 0–255? divide by 255"
        elif low < 0:
            hint = (
                "; normalised with a mean and std? pass the images in [0, 1] (x * std + mean): "
                "models normalise internally"
            )
        else:
            hint = ""
        raise ValueError(
            f"{name} must lie in [0, 1] (float images, gitutor's convention), got values in "
            f"[{low:.4g}, {high:.4g}]{hint}"
        )


def check_num_classes(num_classes, name: str = "num_classes") -> int:
    """``num_classes`` as an int ≥ 2 (a classifier has at least two classes).

    Raises:
        TypeError: naming ``name`` if it is not an int.
        ValueError: naming ``name`` if it is < 2.
    """
    if isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral):
        raise TypeError(
            f"{name} must be an int (the number of classes), got {type(num_classes).__name__}"
        )
    if num_classes < 2:
        raise ValueError(
            f"{name} must be ≥ 2 (the number of classes of the model's output), got {num_classes}"
        )
    return int(num_classes)


def check_sizes(**sizes) -> None:
    """Check that every size (``width=16``, ``image_size=32``, …) is an int ≥ 1 (not a float such as
    ``8.0``, which torch would refuse deep inside a layer).

    Raises:
        TypeError: naming the argument that is not an int.
        ValueError: naming the argument that is < 1.
    """
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(
                f"{name} must be an int (a size), got {value!r} ({type(value).__name__})"
            )
        if value < 1:
            raise ValueError(f"{name} must be ≥ 1, got {value}")


def check_seeds(seeds, count: int, name: str = "seeds") -> list[int]:
    """``seeds`` as a list of ``count`` ints, one per problem.

    Raises:
        TypeError: naming ``name`` when it is a single number or a string instead of a sequence,
            or holds a value that is not an int.
        ValueError: naming ``name`` when it does not hold ``count`` seeds.
    """
    if isinstance(seeds, (str, bytes, numbers.Number)) or not isinstance(
        seeds, Sequence
    ):
        raise TypeError(
            f"{name} must be a sequence of {count} int seeds, one per problem (e.g. "
            f"list(range({count}))), got {seeds!r}"
        )
    bad = [
        seed
        for seed in seeds
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral)
    ]
    if bad:
        raise TypeError(f"{name} must hold ints, got {bad[0]!r}")
    if len(seeds) != count:
        raise ValueError(
            f"{name} must hold {count} seeds (one per problem), got {len(seeds)}"
        )
    return [int(seed) for seed in seeds]


# Numbers, flags, seeds and names: the checks every public function shares (issue 43). A careless value
# fails here with the argument's name, before anything is run or written; it never reaches a formula that
# would read it as something else ("False" is truthy, −1 flips a clip's sign, NaN passes every comparison).


def _text_hint(value) -> str:
    """A hint for a number or flag given as text ("0.5", "False")."""
    return "; write it without quotes" if isinstance(value, str) else ""


def check_flag(value, name: str) -> bool:
    """``value`` as a bool: True or False (NumPy's bool too).

    Raises:
        TypeError: naming ``name`` for anything else — a string such as ``"False"`` (which Python
            reads as true), a number, None.
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(
        f"{name} must be True or False, got {value!r} ({type(value).__name__}){_text_hint(value)}"
    )


def check_real(
    value,
    name: str,
    *,
    low: float = -math.inf,
    high: float = math.inf,
    low_open: bool = False,
    high_open: bool = False,
    finite: bool = True,
) -> float:
    """``value`` as a float after checking that it is a real number (not a bool, not a string; a
    one-element tensor is read as its value), not NaN, finite unless ``finite=False``, and inside
    ``[low, high]`` (an end excluded when ``low_open`` / ``high_open``).

    Raises:
        TypeError: naming ``name`` if ``value`` is not a real number (``"0.5"``, ``True``, None, a list).
        ValueError: naming ``name`` if it is NaN, infinite (``finite``) or outside the range.
    """
    if (
        isinstance(value, torch.Tensor)
        and value.numel() == 1
        and not value.dtype.is_complex
    ):
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{name} must be a real number, got {value!r} ({type(value).__name__}){_text_hint(value)}"
        )
    value = float(value)
    below = value < low or (low_open and value == low)
    above = value > high or (high_open and value == high)
    if math.isnan(value) or (finite and math.isinf(value)) or below or above:
        ends = [
            f"{'>' if low_open else '≥'} {low:g}" if low > -math.inf else "",
            f"{'<' if high_open else '≤'} {high:g}" if high < math.inf else "",
        ]
        rule = " and ".join(end for end in ends if end)
        kind = "a finite number" if finite else "a number (not NaN)"
        raise ValueError(
            f"{name} must be {kind}{' ' + rule if rule else ''}, got {value!r}"
        )
    return value


def check_int(value, name: str, *, low: int | None = 1, high: int | None = None) -> int:
    """``value`` as an int after checking that it is an integer (not a bool, not a float such as
    ``2.0``, not a string) in ``[low, high]`` (None: no bound).

    Raises:
        TypeError: naming ``name`` if ``value`` is not an int.
        ValueError: naming ``name`` if it lies outside ``[low, high]``.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{name} must be an int, got {value!r} ({type(value).__name__}){_text_hint(value)}"
        )
    if (low is not None and value < low) or (high is not None and value > high):
        rule = " and ".join(
            part
            for part in (
                f"≥ {low}" if low is not None else "",
                f"≤ {high}" if high is not None else "",
            )
            if part
        )
        raise ValueError(f"{name} must be an int {rule}, got {value!r}")
    return int(value)


#: The seeds ``torch.Generator.manual_seed`` takes: a signed or unsigned 64-bit int.
SEED_RANGE = (-(2**63), 2**64 - 1)


def check_seed(seed, name: str = "seed") -> int:
    """``seed`` as an int that ``torch.Generator.manual_seed`` takes (:data:`SEED_RANGE`).

    Raises:
        TypeError: naming ``name`` if ``seed`` is not an int (``1.5``, ``"0"``, ``True``, None).
        ValueError: naming ``name`` if it does not fit in 64 bits.
    """
    return check_int(seed, name, low=SEED_RANGE[0], high=SEED_RANGE[1])


def check_choice(
    value, name: str, known: Sequence[str], *, ignore_case: bool = False
) -> str:
    """``value`` after checking that it is one of the ``known`` names (by letter case too unless
    ``ignore_case``; then the known spelling is returned).

    Raises:
        TypeError: naming ``name`` if ``value`` is not a string.
        ValueError: naming ``name`` and the known names if it is none of them.
    """
    if not isinstance(value, str):
        raise TypeError(
            f"{name} must be a string, one of {tuple(known)}, got {value!r} ({type(value).__name__})"
        )
    for option in known:
        if value == option or ignore_case and value.casefold() == option.casefold():
            return option
    raise ValueError(f"{name} must be one of {tuple(known)}, got {value!r}")
