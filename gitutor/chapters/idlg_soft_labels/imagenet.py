"""Chapter 02 on an ImageNet-trained network: λ recovery of smoothed, mixup and one-hot labels from the last
layer of EfficientNet-Lite0 on real ImageNet photographs with their true labels (Wang, Liang & He, ICLR 2024,
Table 1's ImageNet column, there on ResNet50 with 1000 test images).

Only the last layer's gradient is needed. For one sample with feature h (the input of the classifier
z = W h + b) and soft label y, the client's weight gradient is ∂L/∂W = (softmax(W h + b) − y) hᵀ (Eq. 2), so
the photographs' features are computed once (one forward pass at 224 px each, eval mode) and every label
costs an outer product; a mixup image is a new image and gets its own forward pass. The classifier has a
bias: the server knows b and the search uses the weight gradient alone, with b in the logits
(:func:`gitutor.labels.recover_soft_label`'s ``fc_bias``).
"""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from gitutor.chapters.idlg_soft_labels.report import _row, bounded, share
from gitutor.federated import mixup, smooth_labels
from gitutor.labels import idlg_label, recover_soft_label
from gitutor.models import fc_input_features, last_linear
from gitutor.results.verdicts import TOLERANCE
from gitutor.stats import success_interval

#: The network's name on the page and in the results record.
NETWORK = "ImageNet EfficientNet-Lite0"
#: Table 1 (ResNet50, ImageNet, 1000 test images): label accuracy (%) per kind; "iDLG": its sign rule on one-hot.
PAPER_TABLE1_IMAGENET = {
    "smoothing": 100.0,
    "mixup": 100.0,
    "one-hot": 99.9,
    "iDLG": 99.9,
}


def last_layer_gradient(
    fc: nn.Linear, features: torch.Tensor, label: torch.Tensor
) -> torch.Tensor:
    """∂L/∂W of the last layer for one sample: (softmax(W h + b) − y) hᵀ (Wang et al. Eq. 2), the soft-label
    cross-entropy's weight gradient, computed in the layer's dtype as autograd would.

    Args:
        fc: the last ``nn.Linear`` (C outputs, d inputs; with or without bias).
        features: its input h, ``(1, d)`` or ``(d,)``.
        label: the soft label y, ``(1, C)`` or ``(C,)``, summing to 1.

    Returns:
        ``(C, d)`` weight gradient.

    Raises:
        ValueError: if the shapes do not fit the layer.
    """
    h, y = features.reshape(1, -1), label.reshape(1, -1).to(features.dtype)
    if h.shape[1] != fc.in_features or y.shape[1] != fc.out_features:
        raise ValueError(
            f"features need {fc.in_features} entries and label {fc.out_features}, "
            f"got {tuple(features.shape)} and {tuple(label.shape)}"
        )
    with torch.no_grad():
        return (torch.softmax(fc(h), dim=-1) - y).T @ h


def mixup_partner(labels: torch.Tensor, index: int) -> int:
    """The next photograph after ``index`` (cyclically) whose class differs: mixup's second image (§4.1: couples
    of different classes).

    Raises:
        ValueError: if every photograph has the same class.
    """
    n = len(labels)
    for step in range(1, n):
        if labels[(index + step) % n] != labels[index]:
            return (index + step) % n
    raise ValueError("mixup needs photographs of at least two classes")


def imagenet_label_recovery(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    kinds: Sequence[str],
    generator: torch.Generator,
    *,
    smoothing_max: float = 0.5,
    progress: bool = False,
) -> dict:
    """λ recovery on every photograph for each label kind in ``kinds`` (``"smoothing"``, ``"mixup"``,
    ``"one-hot"``), one label per photograph and kind, and the iDLG sign rule on the one-hot labels.

    Smoothing ε ~ U(0, ``smoothing_max``) on the photograph's true class; mixup weight ~ U(0, 1) with
    :func:`mixup_partner`'s photograph, both drawn from ``generator`` in a fixed order. The true λ* =
    1 / (p_r − y_r) is for scoring only.

    Args:
        model: a trained classifier in eval mode, images ``(B, 3, H, W)`` in [0, 1] → logits ``(B, C)``.
        images: ``(n, 3, H, W)`` photographs in [0, 1]; labels: their ``(n,)`` true classes.
        progress: show a tqdm bar over the ``len(kinds) · n`` searches.

    Returns:
        ``{"errors", "lam_errors", "lam_stars", "accepted", "methods", "seconds"}`` each ``{kind: [one value
        per photograph]}`` (L1 label error L_r, |λ − λ*|, λ*, whether the λ passed the acceptance bar, search
        used, seconds per search), ``"idlg"`` (one bool per photograph: the
        sign rule's class is the true one) and ``"top1"`` (the network's top-1 is the true class).

    Raises:
        ValueError: for an unknown kind or images and labels of different lengths.
    """
    if len(images) != len(labels):
        raise ValueError(f"{len(images)} images but {len(labels)} labels")
    unknown = set(kinds) - {"smoothing", "mixup", "one-hot"}
    if unknown:
        raise ValueError(
            f"unknown label kinds {sorted(unknown)}; use smoothing, mixup, one-hot"
        )
    device = next(model.parameters()).device
    fc = copy.deepcopy(last_linear(model)).cpu()  # the search runs on the CPU
    weight, bias = fc.weight.detach(), None if fc.bias is None else fc.bias.detach()
    features = fc_input_features(
        model, images.to(device)
    ).cpu()  # one forward pass per photograph
    labels, classes = labels.cpu(), fc.out_features
    keys = ("errors", "lam_errors", "lam_stars", "accepted", "methods", "seconds")
    out = {key: {kind: [] for kind in kinds} for key in keys}
    searches = list(itertools.product(kinds, range(len(images))))
    for kind, index in tqdm(searches, desc="λ recovery", disable=not progress):
        h, label, exclude_top = _sample(
            model, images, labels, features, index, kind, generator, smoothing_max
        )
        grad = last_layer_gradient(fc, h, label)
        start = time.perf_counter()
        with torch.no_grad():
            logits = fc(h)[0]
        result = recover_soft_label(
            weight,
            grad,
            fc_bias=bias,
            exclude_top=exclude_top,
            seed=index,
            prediction=logits,
        )
        out["seconds"][kind].append(time.perf_counter() - start)
        p = torch.softmax(logits.double(), -1)
        lam_star = 1.0 / float(p[result.row] - label[0, result.row].double())
        out["errors"][kind].append(
            float((result.label - label[0].double()).abs().sum())
        )
        out["lam_errors"][kind].append(abs(result.lam - lam_star))
        out["lam_stars"][kind].append(lam_star)
        out["accepted"][kind].append(result.accepted)
        out["methods"][kind].append(result.method)
    one_hot = F.one_hot(labels, classes).float()
    out["idlg"] = [
        idlg_label(last_layer_gradient(fc, features[i], one_hot[i])) == int(labels[i])
        for i in range(len(labels))
    ]
    with torch.no_grad():
        out["top1"] = (fc(features).argmax(1) == labels).tolist()
    return out


def _sample(model, images, labels, features, index, kind, generator, smoothing_max):
    """``(h (1, d), soft label (1, C), exclude_top)`` of photograph ``index`` for ``kind``."""
    classes = last_linear(model).out_features
    target, images = labels[index : index + 1], images.cpu()
    if kind == "smoothing":
        eps = smoothing_max * float(torch.rand((), generator=generator))
        return features[index : index + 1], smooth_labels(target, eps, classes), 1
    if kind == "one-hot":
        return features[index : index + 1], F.one_hot(target, classes).float(), 1
    j = mixup_partner(labels, index)
    mixed, label = mixup(
        images[index : index + 1],
        target,
        images[j : j + 1],
        labels[j : j + 1],
        float(torch.rand((), generator=generator)),
        num_classes=classes,
    )
    device = next(model.parameters()).device
    return fc_input_features(model, mixed.to(device)).cpu(), label, 2


def summary(run: dict, tolerance: float) -> tuple[dict, dict, dict]:
    """Table 2-style cells of :func:`imagenet_label_recovery`'s ``run``: ``(table, methods, errors)`` keyed
    ``(NETWORK, kind)`` as :func:`~gitutor.chapters.idlg_soft_labels.experiments.label_recovery_table`'s
    (accuracy % with L_r ≤ ``tolerance``, mean L_r), search counts and the list of L_r."""
    table, methods, errors = {}, {}, {}
    for kind, values in run["errors"].items():
        table[NETWORK, kind] = (
            100 * float(np.mean(np.array(values) <= tolerance)),
            float(np.mean(values)),
        )
        used = run["methods"][kind]
        methods[NETWORK, kind] = {m: used.count(m) for m in sorted(set(used))}
        errors[NETWORK, kind] = list(values)
    return table, methods, errors


def imagenet_rows(run: dict, tolerance: float, common: str | None = None) -> list[dict]:
    """Paper-vs-run rows of the ImageNet network: label accuracy per kind (Table 1's ImageNet column) with its
    Wilson interval over the photographs, the iDLG sign rule on one-hot labels, and mean L_s = |λ − λ*| and
    L_r, which the paper does not state for ImageNet (not comparable). With ``common`` (the chapter's
    differences for the whole table) every row carries it and its setting names what is its own."""
    n = len(run["idlg"])
    where = (
        f"EfficientNet-Lite0 (ImageNet weights, eval mode, classifier with bias: b in the logits, weight "
        f"gradient only) on {n} real ImageNet photographs with their true labels, 224 px, one label per "
        "photograph (paper: ResNet50, 1000 test images)"
    )
    rows = []
    for position, (kind, values) in enumerate(run["errors"].items()):
        flags = [e <= tolerance for e in values]
        text = where if position == 0 else "as above"  # stated once
        text += (
            "; mixup pairs each photograph with the next of another class"
            if kind == "mixup"
            else ""
        )
        setting = f"{NETWORK}, {kind}" + (
            ""
            if common is None
            else f"; {n} photographs, true labels, 224 px, "
            "bias in the logits (paper: ResNet50, 1000 test images)"
        )
        rows.append(
            _row(
                "label accuracy (Table 1, ImageNet)",
                setting,
                PAPER_TABLE1_IMAGENET[kind],
                round(100 * float(np.mean(flags)), 1),
                "%",
                common or text,
                "higher",
                share(flags),
            )
        )
    for kind, values in run["lam_errors"].items():
        rows.append(
            _row(
                "L_s = |λ − λ*|, no noise",
                f"{NETWORK}, {kind}",
                "not stated",
                float(f"{np.mean(values):.3g}"),
                "",
                common or "the paper states L_s only under noise (Table 5)",
                spread=bounded(values, 4, low=0.0),
                not_comparable="no ImageNet value in the paper",
            )
        )
    for kind, values in run["errors"].items():
        rows.append(
            _row(
                "mean L_r",
                f"{NETWORK}, {kind}",
                "not stated",
                float(f"{np.mean(values):.3g}"),
                "L1",
                common or "Table 1 gives accuracy only",
                spread=bounded(values, 9, low=0.0),
                not_comparable="no ImageNet value in the paper",
            )
        )
    rows.append(
        _row(
            "iDLG label accuracy, one-hot (Table 1, ImageNet)",
            NETWORK,
            PAPER_TABLE1_IMAGENET["iDLG"],
            round(100 * float(np.mean(run["idlg"])), 1),
            "%",
            common or "as above; the sign rule on one-hot labels",
            "higher",
            share(run["idlg"]),
        )
    )
    return rows


def insert_rows(rows: list[dict], new: list[dict]) -> list[dict]:
    """``rows`` with ``new`` placed after the last label-accuracy row (Table 2 and Table 1's one-hot row)."""
    last = max(
        (
            i
            for i, row in enumerate(rows)
            if row["quantity"].startswith("label accuracy")
        ),
        default=len(rows) - 1,
    )
    return rows[: last + 1] + list(new) + rows[last + 1 :]


def worst_label(run: dict) -> dict:
    """The ImageNet label with the largest L1 error L_r, for the page to glue: ``kind``, ``index`` (the
    photograph), ``error`` (L_r), ``gap`` = |λ − λ*|, ``relative`` = gap / |λ*|, ``lam_star`` and
    ``accepted`` (whether a λ passed the search's acceptance bar, :func:`gitutor.labels.recover_soft_label`;
    if not, the search returned its lowest-loss candidate).

    Raises:
        ValueError: if ``run`` holds no label (its ``"errors"`` lists are all empty).
    """
    pairs = [(k, i) for k, v in run["errors"].items() for i in range(len(v))]
    if not pairs:
        raise ValueError("run holds no ImageNet label (its 'errors' lists are empty)")
    kind, index = max(pairs, key=lambda ki: run["errors"][ki[0]][ki[1]])
    error, gap, lam_star = (
        run[key][kind][index] for key in ("errors", "lam_errors", "lam_stars")
    )
    return {
        "kind": kind,
        "index": index,
        "error": float(error),
        "gap": float(gap),
        "relative": float(gap) / abs(float(lam_star)),
        "lam_star": float(lam_star),
        "accepted": bool(run["accepted"][kind][index]),
    }


def labels_needed(paper: float, limit: int = 10_000) -> int:
    """The fewest labels, all recovered, whose 95 % Wilson interval clears the paper's accuracy ``paper`` (%)
    less the verdict's allowance (:data:`gitutor.results.verdicts.TOLERANCE`): what a *meets* needs."""
    bar = paper / 100 * (1 - TOLERANCE)
    return next(n for n in range(1, limit) if success_interval([True] * n).low >= bar)
