"""Chapter 01's recorded defense study: DLG against the defenses of DLG §5, trial by trial.

Zhu, Liu & Han (NeurIPS 2019, §5 "Defense strategies", Fig. 7) defend the shared gradient in two ways that
leave training unchanged: **pruning** (the smallest-magnitude entries of every tensor set to zero; Fig. 7's
ratios 1 %, 10 %, 20 %, 30 %, 50 %, 70 %) and additive **Gaussian or Laplacian noise** of variance 10⁻⁴,
10⁻³, 10⁻² and 10⁻¹ (:data:`LEVELS`; the paper states the noise as a *variance* v, so the Gaussian's
standard deviation is σ = √v and the Laplacian's scale b = √(v / 2), both of variance v).

One trial is ``(kind, level, image)``: the DLG LeNet of the public code for 100 classes and foolbox's real
CIFAR-100 sample ``image`` with its true label at 32×32 (:func:`~gitutor.chapters.dlg.sweeps.dlg_case` with
seed ``image``: the same model, image and dummy start as the chapter's seed study for that seed), the client's
gradient defended by :func:`study_defense` and attacked by the chapter's one DLG
(:func:`~gitutor.chapters.dlg.sweeps.attack`, i.e. :func:`gitutor.attacks.dlg`, label unknown) for the paper's
300 L-BFGS steps with no stop rule (:func:`trial`). The noise of image ``image`` is drawn from a generator
seeded by :func:`noise_seed` (a stream of its own per noise kind, independent of the attacker's start, which
uses seed ``image``); the levels of one kind reuse that draw, scaled (common random numbers: two levels of
one image differ only in the noise's size). :func:`study_trials` lists the trials, :func:`image_controls`
the know-nothing controls each image's result is judged against (:mod:`.defense_reading`).
``scripts/defense_study_01.py`` runs the trials (journaled, resumable) and writes
``book/studies/01_defenses.json``.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from functools import partial

import numpy as np
import torch

from gitutor.attacks import dlg_distance
from gitutor.chapters.dlg.sweeps import attack, dlg_case, dummy_start
from gitutor.checkpoints import Checkpoint
from gitutor.checks import check_choice, check_int, check_real
from gitutor.controls import control_images
from gitutor.data import sample_set
from gitutor.federated import (
    Defense,
    add_gaussian_noise,
    add_laplacian_noise,
    prune_gradients,
)
from gitutor.federated.case import gradient_case
from gitutor.metrics import psnr, ssim
from gitutor.seeding import make_generator, trial_seeds

#: The defenses of DLG §5 and the levels of its Fig. 7: pruned fraction of every tensor, noise variance.
LEVELS = {
    "prune": (0.01, 0.1, 0.2, 0.3, 0.5, 0.7),
    "gaussian": (1e-4, 1e-3, 1e-2, 1e-1),
    "laplacian": (1e-4, 1e-3, 1e-2, 1e-1),
}
#: Every kind of trial: no defense (level 0), then the defenses of :data:`LEVELS`.
KINDS = ("none", *LEVELS)
#: What the page calls each kind and the unit of its level.
NAMES = {
    "none": "no defense",
    "prune": "pruning",
    "gaussian": "Gaussian noise",
    "laplacian": "Laplacian noise",
}
UNITS = {"prune": "fraction pruned", "gaussian": "variance", "laplacian": "variance"}
#: The study's setting: the chapter's main one (DLG paper, public code), the paper's 300 steps.
SETTING = {
    "size": 32,
    "num_classes": 100,
    "source": "cifar100_samples",
    "iterations": 300,
    "record_every": 10,
}
#: How many samples the source holds (foolbox's CIFAR-100 set): images 0 … SAMPLES − 1.
SAMPLES = 20
#: A restart's dummy seed: the image's seed plus this times the start (as the seed study's restarts).
RESTART_OFFSET = 1000
#: The N(0, 1) start control is drawn from this seed, as chapter 01 draws it (its ``SEED``).
CONTROL_SEED = 0
#: Side (px) of the thumbnail control, as the chapter's profile (``thumbnail``).
THUMBNAIL = 4
#: Seconds of one CPU core per 32×32 L-BFGS step of ``dlg`` on the DLG LeNet (up to 20 evaluations of the
#: distance; the chapter profile's estimate): what :func:`cpu_hours` budgets.
STEP_SECONDS = 0.2


def cpu_hours(images: int = SAMPLES) -> float:
    """The study's cost on ``images`` samples at most, in hours of one CPU core: every trial of
    :func:`study_trials` for all :data:`SETTING` steps at :data:`STEP_SECONDS` each (a run at a fixed point
    of L-BFGS stops computing earlier).

    Raises:
        ValueError / TypeError: naming ``images`` when it is not an int in [1, :data:`SAMPLES`].
    """
    images = check_int(images, "images", low=1, high=SAMPLES)
    trials = len(study_trials(range(images)))
    return trials * SETTING["iterations"] * STEP_SECONDS / 3600


def noise_seed(kind: str, image: int) -> int:
    """The seed of the noise that defense ``kind`` (``"gaussian"`` or ``"laplacian"``) adds to the gradient
    of sample ``image``: :func:`gitutor.seeding.trial_seeds` of purpose ``"<kind> noise"``, a stream apart
    from the attacker's dummy start (seed ``image``) and from the other noise kind.

    Raises:
        ValueError: naming ``kind`` for a kind without noise, or ``image`` outside [0, :data:`SAMPLES`).
        TypeError: naming ``image`` when it is not an int.
    """
    check_choice(kind, "kind", ("gaussian", "laplacian"))
    image = check_int(image, "image", low=0, high=SAMPLES - 1)
    return trial_seeds(0, SAMPLES, f"{kind} noise")[image]


def study_defense(kind: str, level: float, image: int) -> Defense | None:
    """The client's defense of one trial (DLG §5), a :class:`gitutor.federated.Defense`, or None for
    ``kind == "none"`` (level 0).

    ``"prune"``: :func:`gitutor.federated.prune_gradients` at rate ``level`` (fraction of each tensor's
    entries zeroed); ``"gaussian"``: :func:`gitutor.federated.add_gaussian_noise` with σ = √``level``;
    ``"laplacian"``: :func:`gitutor.federated.add_laplacian_noise` with b = √(``level`` / 2) — ``level`` is
    the noise *variance*, DLG §5's unit. The noise comes from a fresh generator seeded by :func:`noise_seed`.

    Raises:
        ValueError: naming ``kind`` (not one of :data:`KINDS`), ``level`` (not one of the kind's
            :data:`LEVELS`, or not 0 for ``"none"``) or ``image`` (as :func:`noise_seed`).
        TypeError: naming ``level`` when it is not a real number.
    """
    check_choice(kind, "kind", KINDS)
    level = check_real(level, "level")
    image = check_int(image, "image", low=0, high=SAMPLES - 1)
    allowed = (0.0,) if kind == "none" else LEVELS[kind]
    if level not in allowed:
        raise ValueError(
            f"level must be one of {allowed} for kind {kind!r} (DLG §5, Fig. 7), got {level!r}"
        )
    if kind == "none":
        return None
    if kind == "prune":
        return Defense(kind, partial(prune_gradients, rate=level))
    noise, spread = (
        (add_gaussian_noise, {"sigma": math.sqrt(level)})
        if kind == "gaussian"
        else (add_laplacian_noise, {"scale": math.sqrt(level / 2)})
    )
    generator = make_generator(noise_seed(kind, image))
    return Defense(kind, partial(noise, generator=generator, **spread))


def study_trials(images: Sequence[int]) -> list[dict]:
    """Every trial of the study on the samples ``images``: ``{"kind", "level", "image"}`` for no defense
    (level 0.0) and every level of :data:`LEVELS`, image by image within a level, levels in the order of
    :data:`KINDS` and :data:`LEVELS`.

    Raises:
        ValueError: naming ``images`` when it is empty, repeats a sample or holds one outside
            [0, :data:`SAMPLES`).
        TypeError: naming ``images`` when an entry is not an int.
    """
    images = list(images)
    if not images or len(set(images)) != len(images):
        raise ValueError(f"images must be distinct sample indices, got {images!r}")
    for index in images:
        check_int(index, "images", low=0, high=SAMPLES - 1)
    levels = [("none", 0.0)] + [(k, v) for k, values in LEVELS.items() for v in values]
    return [
        {"kind": kind, "level": level, "image": image}
        for kind, level in levels
        for image in images
    ]


def encode_image(image: torch.Tensor) -> str:
    """A ``(C, H, W)`` image in [0, 1] as base64 of its uint8 pixels (C·H·W bytes, values ×255 rounded):
    how the record stores a reconstruction. :func:`decode_image` reads it back."""
    pixels = (image.detach().cpu().clamp(0, 1) * 255).round().to(torch.uint8)
    return base64.b64encode(pixels.numpy().tobytes()).decode("ascii")


def decode_image(text: str, shape: Sequence[int]) -> torch.Tensor:
    """The ``(C, H, W)`` float image in [0, 1] that :func:`encode_image` stored as ``text``.

    Raises:
        ValueError: naming ``text`` when it does not hold C·H·W bytes of base64.
    """
    try:
        data = base64.b64decode(text, validate=True)
    except ValueError as error:
        raise ValueError(f"text is not base64: {error}") from None
    if len(data) != math.prod(shape):
        raise ValueError(
            f"text holds {len(data)} bytes, not the {math.prod(shape)} of an image {tuple(shape)}"
        )
    pixels = np.frombuffer(data, dtype=np.uint8).reshape(tuple(shape))
    return torch.from_numpy(pixels.astype(np.float32) / 255)


def _check_setting(context: Mapping) -> dict:
    if not isinstance(context, Mapping) or set(context) != set(SETTING):
        raise ValueError(
            f"context must be a mapping with the keys {sorted(SETTING)} (defense_study.SETTING), "
            f"got {context!r}"
        )
    for key in ("size", "num_classes", "iterations", "record_every"):
        check_int(context[key], f"context[{key!r}]")
    return dict(context)


def trial(
    context: Mapping,
    *,
    kind: str,
    level: float,
    image: int,
    start: int = 0,
    checkpoint: Checkpoint | None = None,
) -> dict:
    """One trial of the study: DLG on sample ``image``'s gradient, defended by ``kind`` at ``level``.

    The case is :func:`~gitutor.chapters.dlg.sweeps.dlg_case` ``(image, …)`` (the DLG LeNet drawn from seed
    ``image``, the sample and its true label), the server's view its gradient through
    :func:`study_defense`, and the attack :func:`~gitutor.chapters.dlg.sweeps.attack` (:func:`gitutor.attacks.dlg`,
    label unknown, L-BFGS with the DLG code's fixed step, dummy start of seed ``image`` +
    :data:`RESTART_OFFSET` · ``start``) for ``context["iterations"]`` steps with no stop rule (DLG
    Algorithm 1). ``start`` 0 is the study's run; ``start`` 1 a restart of a run that stalled
    (:func:`gitutor.chapters.dlg.defense_reading.stalled_run`), from a dummy the first did not see.

    Args:
        context: :data:`SETTING` (image side, classes, source, steps, snapshot interval).
        kind, level, image: the trial (:func:`study_trials`).
        start: which start of the trial (0: the first; ≥ 1: a restart).
        checkpoint: where the run saves and resumes (:func:`gitutor.sweeps.run_trials` passes one).

    Returns:
        ``{"psnr"`` (dB, the reconstruction clipped to [0, 1]), ``"ssim"``, ``"label_ok"``,
        ``"final_distance"`` (the gradient distance ‖∇W(x', y') − ∇W_sent‖² at the returned image and label
        logits, after the last step: ``info["final_loss"]`` of :func:`gitutor.attacks.dlg`, the seed study's
        "final distance", what the attacker sees), ``"distance_truth"`` (the distance of the true image and label to
        the gradient the server received: 0 without a defense, the defense's perturbation otherwise),
        ``"steps"`` (L-BFGS steps computed: fewer at a fixed point of the iteration), ``"curve"``
        (``[[step, PSNR dB]]`` every ``record_every`` steps, step 0 first) and ``"image"``
        (:func:`encode_image` of the reconstruction)``}``.

    Raises:
        ValueError: naming ``context``, ``kind``, ``level`` or ``image`` (as :func:`study_defense`), before
            the attack runs.
    """
    settings = _check_setting(context)
    check_int(start, "start", low=0)
    defense = study_defense(kind, level, image)
    model, x, y = dlg_case(
        image,
        size=settings["size"],
        source=settings["source"],
        num_classes=settings["num_classes"],
    )
    case = gradient_case(model, x, y, defense=defense)
    run = attack(
        case,
        iterations=settings["iterations"],
        seed=image + RESTART_OFFSET * start,
        record_every=settings["record_every"],
        checkpoint=checkpoint,
    )
    truth = x.cpu()
    found = run.images.clamp(0, 1)
    at_truth = dlg_distance(model, x, None, case.update, labels=y)
    return {
        "psnr": float(psnr(found, truth)[0]),
        "ssim": float(ssim(found, truth)[0]),
        "label_ok": bool((run.labels == y.cpu()).all()),
        "final_distance": float(run.info["final_loss"]),
        "distance_truth": float(at_truth.detach()),
        "steps": int(run.info.get("converged_at", len(run.history["loss"]))),
        "curve": [
            [step, float(psnr(images.clamp(0, 1), truth)[0])]
            for step, images in run.snapshots
        ],
        "image": encode_image(found[0]),
    }


def image_controls(size: int = 32) -> list[dict]:
    """Per CIFAR-100 sample (all :data:`SAMPLES`, in order), the highest PSNR (dB) that a reconstruction
    knowing nothing of it scores, and which control scores it: ``[{"control": name, "psnr": dB}]``.

    The controls are chapter 01's (:func:`gitutor.controls.control_images` of the 20 samples at ``size``
    with a :data:`THUMBNAIL`-pixel thumbnail — mean colour, thumbnail, mean of the 20, a different
    photograph — and DLG's own N(0, 1) start clipped to [0, 1],
    :func:`~gitutor.chapters.dlg.sweeps.dummy_start` of seed :data:`CONTROL_SEED`): a reconstruction at or
    below its image's highest control has been *stopped* (:func:`.defense_reading.outcome`).

    Raises:
        ValueError: for a ``size`` the samples cannot be resized to (as :func:`gitutor.data.sample_set`).
    """
    images, _ = sample_set("cifar100", size)
    found = control_images(images, THUMBNAIL)
    found["N(0, 1) start"] = dummy_start(images.shape, CONTROL_SEED)
    scores = {name: psnr(control, images) for name, control in found.items()}
    table = torch.stack(list(scores.values()))  # (controls, images)
    best = table.argmax(dim=0)
    names = list(scores)
    return [
        {"control": names[int(best[i])], "psnr": float(table[best[i], i])}
        for i in range(len(images))
    ]
