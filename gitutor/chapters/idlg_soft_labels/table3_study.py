"""Chapter 02's recorded Table 3 study (Wang, Liang & He, ICLR 2024, §4.3, Table 3): gradient matching with
the true, the iDLG or the recovered soft label — and DLG's jointly optimised one — at the authors' budgets.

The quick page (:func:`~gitutor.chapters.idlg_soft_labels.matching.matching_table`) cannot afford budgets at
which these attacks have converged; this study runs them trial by trial, each to the budget of the authors'
code, and records every run's PSNR curve so that the page can show where the curves flatten.

**Setting** (:data:`SETTING`). The untrained LeNet of the chapter (Sigmoid, bias-free ``fc``,
:func:`gitutor.models.init_uniform_` from seed :data:`MODEL_SEED`) for CIFAR-10's 10 classes, attacked on
foolbox's real CIFAR-10 samples (:func:`gitutor.data.sample_set`) with their true classes. The network sees
its input standardised with CIFAR-10's mean and std, as the authors' ``tt`` feeds it, and both attacks
optimise that standardised image z from the authors' start z ~ N(0, 1), with TV 1e-2 on z (the authors'
untrained-network setting). One trial is ``(kind, setting, image, repeat)`` (:func:`study_trials`):

* ``kind`` ``"mixup"``: sample ``image`` mixed with the next sample of another class, weight ~ U(0, 1);
  ``"smoothing"``: sample ``image`` with its label smoothed by ε ~ U(0, 0.5)
  (:func:`~gitutor.chapters.idlg_soft_labels.trials.labelled_sample`, drawn from :func:`sample_seed`: the
  same sample in every setting and repeat);
* ``setting``: one of :data:`~gitutor.chapters.idlg_soft_labels.matching.MATCHING_SETTINGS`, distance /
  label. **L2** is Σ‖∇W' − ∇W‖² minimised by :func:`gitutor.attacks.dlg` (torch's L-BFGS, lr 1, no line
  search, 300 steps) with the label fixed (GT, iDLG's one-hot sign-rule answer, or ours,
  :func:`gitutor.labels.recover_soft_label`) or optimised jointly (DLG); **cos** is Inverting Gradients'
  1 − cosine similarity, :func:`gitutor.attacks.inverting_gradients` with plain (unsigned) Adam, lr 0.1,
  4 800 steps, the label fixed. Both step their learning rate ×0.1 at 3/8, 5/8 and 7/8 of the budget and
  return the iterate of the lowest objective, the final one included (``keep_best="scored"``), as the
  authors' code (``label_smooth_cifar10.py``: ``l2`` → L-BFGS,
  lr 1, 300 iterations; ``sim`` → Adam, lr 0.1, 4 800 iterations; ``lr_decay=True``, ``tv=1e-2``,
  ``record_picking=True``; ``recovering.py``'s ``reconstruct``);
* ``repeat``: the random start, z ~ N(0, 1) drawn from :func:`start_seed` ``(kind, image, repeat)``: the
  same start in all seven settings, so the differences between settings are paired.

**Departures from the authors' code**, all small: (1) the cosine attack clamps z after every step to the
standardised box of [0, 1] pixels (``inverting_gradients(normalisation=…)``; the authors' Adam is
unboxed); (2) the milestones are ``int(budget · f)`` (112, 187, 262 of 300; 1 800, 3 000, 4 200 of 4 800), the
authors' ``budget // 2.667`` etc. (112, 187, 262; 1 799, 3 000, 4 203); (3) iDLG's one-hot label is
iDLG's sign rule on the gradient (:func:`gitutor.labels.idlg_label`), the authors' ``hard`` label is the
true dominant class; (4) the images are foolbox's 20 CIFAR-10 samples (the authors': 45 mixup class pairs
and 30 smoothing images of the CIFAR-10 test set, 10 repeats); (5) the network is initialised by
:func:`gitutor.models.init_uniform_` (DLG's U(−0.5, 0.5)), the authors' LeNet by PyTorch's default;
(6) DLG's label logits end at their last iterate (the authors keep the chosen iterate's): the PSNR is the
same, ``label_ok`` may differ.

``scripts/table3_study_02.py`` runs the trials (journaled, resumable) and writes
``book/studies/02_table3.json``; :func:`read_record` reads it back, checked.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F

from gitutor.attacks import dlg, dlg_distance, inverting_gradients
from gitutor.attacks.objectives import cosine_gradient_distance, total_variation
from gitutor.chapters.idlg_soft_labels.matching import MATCHING_SETTINGS
from gitutor.chapters.idlg_soft_labels.trials import (
    CIFAR10_MEAN,
    CIFAR10_STD,
    labelled_sample,
)
from gitutor.checkpoints import Checkpoint
from gitutor.checks import check_choice, check_int
from gitutor.data import sample_set
from gitutor.federated import client_gradients
from gitutor.labels import idlg_label, recover_soft_label
from gitutor.metrics import psnr, ssim
from gitutor.models import LeNet, Normalized, init_uniform_
from gitutor.seeding import make_generator, trial_seeds

#: Table 3's augmentations (Wang et al. §4.3).
KINDS = ("mixup", "smoothing")
#: Table 3's settings, distance / label (as the quick page's).
SETTINGS = MATCHING_SETTINGS
#: The attack each distance runs, as the authors' code configures it (``label_smooth_cifar10.py``).
METHODS = {
    "L2": {"attack": "dlg (L-BFGS)", "lr": 1.0, "iterations": 300},
    "cos": {"attack": "inverting_gradients (Adam)", "lr": 0.1, "iterations": 4800},
}
#: The study's setting: image side, classes, data, TV weight on z, step-decay fractions, lowest-objective
#: iterate, per-distance budgets, PSNR points per curve, smoothing's largest ε.
SETTING = {
    "size": 32,
    "num_classes": 10,
    "source": "cifar10_samples",
    "tv_weight": 1e-2,
    "lr_steps": [0.375, 0.625, 0.875],
    "keep_best": "scored",
    "methods": METHODS,
    "points": 30,
    "smoothing_max": 0.5,
}
#: foolbox's CIFAR-10 samples usable by both kinds: sample 19 has no later sample of another class to mix.
SAMPLES = 19
#: The authors' repeats per image (``repetition = 10``): the most :func:`start_seed` hands out.
MAX_REPEATS = 10
#: Seed of the one untrained LeNet every trial attacks.
MODEL_SEED = 0
#: Seconds of one (niced, shared) CPU core per step, by (image side, distance), an upper bound: the pilots of
#: ``scripts/table3_study_02.py --pilot`` and single trials on this project's 2-core machine under a load of
#: about 5 (32×32). L-BFGS: 37.9 s (L2 / GT) and 38.2 s (L2 / DLG) for 300 steps that converge, 104 s for one
#: that never does (L2 / iDLG on mixup: all 20 evaluations every step) — 0.35 s; runs that leave the finite
#: numbers stop within seconds. Adam: 39.6 to 63.3 s for 4 800 steps — 0.013 s. A 15-step / 200-step pilot
#: at both sides found 16×16 as costly per step as 32×32 (×1.0 L-BFGS, ×0.95 Adam: LeNet-sized work is
#: overhead-bound). The same pilot on a quieter machine took 11.3, 11.4 and 17.3 s (about 3× less: the bound
#: is for a shared machine). What :func:`cpu_hours` budgets.
STEP_SECONDS = {
    (32, "L2"): 0.35,
    (32, "cos"): 0.013,
    (16, "L2"): 0.35,
    (16, "cos"): 0.0125,
}


def _check_kind(kind) -> str:
    return check_choice(kind, "kind", KINDS)


def sample_seed(kind: str, image: int) -> int:
    """The seed of sample ``image``'s augmentation under ``kind`` (ε, or the mixup weight): one stream per kind
    (:func:`gitutor.seeding.trial_seeds`, purpose ``"table 3 <kind> samples"``), the same in every setting.

    Raises:
        ValueError: naming ``kind`` (not one of :data:`KINDS`) or ``image`` (outside [0, :data:`SAMPLES`)).
        TypeError: naming ``image`` when it is not an int.
    """
    kind = _check_kind(kind)
    image = check_int(image, "image", low=0, high=SAMPLES - 1)
    return trial_seeds(0, SAMPLES, f"table 3 {kind} samples")[image]


def start_seed(kind: str, image: int, repeat: int) -> int:
    """The seed of the start z ~ N(0, 1) of repeat ``repeat`` on sample ``image`` under ``kind``, shared by the
    seven settings (paired differences); a stream apart from :func:`sample_seed`'s.

    Raises:
        ValueError: naming ``kind``, ``image`` (as :func:`sample_seed`) or ``repeat`` (outside
            [0, :data:`MAX_REPEATS`)).
        TypeError: naming ``image`` or ``repeat`` when it is not an int.
    """
    kind = _check_kind(kind)
    image = check_int(image, "image", low=0, high=SAMPLES - 1)
    repeat = check_int(repeat, "repeat", low=0, high=MAX_REPEATS - 1)
    seeds = trial_seeds(0, SAMPLES * MAX_REPEATS, f"table 3 {kind} starts")
    return seeds[image * MAX_REPEATS + repeat]


def study_trials(images: Sequence[int], repeats: int) -> list[dict]:
    """Every trial on the samples ``images``: ``{"kind", "setting", "image", "repeat"}`` for each kind of
    :data:`KINDS`, setting of :data:`SETTINGS`, image and repeat 0 … ``repeats`` − 1 (settings outermost
    within a kind, so that a partial run holds whole settings first).

    Raises:
        ValueError: naming ``images`` when it is empty, repeats a sample or holds one outside
            [0, :data:`SAMPLES`); naming ``repeats`` outside [1, :data:`MAX_REPEATS`].
        TypeError: naming ``images`` (an entry not an int) or ``repeats`` (not an int).
    """
    images = list(images)
    if not images or len(set(images)) != len(images):
        raise ValueError(f"images must be distinct sample indices, got {images!r}")
    for index in images:
        check_int(index, "images", low=0, high=SAMPLES - 1)
    repeats = check_int(repeats, "repeats", low=1, high=MAX_REPEATS)
    return [
        {"kind": kind, "setting": setting, "image": image, "repeat": repeat}
        for kind in KINDS
        for setting in SETTINGS
        for image in images
        for repeat in range(repeats)
    ]


def check_setting(context) -> dict:
    """``context`` as a dict after checking it has :data:`SETTING`'s keys, an int ``size`` ≥ 8, the
    ``methods`` ``"L2"`` and ``"cos"`` with int ``iterations`` ≥ 1 and ``points`` ≥ 1.

    Raises:
        ValueError: naming ``context`` (or the offending ``context[...]`` entry).
        TypeError: naming the entry when it is not an int.
    """
    if not isinstance(context, Mapping) or set(context) != set(SETTING):
        raise ValueError(
            f"context must be a mapping with the keys {sorted(SETTING)} (table3_study.SETTING), "
            f"got {context!r}"
        )
    check_int(context["size"], "context['size']", low=8)
    check_int(context["num_classes"], "context['num_classes']", low=2)
    check_int(context["points"], "context['points']")
    methods = context["methods"]
    if not isinstance(methods, Mapping) or set(methods) != set(METHODS):
        raise ValueError(
            f"context['methods'] must configure {sorted(METHODS)}, got {methods!r}"
        )
    for name, method in methods.items():
        check_int(method["iterations"], f"context['methods'][{name!r}]['iterations']")
    return dict(context)


def study_model(context: Mapping) -> torch.nn.Module:
    """The untrained LeNet every trial attacks (``(B, 3, size, size)`` standardised images → 10 logits): the
    chapter's LeNet (Sigmoid, bias-free ``fc``) initialised by :func:`gitutor.models.init_uniform_` from
    :data:`MODEL_SEED`.

    Raises:
        ValueError: naming ``context`` as :func:`check_setting`.
    """
    context = check_setting(context)
    net = LeNet(
        context["num_classes"],
        in_channels=3,
        image_size=context["size"],
        fc_bias=False,
    )
    return init_uniform_(net, generator=make_generator(MODEL_SEED))


def study_sample(
    context: Mapping, kind: str, image: int
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``(x (1, 3, size, size) in [0, 1], soft label (1, 10), exclude_top)`` of sample ``image`` under ``kind``
    (module docstring), from foolbox's CIFAR-10 samples with their true classes.

    Raises:
        ValueError: naming ``context``, ``kind`` or ``image`` (as :func:`sample_seed`).
    """
    context = check_setting(context)
    seed = sample_seed(kind, image)
    images, labels = sample_set("cifar10", context["size"])
    return labelled_sample(
        kind,
        images,
        image,
        context["num_classes"],
        make_generator(seed),
        labels=labels,
        smoothing_max=context["smoothing_max"],
    )


def _standardise(x: torch.Tensor) -> torch.Tensor:
    mean, std = (torch.tensor(v).view(1, -1, 1, 1) for v in (CIFAR10_MEAN, CIFAR10_STD))
    return (x - mean) / std


def _pixels(z: torch.Tensor) -> torch.Tensor:
    mean, std = (torch.tensor(v).view(1, -1, 1, 1) for v in (CIFAR10_MEAN, CIFAR10_STD))
    return z * std + mean


def attack_label(
    model: torch.nn.Module,
    grads: Sequence[torch.Tensor],
    y: torch.Tensor,
    source: str,
    exclude_top: int,
) -> torch.Tensor | None:
    """The ``(1, K)`` label a setting's attack is given: the truth (``"GT"``), iDLG's one-hot sign-rule answer
    (``"iDLG"``, :func:`gitutor.labels.idlg_label`), the recovered soft label (``"Ours"``,
    :func:`gitutor.labels.recover_soft_label` on the last layer, Wang et al. §3, Eq. 5), or None (``"DLG"``:
    optimised with the image).

    Raises:
        ValueError: naming ``source`` when it is none of these.
    """
    check_choice(source, "source", ("GT", "iDLG", "Ours", "DLG"))
    if source == "DLG":
        return None
    if source == "GT":
        return y.float()
    if source == "iDLG":
        return F.one_hot(torch.tensor([idlg_label(grads[-1])]), y.shape[-1]).float()
    found = recover_soft_label(model.fc, grads[-1], exclude_top=exclude_top)
    return found.label.float().view(1, -1)


def trial(
    context: Mapping,
    *,
    kind: str,
    setting: str,
    image: int,
    repeat: int,
    checkpoint: Checkpoint | None = None,
) -> dict:
    """One trial: setting ``setting`` on sample ``image`` under ``kind`` from start ``repeat``, run to its
    distance's budget (``context["methods"][distance]["iterations"]``), no stop rule.

    Args:
        context: :data:`SETTING` (or a smaller one for a check: other ``size``, ``iterations``, ``points``).
        kind, setting, image, repeat: the trial (:func:`study_trials`).
        checkpoint: where the run saves and resumes (:func:`gitutor.sweeps.run_trials` passes one).

    Returns:
        ``{"psnr"`` (dB, the returned — lowest-objective — reconstruction in pixels clipped to [0, 1]),
        ``"ssim"``, ``"psnr_last"`` (dB, the last iterate), ``"best_iteration"`` (steps done when the returned
        iterate was taken), ``"iterations"`` (the budget), ``"curve"`` (``[[step, PSNR dB of the iterate]]`` at
        step 0, every ``budget // points`` steps and at the budget, steps increasing), ``"loss_curve"``
        (``[[step, objective before step + 1]]`` at the same steps below the budget), ``"label_l1"`` (L1
        error of the label given to the attack, the paper's L_r; None for DLG), ``"label_ok"`` (the
        attack's label's largest class is the true one), ``"stopped_early"`` (None, or why the run stopped:
        a step that left the finite numbers — L-BFGS's fixed step can; its curve then holds the last finite
        iterate to the budget), ``"prior"`` (cosine only, else None: at step
        ``budget // 4``, the norm of TV's image gradient over the matching term's and the fraction of pixels
        where the objective's gradient has the matching term's sign — DESIGN.md's check that the prior does
        not set the update)``}``.

    Raises:
        ValueError: naming ``context``, ``kind``, ``setting``, ``image`` or ``repeat`` (as :func:`start_seed`)
            before the attack runs.
    """
    context = check_setting(context)
    check_choice(setting, "setting", SETTINGS)
    seed = start_seed(kind, image, repeat)
    return _run(context, kind, setting, image, seed, None, checkpoint)


def _run(
    context: dict,
    kind: str,
    setting: str,
    image: int,
    seed: int,
    start: torch.Tensor | None,
    checkpoint: Checkpoint | None,
) -> dict:
    """:func:`trial`'s run from the seed's N(0, 1) start, or from ``start`` (pixels in [0, 1]) when given."""
    distance, source = setting.split(" / ")
    method = context["methods"][distance]
    budget = method["iterations"]
    every = max(1, budget // context["points"])
    model = study_model(context)
    x, y, exclude_top = study_sample(context, kind, image)
    z = _standardise(x)
    grads = [g.detach() for g in client_gradients(model, z, y)]
    label = attack_label(model, grads, y, source, exclude_top)
    common = {
        "iterations": budget,
        "seed": seed,
        "record_every": every,
        "lr": method["lr"],
        "tv_weight": context["tv_weight"],
        "lr_steps": tuple(context["lr_steps"]),
        "keep_best": context["keep_best"],
        "checkpoint": checkpoint,
    }
    if distance == "L2":  # the network's input is z: dlg optimises z itself
        run = dlg(
            model,
            grads,
            tuple(z.shape),
            context["num_classes"],
            labels=label,
            start=None if start is None else _standardise(start),
            **common,
        )
        images, snapshots = (
            _pixels(run.images),
            [(t, _pixels(s)) for t, s in run.snapshots],
        )
        guess = run.labels if label is None else label.argmax(-1)
    else:  # the network standardises x inside; the attack optimises z (normalisation=)
        run = inverting_gradients(
            Normalized(model, CIFAR10_MEAN, CIFAR10_STD),
            grads,
            label,
            tuple(x.shape),
            signed=False,
            normalisation=(CIFAR10_MEAN, CIFAR10_STD),
            diagnose_at=(budget // 4,),  # TV against matching, before the first decay
            start=start,
            **common,
        )
        images, snapshots, guess = run.images, run.snapshots, label.argmax(-1)
    if (
        snapshots[-1][0] < budget
    ):  # stopped early (a non-finite step): the iterate holds to the budget
        snapshots = [*snapshots, (budget, snapshots[-1][1])]
    losses = run.history["loss"]
    weighed = run.info.get("prior_gradients", {}).get(str(budget // 4))
    found = images.clamp(0, 1)
    return {
        "psnr": float(psnr(found, x)[0]),
        "ssim": float(ssim(found, x)[0]),
        "psnr_last": float(psnr(snapshots[-1][1].clamp(0, 1), x)[0]),
        "best_iteration": int(run.info.get("best_iteration", budget)),
        "iterations": budget,
        "curve": [[int(t), float(psnr(s.clamp(0, 1), x)[0])] for t, s in snapshots],
        "loss_curve": [
            [int(t), float(losses[t])] for t, _ in snapshots if t < len(losses)
        ],
        "label_l1": None if label is None else float((label - y).abs().sum()),
        "label_ok": bool(int(guess.reshape(-1)[0]) == int(y.argmax(-1)[0])),
        "stopped_early": run.info.get("stopped_early"),
        "prior": None
        if weighed is None
        else {
            "step": budget // 4,
            "tv_over_matching": weighed["TV/matching"],
            "sign_agreement": weighed["sign_agreement"],
        },
    }


#: The sanity arm (DESIGN.md, "Attack strength"): the label-known settings, started at the truth plus
#: Gaussian noise of standard deviation :data:`SANITY_NOISE` (pixels in [0, 1], clipped to [0, 1]; a start
#: near 34 dB), each run to its distance's budget as :func:`trial`.
SANITY_SETTINGS = ("L2 / GT", "cos / GT")
SANITY_NOISE = 0.02


def sanity_trials(images: Sequence[int]) -> list[dict]:
    """Every sanity trial on the samples ``images``: ``{"kind", "setting", "image"}`` for each kind of
    :data:`KINDS` and setting of :data:`SANITY_SETTINGS`.

    Raises:
        ValueError / TypeError: naming ``images`` as :func:`study_trials`.
    """
    study_trials(images, 1)  # the same checks
    return [
        {"kind": kind, "setting": setting, "image": image}
        for kind in KINDS
        for setting in SANITY_SETTINGS
        for image in images
    ]


def sanity_trial(
    context: Mapping,
    *,
    kind: str,
    setting: str,
    image: int,
    checkpoint: Checkpoint | None = None,
) -> dict:
    """One sanity trial: ``setting`` (one of :data:`SANITY_SETTINGS`) on sample ``image`` under ``kind``, started
    at the truth plus N(0, :data:`SANITY_NOISE`²) noise clipped to [0, 1] (the noise from its own stream,
    ``"table 3 <kind> sanity starts"``), run to the budget with the recipe of :func:`trial`. An attack at full
    strength keeps such a start recognisable; one that drifts off it has an objective whose minimum is not the
    truth.

    Returns:
        :func:`trial`'s dict and ``"start_psnr"`` (dB, the start against the truth).

    Raises:
        ValueError: naming ``context``, ``kind``, ``setting`` or ``image`` before the attack runs.
    """
    context = check_setting(context)
    check_choice(setting, "setting", SANITY_SETTINGS)
    kind = _check_kind(kind)
    image = check_int(image, "image", low=0, high=SAMPLES - 1)
    x, _, _ = study_sample(context, kind, image)
    seed = trial_seeds(0, SAMPLES, f"table 3 {kind} sanity starts")[image]
    noise = torch.randn(x.shape, generator=make_generator(seed))
    start = (x + SANITY_NOISE * noise).clamp(0, 1)  # a start in the images' range
    value = _run(context, kind, setting, image, seed, start, checkpoint)
    return {**value, "start_psnr": float(psnr(start, x)[0])}


def truth_objective(context: Mapping, *, kind: str, setting: str, image: int) -> float:
    """The objective the attack of ``setting`` minimises (:func:`trial`), evaluated at the truth: the client's
    standardised image z with the label the setting gives the attack (DLG, which optimises its label: the true
    one). L2: Σ‖∇W(z, label) − ∇W‖² + TV weight · TV(z) (:func:`gitutor.attacks.dlg_distance`); cos:
    1 − cos(∇W(x, label), ∇W) + TV weight · TV(z), as :func:`gitutor.attacks.inverting_gradients` computes it.
    A run whose objective ends at or below this value found something the objective rates as good as the truth:
    more steps would not bring it closer; one above it had not finished optimising. Dimensionless (cos) or in
    the squared units of the gradient (L2).

    Raises:
        ValueError: naming ``context``, ``kind``, ``setting`` or ``image`` (as :func:`trial`).
    """
    context = check_setting(context)
    check_choice(setting, "setting", SETTINGS)
    distance, source = setting.split(" / ")
    model = study_model(context)
    x, y, exclude_top = study_sample(context, kind, image)
    z = _standardise(x)
    grads = [g.detach() for g in client_gradients(model, z, y)]
    label = attack_label(model, grads, y, source, exclude_top)
    label = y.float() if label is None else label
    tv = context["tv_weight"] * total_variation(z)
    if distance == "L2":
        matching = dlg_distance(model, z, None, grads, labels=label)
    else:
        found = client_gradients(Normalized(model, CIFAR10_MEAN, CIFAR10_STD), x, label)
        matching = cosine_gradient_distance(found, grads)
    return float((matching + tv).detach())


def cpu_hours(images: int = 10, repeats: int = 3, size: int = 32) -> float:
    """The study's cost at most, hours of one CPU core: every trial of :func:`study_trials` (``images`` samples per
    kind × ``repeats`` starts × 7 settings × 2 kinds) for its full budget at :data:`STEP_SECONDS` per step of
    images of side ``size`` (32 or 16). The authors' full count (75 samples × 10 repeats) is beyond
    foolbox's 19 usable samples.

    Raises:
        ValueError / TypeError: naming ``images`` (not an int in [1, :data:`SAMPLES`]), ``repeats`` (not in
            [1, :data:`MAX_REPEATS`]) or ``size`` (not 16 or 32).
    """
    images = check_int(images, "images", low=1, high=SAMPLES)
    repeats = check_int(repeats, "repeats", low=1, high=MAX_REPEATS)
    size = check_int(size, "size", low=16, high=32)
    if size not in (16, 32):
        raise ValueError(
            f"size must be 16 or 32 (the sides the pilot timed), got {size}"
        )
    seconds = 0.0
    for setting in SETTINGS:
        distance = setting.split(" / ")[0]
        steps = METHODS[distance]["iterations"]
        seconds += len(KINDS) * images * repeats * steps * STEP_SECONDS[size, distance]
    return seconds / 3600


def read_record(path) -> dict:
    """The study record at ``path`` (``book/studies/02_table3.json``), checked: the keys the script writes (the
    controls of every attacked image among them), the setting of :data:`SETTING`, and one trial with a value
    for every ``(kind, setting, image, repeat)`` of :func:`study_trials` over its ``images`` and ``repeats``,
    each curve ending at its budget.

    Raises:
        FileNotFoundError: when there is no record at ``path``.
        ValueError: naming ``path`` when the record is not this study's, was run with another setting, or
            lacks (or repeats) a trial.
    """
    path = Path(path)
    record = json.loads(path.read_text())
    keys = {"study", "setting", "images", "repeats", "trials", "controls", "provenance"}
    if (
        not isinstance(record, dict)
        or not keys <= set(record)
        or record["study"] != "02_table3"
    ):
        raise ValueError(
            f"{path} is not a Table 3 study record (keys {sorted(record)})"
        )
    if record["setting"] != SETTING:
        raise ValueError(
            f"{path} was run with {record['setting']}, not the study's setting {SETTING}"
        )
    want = {
        tuple(t.values()) for t in study_trials(record["images"], record["repeats"])
    }
    have = [
        (t["kind"], t["setting"], t["image"], t["repeat"]) for t in record["trials"]
    ]
    if len(have) != len(set(have)) or set(have) != want:
        raise ValueError(
            f"{path} holds {len(set(have))} distinct trials, not the {len(want)} of its images and repeats"
        )
    for t in record["trials"]:
        curve = t["value"]["curve"]
        if curve[-1][0] != t["value"]["iterations"] or not math.isfinite(
            t["value"]["psnr"]
        ):
            raise ValueError(
                f"{path}: trial {t} does not end at its budget with a finite PSNR"
            )
    return record


def read_sanity(path) -> dict:
    """The sanity-arm record at ``path`` (``book/studies/02_table3_sanity.json``), checked: the keys the script
    writes, the setting of :data:`SETTING`, and one trial with a value for every trial of :func:`sanity_trials`
    over its ``images``.

    Raises:
        FileNotFoundError: when there is no record at ``path``.
        ValueError: naming ``path`` when the record is not the sanity arm's, was run with another setting, or
            lacks (or repeats) a trial.
    """
    path = Path(path)
    record = json.loads(path.read_text())
    keys = {"study", "setting", "images", "trials", "provenance"}
    if (
        not isinstance(record, dict)
        or not keys <= set(record)
        or record["study"] != "02_table3_sanity"
    ):
        raise ValueError(f"{path} is not a Table 3 sanity-arm record")
    if record["setting"] != SETTING:
        raise ValueError(
            f"{path} was run with {record['setting']}, not the study's setting {SETTING}"
        )
    want = {tuple(t.values()) for t in sanity_trials(record["images"])}
    have = [(t["kind"], t["setting"], t["image"]) for t in record["trials"]]
    if len(have) != len(set(have)) or set(have) != want:
        raise ValueError(
            f"{path} holds {len(set(have))} distinct trials, not the {len(want)} of its images"
        )
    return record
