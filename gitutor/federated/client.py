"""What a federated client computes and sends: the gradient of its local loss (DLG Eq. 1).

Also the per-example view of Learning To Invert (Wu et al. 2022, §3.1): B clients holding one
image each, every one sending its own (defended) gradient, and the server averaging them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from gitutor.checks import check_layout, input_channels
from gitutor.federated.defenses import Defense, apply_defense
from gitutor.models.buffers import preserved_buffers

#: Soft-label rows must be probabilities: entries ≥ −tol and row sums within tol of 1.
SOFT_LABEL_TOLERANCE = 1e-4


def check_parameter_list(
    model: nn.Module, tensors: Sequence[torch.Tensor], what: str
) -> list[torch.Tensor]:
    """Check that ``tensors`` is a list aligned with ``model.parameters()`` (count, shapes, finite floats).

    Gradients, increments, dual variables and global weights all follow this convention.

    Returns:
        The tensors as a list.

    Raises:
        TypeError: if ``tensors`` is not a sequence of tensors, or an entry is not a floating-point tensor.
        ValueError: on a count mismatch, or naming the first parameter whose entry has the wrong shape
            or holds NaN/inf.
    """
    if isinstance(tensors, torch.Tensor) or not all(
        isinstance(t, torch.Tensor) for t in tensors
    ):
        raise TypeError(
            f"{what} must be a list of tensors aligned with model.parameters()"
        )
    named = list(model.named_parameters())
    if len(tensors) != len(named):
        raise ValueError(
            f"{what} has {len(tensors)} tensors but the model has {len(named)} parameters"
        )
    for (name, parameter), tensor in zip(named, tensors):
        if tensor.shape != parameter.shape:
            raise ValueError(
                f"{what} entry for parameter {name!r} has shape {tuple(tensor.shape)}, "
                f"expected {tuple(parameter.shape)}"
            )
        if not tensor.is_floating_point():
            raise TypeError(
                f"{what} entry for parameter {name!r} has dtype {tensor.dtype}; it must be a float tensor"
            )
        if not torch.isfinite(tensor).all():
            raise ValueError(f"{what} entry for parameter {name!r} contains NaN or inf")
    return list(tensors)


def cross_entropy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Batch-mean cross-entropy for integer labels ``(B,)`` or soft labels ``(B, C)`` (rows sum to 1).

    Soft labels cover one-hot, label smoothing and mixup targets: −Σ_c y_c log softmax(z)_c.
    Integer labels must lie in [0, C): PyTorch would silently skip −100 (its ``ignore_index``).

    Raises:
        ValueError: on a batch-size or class-count mismatch, integer labels outside [0, C), or soft
            labels that are not probabilities (NaN/inf, negative entries, rows not summing to 1).
        TypeError: for integer labels that are not int64.
    """
    if y.shape[0] != logits.shape[0]:
        raise ValueError(
            f"batch size mismatch: {logits.shape[0]} inputs but {y.shape[0]} labels"
        )
    check_labels(y, logits.shape[1])
    return _cross_entropy(logits, y)


def _cross_entropy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if y.dim() == 1:
        return F.cross_entropy(logits, y)
    return -(y * F.log_softmax(logits, dim=-1)).sum(dim=-1).mean()


def check_labels(y: torch.Tensor, num_classes: int, name: str = "y") -> None:
    """Check labels: int64 ``(B,)`` in [0, num_classes) or soft labels ``(B, num_classes)`` whose rows
    are probability vectors — entries ≥ 0 and each row summing to 1, up to
    :data:`SOFT_LABEL_TOLERANCE` (one-hot, :func:`~gitutor.federated.smooth_labels`,
    :func:`~gitutor.federated.mixup` and ``softmax`` outputs all are).

    Raises:
        TypeError: for integer labels that are not int64.
        ValueError: naming ``name``: labels out of range (e.g. −100, which cross-entropy would silently
            ignore), soft labels of the wrong width, with NaN/inf, with negative entries, or with a row
            that does not sum to 1 (logits? apply ``torch.softmax``).
    """
    if y.dim() == 1:
        if y.dtype != torch.int64:
            raise TypeError(
                f"integer labels {name} must be int64 (torch.long), got {y.dtype}"
            )
        if y.numel() and (int(y.min()) < 0 or int(y.max()) >= num_classes):
            raise ValueError(
                f"labels {name} must lie in [0, {num_classes}), got {y.tolist()}"
            )
        return
    if y.dim() != 2 or y.shape[1] != num_classes:
        raise ValueError(
            f"soft labels {name} must be (B, {num_classes}), got {tuple(y.shape)}"
        )
    if not y.is_floating_point():
        raise TypeError(
            f"soft labels {name} must be a float tensor (B, {num_classes}), got {y.dtype}"
        )
    if y.numel() == 0:
        return
    sums = y.detach().sum(dim=1)
    off = (sums - 1).abs()
    if bool(
        ~torch.isfinite(y).all()
        | (y.min() < -SOFT_LABEL_TOLERANCE)
        | (off.max() > SOFT_LABEL_TOLERANCE)
    ):
        if not torch.isfinite(y).all():
            raise ValueError(
                f"soft labels {name} contain NaN or inf; they must be finite probabilities"
            )
        if float(y.min()) < -SOFT_LABEL_TOLERANCE:
            raise ValueError(
                f"soft labels {name} must be probabilities (entries ≥ 0, rows summing to 1), got a "
                f"negative entry {float(y.min()):.4g}"
            )
        row = int(off.argmax())
        raise ValueError(
            f"soft labels {name} must be probabilities: each row must sum to 1 (tolerance "
            f"{SOFT_LABEL_TOLERANCE:g}), but row {row} sums to {float(sums[row]):.6g}; logits? apply "
            f"torch.softmax(..., dim=-1), or build them with smooth_labels / mixup"
        )


def check_client_batch(
    x: torch.Tensor, y: torch.Tensor, model: nn.Module | None = None
) -> None:
    """Check a client's batch: float, finite inputs ``x`` and as many labels ``y``.

    ``x`` is usually images ``(B, C, H, W)``; their layout is checked (channels first, C equal to the
    ``in_channels`` of the model's first convolution, :func:`gitutor.checks.check_layout`). Other
    inputs (e.g. penultimate features ``(B, d)`` for a last layer) are accepted as they are, but a
    model with a convolution needs 4-D images. The range [0, 1] is not checked here: attacks pass
    unbounded dummy images (the case builders of :mod:`gitutor.federated.case` check it).

    Raises:
        TypeError: if ``x`` is not a float tensor or ``y`` is not a tensor.
        ValueError: on a batch-size mismatch, NaN/inf in ``x``, or images not ``(B, C, H, W)`` (e.g.
            channels-last ``(B, H, W, C)``, or C not what the model takes).
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(
            f"x must be a float tensor of images, got {getattr(x, 'dtype', type(x).__name__)}"
        )
    if not isinstance(y, torch.Tensor):
        raise TypeError(f"y must be a tensor of labels, got {type(y).__name__}")
    if x.dim() == 0 or y.dim() == 0 or x.shape[0] != y.shape[0]:
        raise ValueError(
            f"batch size mismatch: x has shape {tuple(x.shape)} (B first), y has shape {tuple(y.shape)}"
        )
    channels = input_channels(model)
    if x.dim() == 4 or channels is not None:
        check_layout(x.shape, "x", channels=channels)
    if not torch.isfinite(x).all():
        raise ValueError("x contains NaN or inf")


def check_model_input(
    model: nn.Module,
    x: torch.Tensor,
    labels: torch.Tensor | None = None,
    name: str = "x",
) -> None:
    """Check that ``model`` takes ``x`` (one example of it, in a forward pass without gradients that
    leaves the model unchanged) and that integer ``labels`` are classes of its output.

    Catches what torch reports deep inside a layer (``mat1 and mat2 shapes cannot be multiplied``)
    where the images enter, e.g. one client's images of another size than the model was built for.

    Raises:
        ValueError: naming ``name`` and its shape when the model cannot take it, or a label outside
            ``[0, classes)``.
    """
    with preserved_buffers(model), torch.no_grad():
        training = model.training
        try:
            model.eval()
            out = model(x[:1])
        except (RuntimeError, ValueError, TypeError, IndexError) as error:
            first = (str(error).strip().splitlines() or [""])[0]
            raise ValueError(
                f"{name} of shape {tuple(x.shape)} does not fit the model "
                f"{type(model).__name__} ({first}); give images of the size and channels "
                "it was built for"
            ) from None
        finally:
            model.train(training)
    if (
        labels is not None
        and not labels.is_floating_point()
        and labels.numel()
        and out.dim() == 2
        and (int(labels.min()) < 0 or int(labels.max()) >= out.shape[1])
    ):
        raise ValueError(
            f"labels of {name} must be classes in [0, {out.shape[1]}) of the model's output, "
            f"got {sorted(set(labels.tolist()))}"
        )


def check_partitions(model: nn.Module, partitions) -> None:
    """Check every client's ``(images, labels)`` pair against ``model`` before a federation starts
    (:func:`check_client_batch`, :func:`check_model_input`).

    Raises:
        TypeError, ValueError: naming ``partitions[k]`` (not a pair, a bad batch, images the model
            cannot take, labels outside its classes).
    """
    if (
        isinstance(partitions, (str, bytes))
        or not isinstance(partitions, Sequence)
        or not partitions
    ):
        raise ValueError(
            "partitions must be a non-empty list of (images, labels) pairs, one per client"
        )
    for k, pair in enumerate(partitions):
        if not (isinstance(pair, Sequence) and len(pair) == 2):
            raise TypeError(
                f"partitions[{k}] must be an (images, labels) pair, got {type(pair).__name__}"
            )
        try:
            check_client_batch(*pair, model)
        except (TypeError, ValueError) as error:
            raise type(error)(f"partitions[{k}]: {error}") from None
        check_model_input(model, pair[0], pair[1], f"partitions[{k}]")


def trainable_parameters(model: nn.Module) -> list[torch.Tensor]:
    """``list(model.parameters())``, all of which must require gradients (the update has one entry each).

    Raises:
        ValueError: naming the frozen parameters (``requires_grad=False``).
    """
    frozen = [name for name, p in model.named_parameters() if not p.requires_grad]
    if frozen:
        raise ValueError(
            f"parameters {frozen} of model are frozen (requires_grad=False); the shared update has one "
            "entry per parameter, so unfreeze them (parameter.requires_grad_(True))"
        )
    return list(model.parameters())


def client_gradients(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, create_graph: bool = False
) -> list[torch.Tensor]:
    """∇_W ℓ(F(x; W), y): the gradient a client shares (DLG Eq. 1), batch-mean cross-entropy.

    Args:
        model: the shared model; its parameters' ``.grad`` are not touched.
        x: ``(B, C, H, W)`` images in [0, 1] (or an attack's dummy images; channels first, C as the
            model's first convolution takes).
        y: ``(B,)`` int64 labels in [0, num_classes) or ``(B, num_classes)`` soft labels whose rows are
            probabilities (entries ≥ 0, each row summing to 1 within 1e-4).
        create_graph: keep the graph so the result can be differentiated again (attacks set this).

    The model's buffers (BatchNorm running statistics) are kept by
    :func:`~gitutor.models.preserved_buffers`, so computing a gradient in train mode — as the client
    does, and as attacks do thousands of times — never changes the shared model.

    Returns:
        One tensor per entry of ``model.parameters()``, same shapes; detached unless
        ``create_graph``.

    Raises:
        ValueError: on batch-size mismatch, non-finite inputs, images not ``(B, C, H, W)`` (e.g.
            channels-last ``(B, H, W, C)``), labels out of range, soft labels ``y`` that are not
            probabilities (negative, or a row not summing to 1), frozen parameters, or a parameter
            that gets no gradient.
        TypeError: for non-float images or integer labels that are not int64.
    """
    check_client_batch(x, y, model)
    parameters = trainable_parameters(model)
    with preserved_buffers(model):
        loss = cross_entropy(model(x), y)
    grads = torch.autograd.grad(
        loss, parameters, create_graph=create_graph, allow_unused=True
    )
    missing = [
        name for (name, _), g in zip(model.named_parameters(), grads) if g is None
    ]
    if missing:
        raise ValueError(
            f"parameters {missing} get no gradient from this loss (unused layers?)"
        )
    return list(grads) if create_graph else [g.detach() for g in grads]


def gradient_dimension(model: nn.Module) -> int:
    """m, the number of gradient coordinates of ``model`` (its parameter count)."""
    return sum(p.numel() for p in model.parameters())


def per_example_gradients(
    model: nn.Module, images: torch.Tensor, labels: torch.Tensor, *, chunk: int = 256
) -> Iterator[list[torch.Tensor]]:
    """Yield ∇_w ℓ(f_w(x_i), y_i) for every example i alone, as a gradient list (one client each).

    Without BatchNorm the gradients of a chunk of examples come from one vectorised call
    (``torch.func.vmap`` over ``torch.func.grad``); a model with BatchNorm couples the examples of
    a batch, so each example then goes through :func:`client_gradients` on its own.

    Raises:
        ValueError / TypeError: as :func:`client_gradients`.
    """
    check_client_batch(images, labels, model)
    trainable_parameters(model)
    device = next(model.parameters()).device
    with preserved_buffers(model), torch.no_grad():
        check_labels(labels, model(images[:1].to(device)).shape[1])
    if any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        for i in range(images.shape[0]):
            yield client_gradients(
                model, images[i : i + 1].to(device), labels[i : i + 1].to(device)
            )
        return
    params = {name: p.detach() for name, p in model.named_parameters()}

    def loss(parameters, x, y):
        return _cross_entropy(functional_call(model, parameters, (x[None],)), y[None])

    per_example_grad = vmap(grad(loss), in_dims=(None, 0, 0))
    with preserved_buffers(model):
        for start in range(0, images.shape[0], chunk):
            grads = per_example_grad(
                params,
                images[start : start + chunk].to(device),
                labels[start : start + chunk].to(device),
            )
            for i in range(len(next(iter(grads.values())))):
                yield [grads[name][i] for name in params]


def observed_gradient(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    defense: Defense | None = None,
) -> list[torch.Tensor]:
    """What the server receives from B clients holding one image each (Wu et al. §3.1, threat model):
    (1/B) Σ_i DM[∇_w ℓ(f_w(x_i), y_i)], a gradient list aligned with ``model.parameters()``.

    Args:
        images: ``(B, C, H, W)``; labels: ``(B,)`` int64; defense: a :class:`Defense`, a function
            grads -> grads, or None.

    Raises:
        ValueError / TypeError: as :func:`~gitutor.federated.apply_defense` and :func:`client_gradients`.
    """
    defended = [
        apply_defense(defense, g) for g in per_example_gradients(model, images, labels)
    ]
    return [torch.stack(layer).mean(dim=0) for layer in zip(*defended)]
