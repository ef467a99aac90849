"""Summaries of the trained-network record (``book/studies/04_trained_network.json``, phases ``trained``
and ``trained_table`` of ``scripts/setting_study.py``): final scores with intervals over batches, paired
differences over the same batches, the controls a score must clear, and R_BN on the true photograph
against trivial images — for the page ``book/trained_network``.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

import torch

from gitutor.chapters.stepwise_gradinversion.setting_study.summary import curves
from gitutor.chapters.stepwise_gradinversion.setting_study.trained import (
    TrainedSetting,
    decode_images,
    trained_batch,
)
from gitutor.chapters.stepwise_gradinversion.trained_rows import MARGINS
from gitutor.controls import batch_controls, control_images, start_images
from gitutor.files import read_json
from gitutor.paired import compare_paired, oriented, paired_difference
from gitutor.stats import BOUNDS, format_interval, interval

#: Metrics of a final reconstruction; LPIPS is lower-is-better.
METRICS = ("PSNR", "SSIM", "LPIPS")
#: Decimals each metric is printed with (differences of SSIM and LPIPS are small).
DIGITS = {"PSNR": 2, "SSIM": 3, "LPIPS": 3}


def load_trained(path) -> tuple[dict[str, list[dict]], dict]:
    """``({phase: [{"setting", "method", "batch", "iterations", "curve", "images", "PSNR", "SSIM",
    "LPIPS"}, …]}, {phase: provenance})`` from the record at ``path``; PSNR / SSIM / LPIPS are the final
    batch means (PSNR and SSIM the last curve point, LPIPS the mean of the per-image values).

    Raises:
        FileNotFoundError: if there is no record at ``path``.
        ValueError: naming ``path`` if it is not a trained-network record.
    """
    record = read_json(path, "trained-network record")
    phases: dict[str, list[dict]] = {}
    for stored in record["trials"]:
        trial, value = stored["trial"], stored["value"]
        if "lpips" not in value:
            raise ValueError(
                f"{path} holds a trial that is not a trained-network trial: {trial}"
            )
        phases.setdefault(stored["phase"], []).append(
            {
                **trial,
                "setting": TrainedSetting(**trial["setting"]),
                "curve": value["curve"],
                "images": decode_images(value["images"]),
                "PSNR": value["curve"][-1][1],
                "SSIM": value["curve"][-1][2],
                "LPIPS": sum(value["lpips"]) / len(value["lpips"]),
                "seconds": value.get("seconds"),
            }
        )
    return phases, record["phases"]


def arm(
    trials: Sequence[Mapping], setting: TrainedSetting, method: str
) -> list[Mapping]:
    """The trials of one (setting, method), ordered by batch (so two arms pair batch by batch)."""
    return sorted(
        (t for t in trials if t["setting"] == setting and t["method"] == method),
        key=lambda t: t["batch"],
    )


def arms(trials: Sequence[Mapping]) -> list[tuple[TrainedSetting, str]]:
    """Every (setting, method) of ``trials`` in the order first seen."""
    return list(dict.fromkeys((t["setting"], t["method"]) for t in trials))


def score_rows(trials: Sequence[Mapping]) -> list[dict]:
    """One row per arm: final PSNR (dB), SSIM and LPIPS, mean [95 % interval] over its batches."""
    rows = []
    for setting, method in arms(trials):
        runs = arm(trials, setting, method)
        row = {"method": method, "setting": setting.label(), "batches": len(runs)}
        for m in METRICS:
            row[m] = format_interval(
                interval([r[m] for r in runs], bounds=BOUNDS[m]), DIGITS[m], count=False
            )
        for column, metric in ((1, "PSNR"), (2, "SSIM")):
            row[f"{metric} change, last 30 %"] = format_interval(
                interval([late_change(r["curve"], column) for r in runs]),
                DIGITS[metric],
                count=False,
            )
        rows.append(row)
    return rows


def late_change(curve: Sequence[Sequence[float]], column: int = 1) -> float:
    """A curve's value at the end minus its value at the last checkpoint at or before 70 % of the run
    (``column`` 1: PSNR in dB, 2: SSIM, of ``[iteration, PSNR, SSIM]`` rows): whether it has flattened
    (near 0) or still climbs."""
    end = curve[-1][0]
    before = [row for row in curve if row[0] <= 0.7 * end]
    return curve[-1][column] - (before[-1][column] if before else curve[0][column])


def paired_rows(
    trials: Sequence[Mapping], pairs: Sequence[tuple[tuple, tuple]]
) -> list[dict]:
    """Paired differences A − B over the same batches, one row per ``((setting, method), (setting,
    method))`` pair: per metric the mean [95 % interval] and which arm is better — "A", "B" or "not
    resolved" (:func:`gitutor.paired.compare_paired` with the metric's margin of
    :data:`...trained_rows.MARGINS`; for LPIPS lower is better).

    Raises:
        ValueError: if the two arms do not hold the same batches.
    """
    rows = []
    for a, b in pairs:
        runs_a, runs_b = arm(trials, *a), arm(trials, *b)
        if [r["batch"] for r in runs_a] != [r["batch"] for r in runs_b] or not runs_a:
            raise ValueError(f"arms {a} and {b} do not hold the same batches")
        names = (arm_name(*a), arm_name(*b))
        row = {"A": names[0], "B": names[1], "pairs": len(runs_a)}
        for m in METRICS:
            va, vb = (
                oriented(m, [r[m] for r in runs_a]),
                oriented(m, [r[m] for r in runs_b]),
            )
            row[f"Δ{m} (A − B)"] = format_interval(
                paired_difference([r[m] for r in runs_a], [r[m] for r in runs_b]),
                DIGITS[m],
                count=False,
            )
            found = compare_paired(va, vb, ("A", "B"), MARGINS[m])
            row[f"{m}: better"] = {"A > B": "A", "A < B": "B"}.get(
                found, "not resolved"
            )
        rows.append(row)
    return rows


def seconds_per_iteration(trials: Sequence[Mapping]) -> float:
    """The median over ``trials`` of a trial's wall time per iteration (s; one core each, as the
    record's trials ran)."""
    found = [t["seconds"] / t["iterations"] for t in trials if t.get("seconds")]
    if not found:
        raise ValueError("no trial records its wall time")
    return statistics.median(found)


def arm_name(setting: TrainedSetting, method: str) -> str:
    """An arm's name on the page: the method, with its setting's difference from the paper's in brackets."""
    label = setting.label()
    return method if label == "paper" else f"{method} ({label})"


def control_scores(setting: TrainedSetting) -> dict[str, dict[str, list[float]]]:
    """What trivial reconstructions score on each batch of ``setting``: ``{control: {"PSNR", "SSIM",
    "LPIPS": [one batch mean per batch]}}`` (:func:`gitutor.controls.batch_controls` with LPIPS). With
    one photograph per batch (the study set) a control "another photograph of the set" scores
    photograph i + 1 (cyclically) in place of photograph i: what a natural image that is not the
    client's scores."""
    from gitutor.metrics import lpips_distance, psnr, ssim
    from gitutor.models.pretrained import LITE_MEAN, LITE_STD

    batches = [trained_batch(setting, i)[0] for i in range(setting.batches())]
    scores = batch_controls(batches, LITE_MEAN, LITE_STD, lpips=True)
    if len(batches) >= 2 and all(len(x) == 1 for x in batches):
        scores["another photograph of the set"] = {
            m: [
                f(batches[(i + 1) % len(batches)], x).mean().item()
                for i, x in enumerate(batches)
            ]
            for m, f in {"PSNR": psnr, "SSIM": ssim, "LPIPS": lpips_distance}.items()
        }
    return scores


def control_rows(scores: Mapping[str, Mapping[str, Sequence[float]]]) -> list[dict]:
    """:func:`control_scores` as table rows: means [95 % interval] over the batches and each
    control's best PSNR over the batches."""
    return [
        {
            "control": name,
            **{
                m: format_interval(
                    interval(v[m], bounds=BOUNDS[m]), DIGITS[m], count=False
                )
                for m in METRICS
            },
            "highest batch PSNR (dB)": round(max(v["PSNR"]), 1),
        }
        for name, v in scores.items()
    ]


#: Table 1's row that a control stands for: the paper's noise row is N(0, I) in normalised units.
PAPER_ROW = {"control: noise N(0, 1), normalised units": "Noise N(0, I)"}


def control_table_rows(
    scores: Mapping[str, Mapping[str, Sequence[float]]], like: Mapping
) -> list[dict]:
    """:func:`control_scores` as rows under :func:`score_rows`' (``like``: one of its rows, for the
    columns): method "control: <name>", the batches, PSNR / SSIM / LPIPS mean [95 % interval] over
    them, and "—" in the columns a control has no value for (setting, changes along a run)."""
    return [
        {
            **{k: "—" for k in like},
            "method": f"control: {name}",
            "batches": len(v["PSNR"]),
            **{
                m: format_interval(
                    interval(v[m], bounds=BOUNDS[m]), DIGITS[m], count=False
                )
                for m in METRICS
            },
        }
        for name, v in scores.items()
    ]


#: The control that is a natural photograph but not the client's, per batch size (B = 1, B > 1).
NATURAL_CONTROL = ("another photograph of the set", "different photograph")


def rbn_controls(setting: TrainedSetting) -> list[dict]:
    """R_BN (Eq. 11, the network's ImageNet statistics) of each study photograph and of stand-ins that
    carry nothing of a photograph: its mean colour, its 4×4 thumbnail, mid-grey and the paper's noise
    start — does the prior prefer photographs to images that are not photographs? (R_BN sees the
    candidate alone: another photograph in its place scores what it scores in its own row, so the
    prior cannot prefer the client's photograph to another one.)

    Returns:
        One row per batch of ``setting``: ``{"batch": index, "true photograph": R_BN, "mean colour": …,
        "4×4 thumbnail": …, "mid-grey": …, "noise (paper's start)": …}`` (B = 1: one photograph each).
    """
    from gitutor.attacks.bn_prior import BatchNormPrior
    from gitutor.chapters.stepwise_gradinversion.setting_study.trained import (
        trained_model,
    )
    from gitutor.models.pretrained import LITE_MEAN, LITE_STD

    model = trained_model()
    rows = []
    with BatchNormPrior(model) as prior, torch.no_grad():
        for index in range(setting.batches()):
            x, _ = trained_batch(setting, index)
            noise = start_images(x, LITE_MEAN, LITE_STD, seed=index)[
                "noise N(0, 1), normalised units"
            ]
            controls = control_images(x)
            candidates = {
                "true photograph": x,
                "mean colour": controls["mean colour"],
                "4×4 thumbnail": controls["4×4 thumbnail"],
                "mid-grey": torch.full_like(x, 0.5),
                "noise (paper's start)": noise,
            }
            row = {"batch": index}
            for name, images in candidates.items():
                model(images)
                row[name] = round(float(prior.value()))
            rows.append(row)
    return rows


def curve_summary(trials: Sequence[Mapping]) -> dict[tuple, dict]:
    """``{(setting, method, iterations): {"t", "n", "PSNR": [Interval…], "SSIM": [...]}}`` over batches at
    the checkpoints every batch has (:func:`.summary.curves` on these trials)."""
    return curves([{"trial": t, "value": t} for t in trials])


def photograph_rows(
    trials: Sequence[Mapping],
    setting: TrainedSetting,
    threshold: float,
    scores: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
) -> list[dict]:
    """Per arm of ``trials``: how many photographs it attacked, how many reach ``threshold`` dB
    (PSNR per photograph: the book's "recognisable"), how many beat their own 4×4 thumbnail, and —
    given ``scores`` from :func:`control_scores` of the same batches — on how many batches its LPIPS
    is below that of a natural photograph that is not the client's (:data:`NATURAL_CONTROL`).

    Raises:
        ValueError: if ``scores`` holds neither natural control, or fewer batches than a trial's index.
    """
    from gitutor.metrics import psnr

    natural = None
    if scores is not None:
        name = next((n for n in NATURAL_CONTROL if n in scores), None)
        if name is None:
            raise ValueError(
                f"scores must hold one of {NATURAL_CONTROL}, got {sorted(scores)}"
            )
        natural = scores[name]["LPIPS"]
    truths = [trained_batch(setting, b)[0] for b in range(setting.batches())]
    thumbs = [control_images(x)["4×4 thumbnail"] for x in truths]
    rows = []
    for arm_setting, method in arms(trials):
        runs = arm(trials, arm_setting, method)
        found = torch.cat([psnr(r["images"], truths[r["batch"]]) for r in runs])
        floor = torch.cat([psnr(thumbs[r["batch"]], truths[r["batch"]]) for r in runs])
        row = {
            "arm": arm_name(arm_setting, method),
            "photographs": len(found),
            f"PSNR ≥ {threshold:g} dB": int((found >= threshold).sum()),
            "above its own thumbnail": int((found > floor).sum()),
        }
        if natural is not None:
            if max(r["batch"] for r in runs) >= len(natural):
                raise ValueError(
                    f"scores hold {len(natural)} batches; {row['arm']} has batch "
                    f"{max(r['batch'] for r in runs)}"
                )
            row["batches with LPIPS below another photograph's"] = sum(
                r["LPIPS"] < natural[r["batch"]] for r in runs
            )
        rows.append(row)
    return rows


def command_list(provenance: Mapping[str, Mapping]) -> str:
    """The command that recorded each phase, as a Markdown list of code spans (a table cell would
    typeset ``--`` as a dash and widen the table past the column)."""
    from gitutor.tables import code

    return "\n".join(
        f"- {code(phase)}: {code(p['command'])}" for phase, p in provenance.items()
    )
