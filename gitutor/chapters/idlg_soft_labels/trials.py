"""Chapter 02's trials around the λ recovery (Wang, Liang & He, ICLR 2024, §4): the chapter's images,
labelled samples, the true λ for scoring, the local minima of the λ landscape and a small client-side
training loop.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gitutor.data import (
    digits,
    natural_images,
    resize,
    torchvision_images,
    whole_photographs,
)
from gitutor.federated import cross_entropy, mixup, smooth_labels
from gitutor.labels import LambdaProblem
from gitutor.models import LeNet

KINDS = ("smoothing", "mixup", "one-hot")
#: The authors' input transform (``recovering.py``, ``tt``): CIFAR-10's per-channel mean and std, for
#: :class:`gitutor.models.Normalized` (the book's images stay in [0, 1]; the network standardises them).
CIFAR10_MEAN = (0.4914672374725342, 0.4822617471218109, 0.4467701315879822)
CIFAR10_STD = (0.24703224003314972, 0.24348513782024384, 0.26158785820007324)


def chapter_images(
    cfg, data_root: str, seed: int, generator: torch.Generator
) -> dict[str, torch.Tensor]:
    """The chapter's images: ``photos`` (label trials), ``shown`` (reconstructions), ``fcn`` (FCN-4 inputs at
    ``cfg.fcn_image_size``) and the shuffled ``trained_images``/``trained_labels`` of the trained LeNet.

    Bundled photographs and digits when ``cfg.profile`` is "quick" or ``data_root`` is "bundled" (the full
    profile's offline substitute), else CIFAR-10 under ``data_root``. ``generator`` shuffles the trained set.

    Raises:
        OfflineDataError: when CIFAR-10 is not under ``data_root`` (what to download, where).
        ValueError: if the bundled photographs are fewer than ``cfg.fcn_images + 1``.
    """
    n_photos = max(cfg.idlg_samples, cfg.table2_samples, cfg.noise_samples) + 2
    if (
        cfg.profile == "quick" or data_root == "bundled"
    ):  # crops for label trials, whole photographs to look at
        photos, shown = (
            natural_images(n_photos, size=cfg.image_size, seed=seed),
            whole_photographs(cfg.image_size),
        )
        trained_images, trained_labels = digits(size=cfg.digits_size)
        if len(shown) < cfg.fcn_images + 1:
            raise ValueError(
                f"fcn_images={cfg.fcn_images} needs {cfg.fcn_images + 1} photographs; "
                f"{len(shown)} are bundled"
            )
    else:
        photos, _ = torchvision_images(
            "cifar10", n_photos, root=data_root, size=cfg.image_size, seed=seed
        )
        n_shown = max(
            2 * max(cfg.table3_samples.values()) + 2, cfg.fcn_images + 1
        )  # Table 3 pairs, FCN images
        shown, _ = torchvision_images(
            "cifar10", n_shown, root=data_root, size=cfg.image_size, seed=seed + 1
        )
        trained_images, trained_labels = torchvision_images(
            "cifar10",
            cfg.trained_images,
            root=data_root,
            train=True,
            size=cfg.image_size,
            seed=seed,
        )
    order = torch.randperm(len(trained_images), generator=generator)
    return {
        "photos": photos,
        "shown": shown,
        "fcn": resize(shown[: cfg.fcn_images + 1], cfg.fcn_image_size),
        "trained_images": trained_images[order],
        "trained_labels": trained_labels[order],
    }


def labelled_sample(
    kind: str,
    images: torch.Tensor,
    index: int,
    num_classes: int,
    generator: torch.Generator,
    *,
    labels: torch.Tensor | None = None,
    smoothing_max: float = 0.5,
):
    """``(x (1, C, H, W), soft label (1, num_classes), exclude_top)`` for ``kind`` in :data:`KINDS`.

    Without ``labels`` the classes are random (two different ones for mixup, images ``index`` and
    ``index + 1``); with ``labels`` the sample keeps its true class and mixup pairs it with the next image
    of another class. Smoothing ε ~ U(0, ``smoothing_max``) (§4.1), mixup weight ~ U(0, 1); ``exclude_top``
    is Eq. 5's number of entries left out of the variance (2 for mixup, else 1).

    Raises:
        ValueError: for an unknown ``kind``.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    pair = torch.randperm(num_classes, generator=generator)[:2]
    a = labels[index : index + 1] if labels is not None else pair[:1]
    x = images[index : index + 1]
    if kind == "smoothing":
        return (
            x,
            smooth_labels(
                a,
                smoothing_max * float(torch.rand((), generator=generator)),
                num_classes,
            ),
            1,
        )
    if kind == "one-hot":
        return x, F.one_hot(a, num_classes).float(), 1
    if labels is None:
        j, b = index + 1, pair[1:]
    else:
        j = next(j for j in range(index + 1, len(labels)) if labels[j] != a[0])
        b = labels[j : j + 1]
    mixed, y = mixup(
        x,
        a,
        images[j : j + 1],
        b,
        float(torch.rand((), generator=generator)),
        num_classes=num_classes,
    )
    return mixed, y, 2


def label_l1(label: torch.Tensor, y: torch.Tensor) -> float:
    """The paper's L_r: the sum of absolute errors of the recovered label's entries (Table 2)."""
    return float((label.double().cpu() - y.reshape(-1).double().cpu()).abs().sum())


def true_lambda(model: nn.Module, x: torch.Tensor, y: torch.Tensor, row: int) -> float:
    """λ* = 1 / (p_r − y_r) from the true sample (evaluation only; the attack never sees it)."""
    with torch.no_grad():
        p = torch.softmax(model(x).double(), dim=-1)[0].cpu()
    return 1.0 / float(p[row] - y[0, row].cpu())


def local_minima(
    problem: LambdaProblem, reach: float, points: int = 20001
) -> torch.Tensor:
    """λ values of the local minima of Eq. 5's loss on a grid over [−reach, reach] (|λ| > 0.5)."""
    grid = torch.linspace(-reach, reach, points, dtype=torch.float64)
    grid = grid[grid.abs() > 0.5]
    values = problem.loss(grid)
    inner = (values[1:-1] < values[:-2]) & (values[1:-1] < values[2:])
    return grid[1:-1][inner]


def trained_stand_in(
    cfg, images: torch.Tensor, labels: torch.Tensor, device="cpu"
) -> tuple[nn.Module, float]:
    """Fig. 1's and Table 2's trained network in the quick profile: a ReLU LeNet with a bias-free last layer,
    trained by :func:`train_with_smoothing` on the first ``cfg.trained_split`` of ``images (N, C, H, W)`` /
    ``labels (N,)``. Returns ``(model in eval mode, held-out accuracy in %)`` on the remaining images.

    Raises:
        ValueError: if ``cfg.trained_split`` leaves no image to train on or none held out.
    """
    split = cfg.trained_split
    if not 0 < split < len(images):
        raise ValueError(
            f"trained_split={split} must leave training and held-out images among {len(images)}"
        )
    model = LeNet(
        cfg.num_classes,
        in_channels=images.shape[1],
        image_size=images.shape[-1],
        activation="relu",
        fc_bias=False,
    ).to(device)
    train_with_smoothing(
        model,
        images[:split].to(device),
        labels[:split].to(device),
        epochs=cfg.train_epochs,
        batch_size=cfg.train_batch,
        lr=cfg.train_lr,
        smoothing=cfg.train_label_smoothing,
    )
    with torch.no_grad():
        correct = model(images[split:].to(device)).argmax(1).cpu() == labels[split:]
    return model, 100 * correct.float().mean().item()


def train_with_smoothing(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    smoothing: float,
) -> nn.Module:
    """Train ``model`` as a client would, with label smoothing ε = ``smoothing`` (Adam, in order, no shuffling);
    returns it in eval mode."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    num_classes = model(images[:1]).shape[-1]
    for _ in range(epochs):
        for start in range(0, len(images), batch_size):
            target = smooth_labels(
                labels[start : start + batch_size], smoothing, num_classes
            )
            loss = cross_entropy(model(images[start : start + batch_size]), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model.eval()
