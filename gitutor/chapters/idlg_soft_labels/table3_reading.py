"""Chapter 02's reading of its recorded Table 3 study (:mod:`~gitutor.chapters.idlg_soft_labels.table3_study`;
Wang, Liang & He, ICLR 2024, §4.3, Table 3): per augmentation and setting, the PSNR of the reconstructions
against the paper's, the runs that are recognisable, at or below the know-nothing controls of their image or in
between, the paired difference of two label settings, and where the runs' curves flatten.

A run is one ``(kind, setting, image, repeat)`` trial. The repeats of one image are not independent samples of
the paper's population (the same image), so every interval is over images: the mean over an image's repeats
first, then the 95 % interval of the mean over the images (:func:`gitutor.stats.interval`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median

from gitutor.chapters.idlg_soft_labels.table3_study import (
    KINDS,
    SANITY_SETTINGS,
    SETTINGS,
    read_record,
    read_sanity,
    truth_objective,
)
from gitutor.checks import check_choice
from gitutor.results import interval_fields
from gitutor.stats import Interval, format_interval, interval
from gitutor.tables import markdown_table

#: How a run ends, against the book's recognisable PSNR and its own image's controls.
OUTCOMES = ("recognisable", "between", "at or below the controls")


def read_study(path) -> dict | None:
    """The Table 3 study record at ``path`` (``book/studies/02_table3.json``), checked by
    :func:`~gitutor.chapters.idlg_soft_labels.table3_study.read_record`, or None when there is no file there
    (the page then says so).

    Raises:
        ValueError: as :func:`~gitutor.chapters.idlg_soft_labels.table3_study.read_record`, for a record that
            is not this study's, was run with another setting or lacks a trial.
    """
    path = Path(path)
    return read_record(path) if path.is_file() else None


def read_sanity_arm(path) -> dict | None:
    """The sanity-arm record at ``path`` (``book/studies/02_table3_sanity.json``), checked by
    :func:`~gitutor.chapters.idlg_soft_labels.table3_study.read_sanity`, or None when there is no file there.

    Raises:
        ValueError: as :func:`~gitutor.chapters.idlg_soft_labels.table3_study.read_sanity`.
    """
    path = Path(path)
    return read_sanity(path) if path.is_file() else None


def image_controls(record: Mapping) -> dict[tuple[str, int], float]:
    """``{(kind, image): PSNR (dB)}``: the highest know-nothing control (:func:`gitutor.controls.control_images`:
    mean colour, 4×4 thumbnail, batch mean, another image) of every image the study attacked, as the study's
    script recorded it (``record["controls"][kind][j]`` for the j-th of ``record["images"]``)."""
    return {
        (kind, image): float(record["controls"][kind][j]["psnr"])
        for kind in KINDS
        for j, image in enumerate(record["images"])
    }


def _runs(record: Mapping, kind: str, setting: str) -> list[dict]:
    check_choice(kind, "kind", KINDS)
    check_choice(setting, "setting", SETTINGS)
    found = [
        t for t in record["trials"] if (t["kind"], t["setting"]) == (kind, setting)
    ]
    return sorted(found, key=lambda t: (t["image"], t["repeat"]))


def _per_image(runs: Sequence[dict], value) -> list[float]:
    images = sorted({t["image"] for t in runs})
    return [
        sum(value(t) for t in runs if t["image"] == i)
        / sum(t["image"] == i for t in runs)
        for i in images
    ]


def _psnr_at(curve: Sequence[Sequence[float]], step: int) -> float:
    """The PSNR of the last recorded iterate at or before ``step``."""
    return [value for at, value in curve if at <= step][-1]


def _outcome(run: Mapping, control: float, recognisable: float) -> str:
    value = run["value"]["psnr"]
    if value >= recognisable:
        return OUTCOMES[0]
    return OUTCOMES[2] if value <= control else OUTCOMES[1]


@dataclass(frozen=True)
class Cell:
    """One cell of Table 3 in the record (:func:`cells`).

    Attributes:
        kind, setting: the augmentation and the distance / label setting.
        runs, images: how many runs, over how many images.
        psnr: mean PSNR (dB) of the returned reconstructions, the 95 % interval over the images' means.
        median: median PSNR (dB) over the runs.
        outcomes: runs per :data:`OUTCOMES`.
        left_finite: runs whose optimiser left the finite numbers (``stopped_early``; they keep their last
            finite iterate).
        at_first_decay: median PSNR (dB) over the runs of the iterate at the first learning-rate decay (compare
            ``median``, the returned iterates').
        best_step: median step of the returned (lowest-objective) iterate, as a fraction of the budget.
        below_truth: runs whose lowest recorded objective is at or below the objective at the truth
            (:func:`~gitutor.chapters.idlg_soft_labels.table3_study.truth_objective`): the objective rates what
            they found as good as the truth, so more steps would not bring them closer; the others had not
            finished optimising.
        picked: mean PSNR (dB) of the attacker's pick, per image the start whose lowest recorded objective is
            lowest (what the server can compute), the 95 % interval over the images.
    """

    kind: str
    setting: str
    runs: int
    images: int
    psnr: Interval
    median: float
    outcomes: dict[str, int]
    left_finite: int
    at_first_decay: float
    best_step: float
    below_truth: int
    picked: Interval


def truth_objectives(record: Mapping) -> dict[tuple[str, str, int], float]:
    """``{(kind, setting, image): objective at the truth}`` for every cell and image of the record
    (:func:`~gitutor.chapters.idlg_soft_labels.table3_study.truth_objective`, the record's setting)."""
    return {
        (kind, setting, image): truth_objective(
            record["setting"], kind=kind, setting=setting, image=image
        )
        for kind in KINDS
        for setting in SETTINGS
        for image in record["images"]
    }


def _lowest(run: Mapping) -> float:
    return min(value for _, value in run["value"]["loss_curve"])


def _picked(runs: Sequence[dict]) -> list[float]:
    images = sorted({t["image"] for t in runs})
    return [
        min((t for t in runs if t["image"] == i), key=_lowest)["value"]["psnr"]
        for i in images
    ]


def cells(
    record: Mapping,
    controls: Mapping[tuple[str, int], float],
    truths: Mapping[tuple[str, str, int], float],
    recognisable: float,
) -> dict[tuple[str, str], Cell]:
    """Every cell of the record's Table 3, ``{(kind, setting): Cell}``: a run is *recognisable* at or above
    ``recognisable`` dB, *at or below the controls* at or below ``controls[kind, image]`` (:func:`image_controls`),
    else *between*; ``truths`` is :func:`truth_objectives`.

    Raises:
        KeyError: naming a ``(kind, image)`` that ``controls`` lacks or a ``(kind, setting, image)`` that
            ``truths`` lacks.
        ValueError: if a control reaches ``recognisable`` (the two thresholds would overlap).
    """
    if any(value >= recognisable for value in controls.values()):
        raise ValueError(
            f"a control reaches {recognisable} dB: the thresholds overlap ({max(controls.values()):.1f} dB)"
        )
    first = record["setting"]["lr_steps"][0]
    out = {}
    for kind in KINDS:
        for setting in SETTINGS:
            runs = _runs(record, kind, setting)
            values = [t["value"] for t in runs]
            ends = [_outcome(t, controls[kind, t["image"]], recognisable) for t in runs]
            out[kind, setting] = Cell(
                kind=kind,
                setting=setting,
                runs=len(runs),
                images=len({t["image"] for t in runs}),
                psnr=interval(_per_image(runs, lambda t: t["value"]["psnr"])),
                median=median(v["psnr"] for v in values),
                outcomes={name: ends.count(name) for name in OUTCOMES},
                left_finite=sum(bool(v["stopped_early"]) for v in values),
                at_first_decay=median(
                    _psnr_at(v["curve"], int(v["iterations"] * first)) for v in values
                ),
                best_step=median(v["best_iteration"] / v["iterations"] for v in values),
                below_truth=sum(
                    _lowest(t) <= truths[kind, setting, t["image"]] for t in runs
                ),
                picked=interval(_picked(runs)),
            )
    return out


def paired_gap(record: Mapping, kind: str, a: str, b: str) -> Interval:
    """The paired difference PSNR(``a``) − PSNR(``b``) (dB) of two settings of ``kind`` run from the same starts
    on the same images: per image the mean over its repeats of the run-by-run difference, then the mean and 95 %
    interval over the images (:func:`gitutor.stats.interval`).

    Raises:
        ValueError: naming ``kind``, ``a`` or ``b`` when it is not one of the study's; if the two settings' runs
            are not the same images and repeats.
    """
    first, second = _runs(record, kind, a), _runs(record, kind, b)
    if [(t["image"], t["repeat"]) for t in first] != [
        (t["image"], t["repeat"]) for t in second
    ]:
        raise ValueError(f"{a!r} and {b!r} did not run on the same images and starts")
    differences = {
        (t["image"], t["repeat"]): t["value"]["psnr"] - u["value"]["psnr"]
        for t, u in zip(first, second)
    }
    runs = [{"image": i, "gap": gap} for (i, _), gap in differences.items()]
    return interval(_per_image(runs, lambda t: t["gap"]))


def discordance(
    record: Mapping, kind: str, a: str, b: str, recognisable: float
) -> dict:
    """How two settings of ``kind`` disagree run by run (same images, same starts): ``{"pairs"`` (how many),
    ``"discordant"`` (pairs where one run is recognisable at ``recognisable`` dB and the other is not),
    ``"both"`` (PSNR(``a``) − PSNR(``b``), dB, mean and 95 % interval over the pairs where both are
    recognisable; None when fewer than two are)``}``. A paired gap over all pairs mixes the two: where runs
    from the same start end far apart, the interval measures the optimiser's sensitivity to its inputs.

    Raises:
        ValueError: naming ``kind``, ``a`` or ``b`` as :func:`paired_gap`.
    """
    first, second = _runs(record, kind, a), _runs(record, kind, b)
    pairs = [(t["value"]["psnr"], u["value"]["psnr"]) for t, u in zip(first, second)]
    seen = [(p >= recognisable, q >= recognisable) for p, q in pairs]
    both = [p - q for (p, q), (s, t) in zip(pairs, seen) if s and t]
    return {
        "pairs": len(pairs),
        "discordant": sum(s != t for s, t in seen),
        "both": interval(both) if len(both) > 1 else None,
    }


def label_error(record: Mapping, kind: str, setting: str) -> float:
    """The median L1 error of the label a setting of ``kind`` gave its attack (the paper's L_r; the study's
    ``label_l1``), over its runs.

    Raises:
        ValueError: naming ``kind`` or ``setting``; for DLG, which optimises its label (no L1 recorded).
    """
    values = [t["value"]["label_l1"] for t in _runs(record, kind, setting)]
    if any(value is None for value in values):
        raise ValueError(f"setting {setting!r} gives its attack no fixed label")
    return median(values)


def median_curves(
    record: Mapping,
) -> dict[tuple[str, str], tuple[list[float], list[float]]]:
    """``{(kind, setting): (fraction of the budget, median PSNR dB)}``: the median over a cell's runs of the PSNR
    of the iterate at every recorded step (the same steps in every run of a distance)."""
    out = {}
    for kind in KINDS:
        for setting in SETTINGS:
            values = [t["value"] for t in _runs(record, kind, setting)]
            steps = [step for step, _ in values[0]["curve"]]
            budget = values[0]["iterations"]
            out[kind, setting] = (
                [step / budget for step in steps],
                [median(_psnr_at(v["curve"], step) for v in values) for step in steps],
            )
    return out


def paper_table(cells: Mapping[tuple[str, str], Cell], paper: Mapping) -> str:
    """The Markdown table of :func:`cells` against the paper, one line per cell: the paper's PSNR
    (``paper[kind, setting]``, dB), the mean with its 95 % interval over images, the median and the runs per
    :data:`OUTCOMES`.

    Raises:
        KeyError: naming a cell that ``paper`` lacks.
    """
    header = [
        "kind",
        "setting",
        "paper (dB)",
        "mean (dB) [95 % interval]",
        "median (dB)",
    ]
    header.append("recognisable / between / at or below controls")
    lines = [
        [
            cell.kind,
            cell.setting,
            f"{paper[key]:.2f}",
            format_interval(cell.psnr, 1, count=False),
            f"{cell.median:.1f}",
            " / ".join(str(cell.outcomes[name]) for name in OUTCOMES)
            + f" of {cell.runs}",
        ]
        for key, cell in cells.items()
    ]
    return markdown_table(header, lines)


def strength_table(cells: Mapping[tuple[str, str], Cell]) -> str:
    """The Markdown table of the checks that the runs of :func:`cells` are at full strength, one line per cell:
    the median PSNR at the first learning-rate decay and of the returned iterate (dB), the returned iterate's
    median step (of the budget), the runs whose objective reached the truth's, the runs that left the finite
    numbers and the attacker's pick of the starts (dB, mean [95 % interval])."""
    header = ["kind", "setting", "median: first decay → returned (dB)", "returned at"]
    header += [
        "objective ≤ the truth's",
        "left the finite numbers",
        "attacker's pick (dB)",
    ]
    lines = [
        [
            cell.kind,
            cell.setting,
            f"{cell.at_first_decay:.1f} → {cell.median:.1f}",
            f"{cell.best_step:.0%}",
            f"{cell.below_truth} of {cell.runs}",
            str(cell.left_finite),
            format_interval(cell.picked, 1, count=False),
        ]
        for cell in cells.values()
    ]
    return markdown_table(header, lines)


def result_rows(
    cells: Mapping[tuple[str, str], Cell],
    paper: Mapping,
    record: Mapping,
) -> list[dict]:
    """Table 3's rows of the results record from the study (:mod:`gitutor.results`): per cell the mean PSNR over
    the images with its 95 % interval (``n`` = images), judged against ``paper[kind, setting]`` (dB, higher is
    better) — the study runs the paper's kind of setting (32×32 CIFAR-10 samples, the untrained LeNet, the
    authors' budgets), so the rows are not marked not comparable; the setting says what differs in the count.
    The rows lack ``differences``: :func:`~gitutor.chapters.idlg_soft_labels.report.paper_rows` gives them the
    results table's.

    Raises:
        KeyError: naming a cell that ``paper`` lacks.
    """
    methods = record["setting"]["methods"]
    rows = []
    for (kind, setting), cell in cells.items():
        method = methods[setting.split(" / ")[0]]
        counted = "45 class pairs" if kind == "mixup" else "30 images"
        rows.append(
            {
                "quantity": "reconstruction PSNR (Table 3)",
                "setting": f"recorded study: untrained LeNet, 32×32 CIFAR-10 samples, {kind}, {setting}; "
                f"{method['attack']}, {method['iterations']} steps; {cell.images} images × "
                f"{cell.runs // cell.images} starts (paper {counted} × 10)",
                "paper": paper[kind, setting],
                "this_run": round(cell.psnr.mean, 2),
                "unit": "dB",
                "better": "higher",
                **interval_fields(cell.psnr, 2),
            }
        )
    return rows


@dataclass(frozen=True)
class SanityCell:
    """One setting of the sanity arm on one kind (:func:`sanity_cells`).

    Attributes:
        kind, setting: the augmentation and the label-known setting.
        runs: one per image.
        start: median PSNR (dB) of the starts (the truth plus noise).
        psnr: mean PSNR (dB) of the returned reconstructions, the 95 % interval over the images.
        recognisable: runs that end at or above the recognisable PSNR, not counting those in ``unmoved``.
        unmoved: runs that returned their start (``best_iteration`` 0: no step lowered the objective
            below the start's), whatever their PSNR — the start's, not the attack's.
        below_truth: runs whose lowest recorded objective is at or below the truth's.
    """

    kind: str
    setting: str
    runs: int
    start: float
    psnr: Interval
    recognisable: int
    unmoved: int
    below_truth: int


def sanity_cells(
    sanity: Mapping,
    truths: Mapping[tuple[str, str, int], float],
    recognisable: float,
) -> dict[tuple[str, str], SanityCell]:
    """Every setting of the sanity arm per kind, ``{(kind, setting): SanityCell}``; ``truths`` is
    :func:`truth_objectives` (of a record over the same images).

    Raises:
        KeyError: naming a ``(kind, setting, image)`` that ``truths`` lacks.
    """
    out = {}
    for kind in KINDS:
        for setting in SANITY_SETTINGS:
            runs = [
                t
                for t in sanity["trials"]
                if (t["kind"], t["setting"]) == (kind, setting)
            ]
            out[kind, setting] = SanityCell(
                kind=kind,
                setting=setting,
                runs=len(runs),
                start=median(t["value"]["start_psnr"] for t in runs),
                psnr=interval([t["value"]["psnr"] for t in runs]),
                recognisable=sum(
                    t["value"]["psnr"] >= recognisable
                    and t["value"]["best_iteration"] > 0
                    for t in runs
                ),
                unmoved=sum(t["value"]["best_iteration"] == 0 for t in runs),
                below_truth=sum(
                    _lowest(t) <= truths[kind, setting, t["image"]] for t in runs
                ),
            )
    return out


def sanity_table(cells: Mapping[tuple[str, str], SanityCell]) -> str:
    """The Markdown table of :func:`sanity_cells`: per kind and setting the start's median PSNR, the returned
    mean PSNR with its 95 % interval (dB), the runs recognisable, the runs that returned their start and the
    runs whose objective reached the truth's."""
    header = [
        "kind",
        "setting",
        "start (dB, median)",
        "returned, all runs (dB) [95 % interval]",
    ]
    header += ["recognisable", "returned its start", "objective ≤ the truth's"]
    lines = [
        [
            cell.kind,
            cell.setting,
            f"{cell.start:.1f}",
            format_interval(cell.psnr, 1, count=False),
            f"{cell.recognisable} of {cell.runs}",
            f"{cell.unmoved} of {cell.runs}",
            f"{cell.below_truth} of {cell.runs}",
        ]
        for cell in cells.values()
    ]
    return markdown_table(header, lines)
