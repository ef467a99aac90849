"""Chapter 07's data and FedADMM client rounds (the DLG reproduction report, Algorithm 2 lines 11–22).

``load_kinds`` gives the attacked images of each data kind (bundled stand-ins offline, torchvision
datasets for the full profile, all missing ones named in ONE error); ``first_round`` (the server's view
through :func:`~gitutor.federated.case.fedadmm_case`) and ``client_round`` build the round the server
observes; ``attack_first_round`` runs the report's four attacks and this book's adaptive one on it;
``closed_form_errors`` and ``alignment`` are the closed-form check and the ablation's turn of the
target (:func:`alignment_grid` runs it over the profile's settings); ``round_two_attacks`` attacks the
second round on every image;
``chapter_model`` builds the attacked LeNet and ``relative_error`` compares parameter lists (with
:func:`gitutor.models.parameters_at.model_at`, the small tools they need).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
from torch import nn
from tqdm.auto import tqdm

from gitutor.attacks import (
    AttackResult,
    adaptive_admm_inversion,
    cosine_gradient_distance,
    dlg,
    dlg_admm,
    fc_weight_index,
    idlg_admm,
)
from gitutor.attacks.admm import (
    closed_form_gradient,
    server_state_after_round_one,
)
from gitutor.attacks.batched_dlg import batched_dlg
from gitutor.data import (
    REAL_PHOTOGRAPHS,
    OfflineDataError,
    digits,
    lfw_faces,
    resize,
    sample_set,
    torchvision_images,
    whole_photographs,
)
from gitutor.federated import client_gradients, fedadmm_client_update, pseudo_gradient
from gitutor.federated.case import Case, fedadmm_case
from gitutor.labels import idlg_label
from gitutor.metrics import psnr
from gitutor.models import LeNet, init_uniform_
from gitutor.models.parameters_at import model_at
from gitutor.seeding import make_generator

#: Data kinds offline: foolbox's 20 real MNIST and CIFAR-100 test samples with their true labels (the
#: report's datasets, the quick profile's), and the stand-ins: scikit-learn digits, whole skimage
#: photographs and skimage's LFW subset (random labels). The full profile loads the report's datasets
#: through torchvision.
BUNDLED = ("mnist_samples", "cifar100_samples", "digits", "photos", "lfw")
TORCHVISION = {
    "mnist": "MNIST(root, train=False, download=True)",
    "cifar100": "CIFAR100(root, train=False, download=True)",
    "lfw_people": "LFWPeople(root, split='test', download=True)",
}
#: Real photographs bundled with scikit-image (no drawings or silhouettes): the CIFAR-100 stand-in.
PHOTOGRAPHS = REAL_PHOTOGRAPHS
#: ``data_root`` value that loads the bundled stand-in of every torchvision kind (offline smoke runs).
BUNDLED_ROOT = "bundled"
STAND_INS = {
    "mnist": "mnist_samples",
    "cifar100": "cifar100_samples",
    "lfw_people": "lfw",
}
#: Display names of the data kinds.
NAMES = {
    "mnist_samples": "MNIST (20 test samples)",
    "cifar100_samples": "CIFAR-100 (20 test samples)",
    "digits": "digits (MNIST stand-in)",
    "photos": "photographs (CIFAR stand-in)",
    "lfw": "LFW faces",
    "mnist": "MNIST",
    "cifar100": "CIFAR-100",
    "lfw_people": "LFW",
}


def _lfw_people(
    root: str | Path, n: int, size: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    import torchvision

    try:
        people = torchvision.datasets.LFWPeople(
            str(root),
            split="test",
            download=False,
            transform=torchvision.transforms.ToTensor(),
        )
    except RuntimeError as error:  # torchvision: "Dataset not found or corrupted"
        raise OfflineDataError(
            f"LFWPeople is not in {Path(root).resolve()} ({error})"
        ) from error
    pick = torch.randperm(len(people), generator=generator)[:n]
    images, labels = zip(*(people[int(i)] for i in pick))
    return resize(torch.stack(images), size), torch.as_tensor(labels)


def _load(
    kind: str,
    n: int,
    size: int,
    seed: int,
    root: str | Path,
    classes: int,
    channels: int,
):
    generator = make_generator(seed)
    if str(root) == BUNDLED_ROOT:
        kind = STAND_INS.get(kind, kind)
    if kind.endswith(
        "_samples"
    ):  # the first n of the 20 after one shuffle from ``seed``
        images, labels = sample_set(kind.removesuffix("_samples"), size)
        if n > len(images):
            raise ValueError(
                f"n={n} images asked, but {kind} holds {len(images)} samples"
            )
        pick = torch.randperm(len(images), generator=generator)[:n]
        return images[pick], labels[pick]
    if kind == "digits":
        images, labels = digits(size=size, channels=channels)
        pick = torch.randperm(len(images), generator=generator)[:n]
        return images[pick], labels[pick]
    if kind == "photos":
        if n > len(PHOTOGRAPHS):
            raise ValueError(
                f"n={n} photographs asked, but only {len(PHOTOGRAPHS)} bundled photographs exist"
            )
        photos = whole_photographs(size, PHOTOGRAPHS)
        return photos[
            torch.randperm(len(photos), generator=generator)[:n]
        ], torch.randint(classes, (n,), generator=generator)
    if kind == "lfw":
        faces = lfw_faces(size=25, channels=channels)
        pick = torch.randperm(len(faces), generator=generator)[:n]
        return resize(faces[pick], size), torch.randint(
            classes, (n,), generator=generator
        )
    if kind == "lfw_people":
        return _lfw_people(root, n, size, generator)
    return torchvision_images(kind, n, root=root, size=size, seed=seed)


def load_kinds(
    kinds: Sequence[str],
    n: int,
    size: int,
    seed: int,
    data_root: str | Path,
    num_classes: Mapping[str, int],
    channels: Mapping[str, int],
) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """``{kind: (images (n, C, size, size) in [0, 1], labels (n,))}`` for every data kind.

    Offline kinds: ``"mnist_samples"``, ``"cifar100_samples"`` (foolbox's 20 real test samples each, true
    labels, :func:`gitutor.data.sample_set`; at most 20), ``"digits"`` (scikit-learn, MNIST stand-in), ``"photos"`` (whole skimage photographs of
    :data:`PHOTOGRAPHS`, at most 12, CIFAR stand-in, random classes), ``"lfw"`` (skimage's LFW subset, random classes). Full kinds:
    ``"mnist"``, ``"cifar100"``, ``"lfw_people"`` through torchvision from ``data_root``; with
    ``data_root="bundled"`` their offline stand-ins (:data:`STAND_INS`) at the kind's classes and channels.

    Raises:
        ValueError: for an unknown kind or ``n < 1``.
        OfflineDataError: naming EVERY missing dataset with the command that fetches it.
    """
    unknown = [kind for kind in kinds if kind not in BUNDLED + tuple(TORCHVISION)]
    if unknown or n < 1:
        raise ValueError(
            f"kinds must be in {BUNDLED + tuple(TORCHVISION)} and n >= 1, got {unknown} and n={n}"
        )
    data, missing = {}, []
    for kind in kinds:
        try:
            data[kind] = _load(
                kind, n, size, seed, data_root, num_classes[kind], channels[kind]
            )
        except OfflineDataError:
            missing.append(kind)
    if missing:
        commands = "; ".join(
            f"torchvision.datasets.{TORCHVISION[kind]}" for kind in missing
        )
        raise OfflineDataError(
            f"{len(missing)} dataset(s) not in {Path(data_root).resolve()}: {', '.join(missing)}. On a machine with "
            f'internet run: python -c "import torchvision; root = {str(data_root)!r}; {commands}" — then copy '
            f"the folder here, or set DATA_ROOT to the folder that holds them."
        )
    return data


def chapter_model(
    cfg, kind: str, seed: int, device: str | torch.device = "cpu"
) -> nn.Module:
    """The attacked network for data ``kind``: the DLG LeNet (Sigmoid) for ``cfg.image_size``² inputs with
    ``cfg.channels[kind]`` channels and ``cfg.num_classes[kind]`` classes, every weight drawn from
    U(−0.5, 0.5) with ``seed`` (DLG's public code). The same seed gives the same weights.

    Raises:
        KeyError: for a ``kind`` the profile has no classes or channels for.
    """
    model = LeNet(
        num_classes=cfg.num_classes[kind],
        in_channels=cfg.channels[kind],
        image_size=cfg.image_size,
    )
    return init_uniform_(model, generator=make_generator(seed)).to(device)


def _start(model: nn.Module) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    z = [p.detach().clone() for p in model.parameters()]
    return z, [torch.zeros_like(p) for p in z]


def first_round(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    rho: float,
    lr: float,
    local_steps: int,
) -> Case:
    """The first FedADMM round (local model = global model z = the model's weights, dual π = 0) as a
    :func:`~gitutor.federated.case.fedadmm_case`: ``update`` is Δ, ``public`` holds z, π, ρ, η, E and −Δ/η."""
    z, zero = _start(model)
    return fedadmm_case(
        model, x, y, global_params=z, dual=zero, rho=rho, lr=lr, local_steps=local_steps
    )


def client_round(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    earlier: tuple[torch.Tensor, torch.Tensor],
    *,
    rho: float,
    lr: float,
    local_steps: int,
    round_number: int,
):
    """``(z, w, π, update)`` of the attacked round on ``(x, y)``.

    Round 1: w = z, π = 0. Round 2: the client first trained one round on the ``earlier`` batch and the
    server added that increment with step size 1 (a single client; the report's line 20 writes the step
    η_i, z ← z + η_i Δ), so π ≠ 0 and w ≠ z.

    Raises:
        ValueError: for a ``round_number`` other than 1 or 2.
    """
    if round_number not in (1, 2):
        raise ValueError(f"round_number must be 1 or 2, got {round_number!r}")
    z, pi = _start(model)
    w = z
    if round_number == 2:
        before = fedadmm_client_update(
            model, *earlier, z, pi, rho=rho, lr=lr, local_steps=local_steps
        )
        z = [zi + d for zi, d in zip(z, before.delta)]
        w, pi = before.local_params, before.dual
    update = fedadmm_client_update(
        model, x, y, z, pi, rho=rho, lr=lr, local_steps=local_steps, local_params=w
    )
    return z, w, pi, update


def relative_error(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> float:
    """‖a − b‖ / ‖b‖ over whole parameter lists."""
    return float(
        sum(((u - v) ** 2).sum() for u, v in zip(a, b, strict=True)).sqrt()
        / sum((v**2).sum() for v in b).sqrt()
    )


ATTACKS = ("DLG", "iDLG", "DLG-ADMM", "iDLG-ADMM", "adaptive ADMM")


def attack_first_round(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    *,
    rho: float,
    lr: float,
    local_steps: int,
    **options,
) -> dict[str, AttackResult]:
    """The report's Fig. 1 comparison on one private batch ``(x, y)``: DLG and iDLG (label from the sign rule)
    against the SGD gradient, DLG-ADMM and iDLG-ADMM against −Δ/η of the first FedADMM round (Algorithm 2), and
    the adaptive attack that simulates the round. ``options`` (iterations, seed, record_every) go to every attack,
    so all five start from the same dummy. Returns ``{name: AttackResult}`` in the order of :data:`ATTACKS`."""
    gradient = client_gradients(model, x, y)
    view = first_round(model, x, y, rho=rho, lr=lr, local_steps=local_steps).server_view
    label = torch.tensor(
        [idlg_label(gradient[fc_weight_index(model)])], device=x.device
    )
    return {
        "DLG": dlg(model, gradient, x.shape, num_classes, **options),
        "iDLG": dlg(model, gradient, x.shape, num_classes, labels=label, **options),
        "DLG-ADMM": dlg_admm(
            model, view["update"], lr, x.shape, num_classes, **options
        ),
        "iDLG-ADMM": idlg_admm(
            model, view["update"], lr, x.shape, num_classes, **options
        ),
        "adaptive ADMM": adaptive_admm_inversion(
            model,
            view["update"],
            x.shape,
            num_classes,
            global_params=view["global_params"],
            dual=view["dual"],
            rho=rho,
            lr=lr,
            local_steps=local_steps,
            **options,
        ),
    }


def closed_form_errors(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, rho: float, lr: float
) -> dict[str, float]:
    """‖−Δ/η − 2∇f(z)‖ / ‖2∇f(z)‖ for one local step of the first round (the closed form −Δ/η = 2∇f(z)),
    in ``"float64"`` (a double copy of the model and batch: rounding only) and ``"float32"``."""
    errors = {}
    for precision, net, inputs in (
        ("float64", copy.deepcopy(model).double(), x.double()),
        ("float32", model, x),
    ):
        sent = first_round(net, inputs, y, rho=rho, lr=lr, local_steps=1).public[
            "pseudo_gradient"
        ]
        errors[precision] = relative_error(
            sent, [2 * g for g in client_gradients(net, inputs, y)]
        )
    return errors


def alignment(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    earlier: tuple[torch.Tensor, torch.Tensor],
    *,
    rho: float,
    lr: float,
    local_steps: int,
    round_number: int,
) -> tuple[float, float]:
    """How close DLG-ADMM's target −Δ/η is to the gradient ∇f(w) at the client's starting point w in the
    :func:`client_round`: ``(cosine similarity, ‖−Δ/η‖ / ‖∇f(w)‖)``.

    Raises:
        ValueError: as :func:`client_round`.
    """
    _, w, _, update = client_round(
        model,
        x,
        y,
        earlier,
        rho=rho,
        lr=lr,
        local_steps=local_steps,
        round_number=round_number,
    )
    sent, gradient = (
        pseudo_gradient(update.delta, lr),
        client_gradients(model_at(model, w), x, y),
    )
    norm = lambda tensors: sum((t**2).sum() for t in tensors).sqrt()  # noqa: E731 - over the whole list
    return 1 - float(cosine_gradient_distance(sent, gradient)), float(
        norm(sent) / norm(gradient)
    )


def alignment_grid(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    earlier: tuple[torch.Tensor, torch.Tensor],
    *,
    rhos: Sequence[float],
    local_steps: Sequence[int],
    lr: float,
    progress: bool = False,
) -> tuple[dict[tuple[int, float, int], float], dict[tuple[int, float, int], float]]:
    """:func:`alignment` for rounds 1 and 2 and every ρ in ``rhos`` and E in ``local_steps``: two dicts
    keyed ``(round, ρ, E)``, the cosines and the norm ratios; ``progress`` shows a tqdm bar over the grid's
    points.

    Raises:
        ValueError: as :func:`client_round`.
    """
    cosines, ratios = {}, {}
    grid = list(itertools.product((1, 2), rhos, local_steps))
    for key in tqdm(grid, desc="alignment grid", disable=not progress):
        cosines[key], ratios[key] = alignment(
            model,
            x,
            y,
            earlier,
            round_number=key[0],
            rho=key[1],
            lr=lr,
            local_steps=key[2],
        )
    return cosines, ratios


#: The attacks on a client's second FedADMM round (E = 1), in the order of :func:`round_two_attacks`' rows.
ROUND_TWO_ATTACKS = (
    "DLG-ADMM (−Δ/η at z)",
    "closed form (DLG on ∇f(w) read off Δ)",
    "adaptive (simulated round)",
    "DLG on the true ∇f(w) (reference)",
)


def round_two_attacks(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    earlier: tuple[torch.Tensor, torch.Tensor],
    num_classes: int,
    *,
    rho: float,
    lr: float,
    iterations: int,
    seed: int = 0,
    record_every: int = 10,
    progress: bool = False,
) -> dict:
    """Every attack of :data:`ROUND_TWO_ATTACKS` on each image's second FedADMM round (one local step, one
    client, the server's step 1), all at the same budget ``iterations`` and from the same dummy start (seed
    ``seed + i`` for image i).

    The client first trains one round on ``earlier`` and keeps its w and π; its round 2 on image i runs on
    that state of its own (z = z₀ + Δ₁). The server, holding z₀ and the increment Δ₁, derives the client's
    z, w and π (:func:`~gitutor.attacks.admm.server_state_after_round_one`) and attacks the round-2
    increment Δ with them: DLG-ADMM reads −Δ/η as a gradient at z (the report's Algorithm 2); the
    closed form reads ∇f(w) off Δ exactly (:func:`~gitutor.attacks.admm.closed_form_gradient`) and runs
    DLG at w, as :func:`~gitutor.attacks.admm.closed_form_inversion` does; the adaptive attack simulates
    the round (:func:`~gitutor.attacks.admm.adaptive_admm_inversion`, image by image); and DLG on the
    client's true ∇f(w) is the reference the closed form should equal. The three DLG attacks of all
    images run side by side (:func:`gitutor.attacks.batched_dlg.batched_dlg`: DLG's L-BFGS per problem,
    tested to end as :func:`gitutor.attacks.dlg` does in float32 on the chapter's images).

    Args:
        images, labels: ``(N, C, H, W)`` images in [0, 1] and ``(N,)`` labels, one client each.
        earlier: the client's round-1 batch ``(x, y)``.
        progress: show a tqdm bar over the images' rounds and adaptive attacks (the DLG attacks then run
            side by side).

    Returns:
        ``{"psnr": {attack: [dB per image]}, "error": [‖∇̂f − ∇f(w)‖ / ‖∇f(w)‖ per image]}`` (each
        reconstruction clipped to [0, 1]; the error is the closed form's rounding).

    Raises:
        ValueError: as :func:`~gitutor.federated.fedadmm_client_update` and the attacks, before any
            attack runs for a bad batch, ρ or η.
    """
    z0 = [p.detach().clone() for p in model.parameters()]
    zero = [torch.zeros_like(p) for p in z0]
    first = fedadmm_client_update(
        model, *earlier, z0, zero, rho=rho, lr=lr, local_steps=1
    )
    # the server's view of the client (from z₀ and Δ₁ alone); the client runs round 2 on its own state
    z, w, pi = server_state_after_round_one(model, z0, first.delta, rho=rho)
    own_z = [a + d for a, d in zip(z0, first.delta)]  # one client, server step 1
    at_z, at_w = model_at(model, z), model_at(model, w)  # the server's z and w
    at_own_w = model_at(model, first.local_params)  # the client's own w
    options = {"iterations": iterations, "record_every": record_every}
    state = {"global_params": z, "dual": pi, "local_params": w, "rho": rho, "lr": lr}
    n = len(images)
    found = {"psnr": {name: [] for name in ROUND_TWO_ATTACKS}, "error": []}
    sent, read, truths, adaptive = [], [], [], []
    for i in tqdm(range(n), desc="round 2, adaptive", disable=not progress):
        x, y = images[i : i + 1], labels[i : i + 1]
        update = fedadmm_client_update(
            model,
            x,
            y,
            own_z,
            first.dual,
            rho=rho,
            lr=lr,
            local_steps=1,
            local_params=first.local_params,
        )
        truths.append(client_gradients(at_own_w, x, y))
        read.append(closed_form_gradient(model, update.delta, **state))
        sent.append(pseudo_gradient(update.delta, lr))
        found["error"].append(relative_error(read[-1], truths[-1]))
        adaptive.append(
            adaptive_admm_inversion(
                model,
                update.delta,
                x.shape,
                num_classes,
                local_steps=1,
                seed=seed + i,
                **state,
                **options,
            )
        )
    # DLG-ADMM (−Δ/η at z), DLG on the closed form's ∇f(w) and on the true ∇f(w) (at w): three
    # DLG problems per image, solved side by side (batched_dlg: dlg's L-BFGS per problem)
    seeds = [seed + i for i in range(n)] * 3
    models = [at_z] * n + [at_w] * n + [at_own_w] * n
    shape = tuple(images.shape[1:])
    dlgs = batched_dlg(
        models, sent + read + truths, shape, num_classes, seeds=seeds, **options
    )
    runs = {
        ROUND_TWO_ATTACKS[0]: dlgs[:n],
        ROUND_TWO_ATTACKS[1]: dlgs[n : 2 * n],
        ROUND_TWO_ATTACKS[2]: adaptive,
        ROUND_TWO_ATTACKS[3]: dlgs[2 * n :],
    }
    for name in ROUND_TWO_ATTACKS:
        for i, run in enumerate(runs[name]):
            truth = images[i : i + 1]
            found["psnr"][name].append(float(psnr(run.images.clamp(0, 1), truth)))
    return found
