"""Chapter 01's defense study judged as DLG §5 judges it: two thresholds per run, one rule per level.

The record ``book/studies/01_defenses.json`` (:mod:`.defense_study`, ``scripts/defense_study_01.py``) holds
one DLG run per (defense, level, image). Each run gets one of three :data:`OUTCOMES` (:func:`outcome`):

* **recovered**: PSNR ≥ :data:`gitutor.controls.RECOGNISABLE_PSNR` (30 dB), the book's "recognisable";
* **stopped**: PSNR at or below the highest score of a reconstruction that knows nothing of *that* image
  (its own best control: mean colour, 4×4 thumbnail, mean of the samples, another photograph, DLG's
  N(0, 1) start; :func:`.defense_study.image_controls`) — the reconstruction carries no more of the image
  than a guess;
* **not resolved**: in between — more than any control, less than recognisable by the book's bar (where
  DLG §5's "leakage with artifacts" lies).

**Stalled runs.** A defended run whose final gradient distance is at least :data:`STALL_FACTOR` times the
distance of the true image to the gradient the server received has not solved the matching problem that
the truth solves ten times better: its start stalled (DLG's success depends on the start, DLG §4). The
server sees the stall too (the distances of a converged and of a stalled run differ by orders of
magnitude), so it restarts such a run once from a new dummy (``book/studies/01_defenses_restarts.json``,
:func:`read_restarts`) and keeps the start with the lower final distance, its own criterion
(:func:`with_restarts`). A run still stalled after that says nothing about the defense and is set aside:
neither stopped nor recovered.

**The rule.** A level *stops DLG* when, among the images DLG recovers **without** a defense (a defense
can only stop an attack that works without it; the others say nothing about the defense) whose run at
that level did not stall, the 95 %
Wilson interval (:func:`gitutor.stats.success_interval`) of the fraction stopped at that level lies wholly
above 1/2: DLG is stopped on most of the images it would otherwise leak, beyond sampling noise. DLG *gets
through* a level when that interval lies wholly below 1/2; otherwise the level is *not resolved* (too few
images to tell). DLG §5 judges a level by whether the recovered image is still recognisable, which is this
reading with "recognisable" set at the controls rather than at 30 dB: a reconstruction between the controls
and 30 dB can still show the scene (the paper's 20 % pruning and variance 10⁻³: "with artifacts").

Per defense, :func:`threshold` reads the levels off in order: DLG's **tolerance** is the strongest level it
gets through (0: none, only the undefended gradient), the **stopping level** the weakest level from which
every stronger level tried stops DLG (a weaker level that stops it between two it gets through is not a
stopping point). The unresolved levels between them are the interval of both. At the sweep's edges they
are bounds (:func:`threshold_table`): no stopping level when no level tried stops DLG (it lies above the
strongest level tried), a tolerance of 0 when the weakest level tried already stops it.
:func:`result_rows` sets the tolerance against DLG §5's (:data:`PAPER`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gitutor.chapters.dlg.defense_study import (
    LEVELS,
    NAMES,
    SETTING,
    UNITS,
    decode_image,
    study_trials,
)
from gitutor.checks import check_choice, check_real
from gitutor.controls import RECOGNISABLE_PSNR
from gitutor.stats import Interval, success_interval
from gitutor.tables import markdown_table

#: A run's outcome against its image's thresholds (:func:`outcome`).
OUTCOMES = ("recovered", "not resolved", "stopped")
#: A level's reading (:func:`level_state`).
STOPS, GETS_THROUGH, OPEN = "stops DLG", "DLG gets through", "not resolved"
#: The share of the images DLG recovers without a defense that a level must stop ("most").
MAJORITY = 0.5
#: A defended run *stalled* when its final gradient distance is at least this many times the true image's
#: distance to the gradient the server received (module docstring): it is set aside, not counted stopped.
STALL_FACTOR = 10.0
#: DLG §5's reading of each defense (Zhu, Liu & Han, NeurIPS 2019, book/references.bib ``zhu2019dlg``):
#: ``(tolerance, where, what the paper says)`` — the strongest level of Fig. 7 at which the paper still sees
#: the leak. Pruning: leakage up to about 20 % of the entries pruned ("maximum tolerance"), the images no
#: longer recognisable above. Noise: at variance 10⁻⁴ the noise does not prevent the leak, at 10⁻³ the leak
#: still happens with artifacts, and DLG fails only when the variance is larger than 10⁻², for Gaussian and
#: Laplacian noise alike (the effect depends mainly on the variance). The paper's tolerance is the level it
#: states the leak at, 10⁻³; its "larger than 10⁻²" leaves open whether 10⁻² itself stops DLG.
PAPER = {
    "prune": (
        0.2,
        "§5, Fig. 7(d)",
        "the leak survives pruning up to about 20 %; above it the images are no longer recognisable",
    ),
    "gaussian": (
        1e-3,
        "§5, Fig. 7(a)",
        (
            "variance 1e-4 does not prevent the leak, at 1e-3 it still happens with "
            "artifacts, DLG fails when the variance is larger than 1e-2"
        ),
    ),
    "laplacian": (
        1e-3,
        "§5, Fig. 7(b)",
        "as Gaussian noise: the effect depends mainly on the variance, not on the noise type",
    ),
}


def outcome(
    psnr_db: float, control_db: float, recognisable: float = RECOGNISABLE_PSNR
) -> str:
    """One of :data:`OUTCOMES` for a reconstruction of PSNR ``psnr_db`` (dB) of an image whose best
    know-nothing control scores ``control_db`` (dB): ``"recovered"`` at or above ``recognisable``,
    ``"stopped"`` at or below ``control_db``, ``"not resolved"`` between.

    Raises:
        TypeError: naming the argument that is not a real number.
        ValueError: naming ``psnr_db`` when it is NaN, ``control_db`` when it is not finite, or
            ``recognisable`` when it does not lie above ``control_db`` (a control that is "recognisable"
            makes the two thresholds meaningless).
    """
    psnr_db = check_real(psnr_db, "psnr_db", finite=False)
    control_db = check_real(control_db, "control_db")
    recognisable = check_real(recognisable, "recognisable")
    if math.isnan(psnr_db):
        raise ValueError("psnr_db is NaN: a run without a score has no outcome")
    if not recognisable > control_db:
        raise ValueError(
            f"recognisable ({recognisable:g} dB) must lie above the image's best control "
            f"control_db ({control_db:g} dB)"
        )
    if psnr_db >= recognisable:
        return "recovered"
    return "stopped" if psnr_db <= control_db else "not resolved"


def level_state(stopped: int, attackable: int) -> str:
    """The reading of one level by the module's rule: :data:`STOPS` when the 95 % Wilson interval of
    ``stopped`` of ``attackable`` (the images DLG recovers without a defense that this level stops) lies
    above :data:`MAJORITY`, :data:`GETS_THROUGH` when it lies below, else :data:`OPEN` (one image is
    always :data:`OPEN`: no interval).

    Raises:
        TypeError: naming ``stopped`` or ``attackable`` when it is not an int.
        ValueError: naming ``attackable`` when it is below 1 (no image to judge the defense on), or
            ``stopped`` when it lies outside [0, attackable].
    """
    for name, value in (("stopped", stopped), ("attackable", attackable)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {value!r}")
    if attackable < 1:
        raise ValueError(
            "attackable must be ≥ 1: a defense is judged on images DLG recovers without it, "
            f"got {attackable}"
        )
    if not 0 <= stopped <= attackable:
        raise ValueError(
            f"stopped must lie in [0, attackable = {attackable}], got {stopped}"
        )
    rate = success_interval([True] * stopped + [False] * (attackable - stopped))
    if rate.low > MAJORITY:
        return STOPS
    if rate.high < MAJORITY:
        return GETS_THROUGH
    return OPEN


@dataclass(frozen=True)
class Level:
    """One (defense, level) of the study, read with the two thresholds.

    Attributes:
        kind, level: the defense (:data:`~gitutor.chapters.dlg.defense_study.KINDS`) and its level.
        images: the sample indices, in the record's order.
        psnr: PSNR (dB) of each image's reconstruction; outcomes: its :func:`outcome`.
        counts: ``{outcome: Interval}``, the fraction of all images with that outcome (Wilson).
        attackable: how many images DLG recovers without a defense; stalled: how many of those this
            level's run stalled on (final distance ≥ :data:`STALL_FACTOR` × the truth's; set aside, 0 for
            no defense); stopped: how many of the others this level stops, with its Wilson interval
            ``stopped_rate`` (None for no defense, or when every run stalled).
        state: :func:`level_state` of stopped of the attackable runs that did not stall (None for no
            defense; :data:`OPEN` when every run stalled).
        above_truth: how many of the stopped runs that did not stall end with a gradient distance above
            that of the true image (the optimiser did not quite reach the truth's match: a stop that a
            stronger optimiser might still undo), of ``stopped_runs`` (the stopped runs that did not stall,
            of all the study's images).
    """

    kind: str
    level: float
    images: tuple[int, ...]
    psnr: tuple[float, ...]
    outcomes: tuple[str, ...]
    counts: Mapping[str, Interval]
    attackable: int
    stalled: int
    stopped: int | None
    stopped_rate: Interval | None
    state: str | None
    above_truth: int
    stopped_runs: int


def read_study(path) -> dict | None:
    """The study record at ``path`` (``book/studies/01_defenses.json``), or None when there is no file
    there (the page then says so).

    Raises:
        ValueError: naming ``path`` when it is not JSON (:func:`gitutor.files.read_json`), is not a study
            record of this setting (keys ``setting``, ``images``, ``controls``, ``trials``, ``provenance``;
            the setting of :data:`~gitutor.chapters.dlg.defense_study.SETTING`), or lacks a trial of
            :func:`~gitutor.chapters.dlg.defense_study.study_trials` for its images, or a trial's
            ``final_distance`` (a record of older code).
    """
    from gitutor.files import read_json

    path = Path(path)
    if not path.is_file():
        return None
    record = read_json(path, "defense study record")
    keys = ("setting", "images", "controls", "trials", "provenance")
    if not isinstance(record, dict) or any(key not in record for key in keys):
        raise ValueError(f"{path} is not a defense study record (keys {keys})")
    if record["setting"] != SETTING:
        raise ValueError(
            f"{path} was run with {record['setting']}, not the study's setting {SETTING}"
        )
    found = {(t["kind"], t["level"], t["image"]) for t in record["trials"]}
    wanted = {
        (t["kind"], t["level"], t["image"]) for t in study_trials(record["images"])
    }
    if wanted - found:
        raise ValueError(
            f"{path} lacks {len(wanted - found)} trials of the study, e.g. {min(wanted - found)}"
        )
    if any("final_distance" not in t["value"] for t in record["trials"]):
        raise ValueError(
            f"{path} predates the trials' final_distance (the distance after the last step): "
            "re-record it with scripts/defense_study_01.py"
        )
    return record


def trial_value(record: Mapping, kind: str, level: float, image: int) -> dict | None:
    """What the study ``record`` holds for the trial ``(kind, level, image)`` (the dict of
    :func:`~gitutor.chapters.dlg.defense_study.trial`), or None when it holds no such trial."""
    return next(
        (
            t["value"]
            for t in record["trials"]
            if (t["kind"], t["level"], t["image"]) == (kind, level, image)
        ),
        None,
    )


def reconstructions(record: Mapping, image: int) -> dict:
    """``{(kind, level): (C, H, W) reconstruction in [0, 1]}`` of sample ``image`` in the study ``record``
    (:func:`~gitutor.chapters.dlg.defense_study.decode_image`; 3 channels at the record's side).

    Raises:
        ValueError: naming ``image`` when the record holds no trial of it.
    """
    side = record["setting"]["size"]
    found = {
        (t["kind"], t["level"]): decode_image(t["value"]["image"], (3, side, side))
        for t in record["trials"]
        if t["image"] == image
    }
    if not found:
        raise ValueError(
            f"image {image} is not one of the study's images {record['images']}"
        )
    return found


def median_scale(record: Mapping) -> dict[str, float]:
    """The median over the study's images of each entry of their undefended gradient's scale
    (``record["gradient_scale"]``, :func:`~gitutor.chapters.dlg.sweeps.gradient_scale`: RMS, median and
    largest absolute entry); the upper median for an even count."""
    scales = [record["gradient_scale"][i] for i in record["images"]]
    return {k: sorted(s[k] for s in scales)[len(scales) // 2] for k in scales[0]}


def read_restarts(path, record: Mapping) -> dict | None:
    """The restart record at ``path`` (``book/studies/01_defenses_restarts.json``, written by
    ``scripts/defense_study_01.py --restarts``) for the study ``record`` (:func:`read_study`), or None when
    there is no file there.

    Raises:
        ValueError: naming ``path`` when it is not such a record, was run on another study record (its
            ``of`` commit is not ``record``'s), with another setting, or restarts a trial that did not
            stall in ``record`` or that ``record`` lacks.
    """
    from gitutor.files import read_json

    path = Path(path)
    if not path.is_file():
        return None
    restarts = read_json(path, "defense study restarts")
    keys = ("of", "setting", "trials", "provenance")
    if not isinstance(restarts, dict) or any(key not in restarts for key in keys):
        raise ValueError(
            f"{path} is not a restart record of the defense study (keys {keys})"
        )
    if restarts["of"] != record["provenance"]["commit"]:
        raise ValueError(
            f"{path} restarts the study recorded at {restarts['of']}, not the record's "
            f"{record['provenance']['commit']}: rerun scripts/defense_study_01.py --restarts"
        )
    if restarts["setting"] != record["setting"]:
        raise ValueError(f"{path} was run with another setting than the study record")
    values = {(t["kind"], t["level"], t["image"]): t["value"] for t in record["trials"]}
    for t in restarts["trials"]:
        key = (t["kind"], t["level"], t["image"])
        if key not in values or not stalled_run(values[key]):
            raise ValueError(
                f"{path} restarts {key}, which did not stall in the study record"
            )
    return restarts


def with_restarts(record: Mapping, restarts: Mapping | None) -> dict:
    """``record`` with each trial that ``restarts`` (:func:`read_restarts`) restarted replaced by the start
    of lower final gradient distance (the server's criterion; the first start on a tie); each kept value
    gets ``"start"`` (0: the first, 1: the restart). Without ``restarts`` the record as it is."""
    if restarts is None:
        return dict(record)
    again = {
        (t["kind"], t["level"], t["image"]): t["value"] for t in restarts["trials"]
    }
    trials = []
    for t in record["trials"]:
        first = t["value"]
        second = again.get((t["kind"], t["level"], t["image"]))
        if second is not None and second["final_distance"] < first["final_distance"]:
            trials.append({**t, "value": {**second, "start": 1}})
        else:
            trials.append({**t, "value": {**first, "start": 0}})
    return {**record, "trials": trials}


def example_image(summary: Mapping[tuple[str, float], Level], preferred: int) -> int:
    """The image whose reconstructions the page shows: ``preferred`` (the live run's) when it is one of the
    study's images DLG recovers without a defense, else the first such image (else the first image)."""
    none = summary["none", 0.0]
    recovered = [i for i, o in zip(none.images, none.outcomes) if o == "recovered"]
    return preferred if preferred in recovered else (recovered or list(none.images))[0]


def stalled_run(value: Mapping, factor: float = STALL_FACTOR) -> bool:
    """Whether a trial ``value`` (``final_distance``, ``distance_truth``: gradient distances of the run's
    result and of the true image to the gradient the server received) stalled: final distance ≥
    ``factor`` (default :data:`STALL_FACTOR`) × the truth's, with the truth's distance above 0 (an
    undefended gradient, which the truth matches exactly, has no stall by this rule).

    Raises:
        ValueError: naming ``value`` when a distance is negative or not a number, or ``factor`` when it
            is not a number > 1.
    """
    factor = check_real(factor, "factor", low=1.0, low_open=True)
    final, truth = value["final_distance"], value["distance_truth"]
    for name, d in (("final_distance", final), ("distance_truth", truth)):
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not d >= 0:
            raise ValueError(f"value[{name!r}] must be a distance ≥ 0, got {d!r}")
    return truth > 0 and final >= factor * truth


def summarise(
    record: Mapping,
    recognisable: float = RECOGNISABLE_PSNR,
    stall_factor: float = STALL_FACTOR,
) -> dict[tuple[str, float], Level]:
    """Every (defense, level) of a study ``record`` (:func:`read_study`) as a :class:`Level`, no defense
    first, then :data:`~gitutor.chapters.dlg.defense_study.LEVELS` in order; a run stalled at
    ``stall_factor`` (:func:`stalled_run`) is set aside.

    Raises:
        ValueError: if DLG recovers no image without a defense (no image to judge a defense on), or as
            :func:`outcome` (a control at or above ``recognisable``) and :func:`stalled_run`.
    """
    images = tuple(record["images"])
    values = {(t["kind"], t["level"], t["image"]): t["value"] for t in record["trials"]}
    controls = [record["controls"][i]["psnr"] for i in images]

    def runs(kind, level):
        return [values[kind, level, i] for i in images]

    undefended = [
        outcome(v["psnr"], c, recognisable) for v, c in zip(runs("none", 0.0), controls)
    ]
    attackable = [o == "recovered" for o in undefended]
    if not any(attackable):
        raise ValueError(
            "DLG recovers none of the study's images without a defense: no defense can be judged"
        )
    n_a = sum(attackable)
    levels = [("none", 0.0)] + [(k, v) for k, vs in LEVELS.items() for v in vs]
    out = {}
    for kind, level in levels:
        found = runs(kind, level)
        outcomes = tuple(
            outcome(v["psnr"], c, recognisable) for v, c in zip(found, controls)
        )
        defended = kind != "none"
        stalled = [defended and stalled_run(v, stall_factor) for v in found]
        stopped_runs = [
            v for v, o, st in zip(found, outcomes, stalled) if o == "stopped" and not st
        ]
        hits = [
            o == "stopped"
            for o, a, st in zip(outcomes, attackable, stalled)
            if a and not st
        ]
        n_stalled = sum(st for st, a in zip(stalled, attackable) if a)
        judged = defended and bool(hits)
        out[kind, level] = Level(
            kind=kind,
            level=level,
            images=images,
            psnr=tuple(v["psnr"] for v in found),
            outcomes=outcomes,
            counts={o: success_interval([x == o for x in outcomes]) for o in OUTCOMES},
            attackable=n_a,
            stalled=n_stalled,
            stopped=sum(hits) if defended else None,
            stopped_rate=success_interval(hits) if judged else None,
            state=(level_state(sum(hits), len(hits)) if judged else OPEN)
            if defended
            else None,
            above_truth=sum(
                v["final_distance"] > v["distance_truth"] for v in stopped_runs
            ),
            stopped_runs=len(stopped_runs),
        )
    return out


@dataclass(frozen=True)
class Threshold:
    """Where a defense starts to stop DLG (:func:`threshold`).

    Attributes:
        kind: the defense; levels: its levels tried, increasing.
        tolerance: the strongest level DLG gets through (0.0: none, only the undefended gradient).
        stops: the weakest level from which every stronger level tried stops DLG (None: the strongest level
            tried does not stop it).
        unresolved: the levels between ``tolerance`` and ``stops`` that are not resolved.
    """

    kind: str
    levels: tuple[float, ...]
    tolerance: float
    stops: float | None
    unresolved: tuple[float, ...]


def threshold(states: Mapping[float, str], kind: str) -> Threshold:
    """DLG's tolerance of defense ``kind`` and its stopping level from the readings ``states``
    (``{level: STOPS | GETS_THROUGH | OPEN}``, :func:`level_state`), as the module docstring defines them.

    Raises:
        ValueError: naming ``kind`` when it is not a defense of
            :data:`~gitutor.chapters.dlg.defense_study.LEVELS`, or ``states`` when it is empty or holds a
            reading that is none of the three.
    """
    check_choice(kind, "kind", tuple(LEVELS))
    if not states or set(states.values()) - {STOPS, GETS_THROUGH, OPEN}:
        raise ValueError(
            f"states must map each level to {STOPS!r}, {GETS_THROUGH!r} or {OPEN!r}, got {states!r}"
        )
    levels = tuple(sorted(states))
    stops = None
    for level in reversed(levels):
        if states[level] != STOPS:
            break
        stops = level
    through = [level for level in levels if states[level] == GETS_THROUGH]
    tolerance = max(through, default=0.0)
    ceiling = math.inf if stops is None else stops
    unresolved = tuple(
        level
        for level in levels
        if tolerance < level < ceiling and states[level] == OPEN
    )
    return Threshold(kind, levels, tolerance, stops, unresolved)


def tolerance_text(th: Threshold) -> str:
    """DLG's tolerance as the study bounds it: ``"< a"`` when it gets through no level tried (a: the
    weakest), ``"≥ b"`` when it gets through the strongest tried (b), else the strongest level it gets
    through."""
    if th.tolerance == 0.0:
        return f"< {th.levels[0]:g}"
    if th.tolerance == th.levels[-1]:
        return f"≥ {th.levels[-1]:g}"
    return f"{th.tolerance:g}"


def stops_text(th: Threshold) -> str:
    """The stopping level as the study bounds it: ``"≤ a"`` when the weakest level tried (a) already
    stops DLG, ``"none tried (> b)"`` when the strongest tried (b) does not, else the level."""
    if th.stops is None:
        return f"none tried (> {th.levels[-1]:g})"
    if th.stops == th.levels[0]:
        return f"≤ {th.levels[0]:g}"
    return f"{th.stops:g}"


def threshold_table(found: Mapping[str, Threshold]) -> str:
    """A Markdown table of :func:`thresholds`: per defense its levels tried, DLG's tolerance (the strongest
    level it gets through, :func:`tolerance_text`: a bound at the sweep's edges), the levels left unresolved,
    the stopping level (the weakest from which every stronger level tried stops DLG, :func:`stops_text`)
    and DLG §5's tolerance (:data:`PAPER`)."""
    lines = [
        [
            NAMES[kind],
            UNITS[kind],
            ", ".join(f"{v:g}" for v in th.levels),
            tolerance_text(th),
            ", ".join(f"{v:g}" for v in th.unresolved) or "–",
            stops_text(th),
            f"{PAPER[kind][0]:g}",
        ]
        for kind, th in found.items()
    ]
    header = [
        "defense",
        "level",
        "levels tried",
        "tolerance",
        "not resolved",
        "stopping level",
        "DLG §5's tolerance",
    ]
    return markdown_table(header, lines)


def level_table(summary: Mapping[tuple[str, float], Level]) -> str:
    """A Markdown table of :func:`summarise`: per defense and level, how many images end recovered, not
    resolved and stopped (of all the study's images), how many of the images DLG recovers without a defense
    the level stops (with the 95 % Wilson interval), the reading by the module's rule, and how many stopped runs
    end above the truth's gradient distance."""

    def count(interval: Interval) -> str:
        return f"{round(interval.mean * interval.n)}"

    lines = []
    for (kind, level), row in summary.items():
        rate = row.stopped_rate
        lines.append(
            [
                NAMES[kind],
                "–" if kind == "none" else f"{level:g}",
                count(row.counts["recovered"]),
                count(row.counts["not resolved"]),
                count(row.counts["stopped"]),
                "–"
                if row.state is None
                else "–"
                if rate is None
                else f"{row.stopped} of {rate.n} [{rate.low:.2f}, {rate.high:.2f}]",
                "–" if row.state is None else row.state,
                "–" if row.state is None else str(row.stalled),
                f"{row.above_truth} of {row.stopped_runs}",
            ]
        )
    first = next(iter(summary.values()))
    n, n_a = len(first.images), first.attackable
    header = [
        "defense",
        "level",
        f"recovered (of {n})",
        f"not resolved (of {n})",
        f"stopped (of {n})",
        f"stopped of the {n_a} recovered undefended, stalled set aside [95 %]",
        "reading",
        f"stalled (distance ≥ {STALL_FACTOR:g}× the truth's), set aside",
        "stopped (not stalled), distance above the truth's",
    ]
    return markdown_table(header, lines)


def thresholds(summary: Mapping[tuple[str, float], Level]) -> dict[str, Threshold]:
    """:func:`threshold` of every defense of :func:`summarise`."""
    return {
        kind: threshold(
            {lv: summary[kind, lv].state for lv in levels},
            kind,
        )
        for kind, levels in LEVELS.items()
    }


def _noun(kind: str) -> str:
    return {
        "prune": "pruning ratio",
        "gaussian": "Gaussian variance",
        "laplacian": "Laplacian variance",
    }[kind]


def result_rows(
    record: Mapping | None,
    summary: Mapping[tuple[str, float], Level] | None = None,
) -> list[dict]:
    """The chapter's results rows for DLG §5's defense claims, one per defense: DLG's tolerance (the
    strongest level it gets through, :func:`threshold`) against the paper's (:data:`PAPER`), higher the
    stronger attack; the interval spans the levels left unresolved and the unit says the stopping level
    ("none tried" when no level tried stops DLG). Judged by :data:`gitutor.results.VERDICT_RULE` (meets /
    falls short / not resolved). Without a ``record`` (no study file) each row says "not recorded", which
    the rule cannot judge.

    Raises:
        ValueError: as :func:`summarise`.
    """
    if record is not None and summary is None:
        summary = summarise(record)
    found = thresholds(summary) if summary is not None else {}
    rows = []
    for kind, (paper, where, said) in PAPER.items():
        quantity = (
            f"strongest {_noun(kind)} DLG gets through (tolerance; "
            f"Zhu et al. 2019, {where}: {said})"
        )
        base = {
            "quantity": quantity,
            "paper": paper,
            "better": "higher",
            "differences": "recorded study book/studies/01_defenses.json "
            "(scripts/defense_study_01.py): the DLG LeNet of the public code, "
            "foolbox's CIFAR-100 samples",
        }
        if record is None:
            rows.append(
                {
                    **base,
                    "setting": f"levels {list(LEVELS[kind])}; {SETTING['iterations']} L-BFGS steps",
                    "this_run": "not recorded (the study file is absent)",
                    "unit": UNITS[kind],
                }
            )
            continue
        th = found[kind]
        level = summary[kind, LEVELS[kind][0]]
        n, n_a = len(level.images), level.attackable
        # no level tried gets through: the tolerance lies in [0, the weakest level tried)
        high = max((th.tolerance, *th.unresolved)) or th.levels[0]
        rows.append(
            {
                **base,
                "setting": f"{n} CIFAR-100 samples, {n_a} recovered without a defense; DLG, label "
                f"unknown, {SETTING['iterations']} L-BFGS steps, {SETTING['size']}×{SETTING['size']}; "
                f"levels {list(LEVELS[kind])}; a level stops DLG on most of those (95 % Wilson), "
                f"runs that stalled (final distance ≥ {STALL_FACTOR:g}× the truth's) set aside",
                "this_run": th.tolerance,
                "unit": f"{UNITS[kind]}; tolerance {tolerance_text(th)} (0: no level tried gets "
                f"through); weakest level that stops DLG: {stops_text(th)}; interval: the levels "
                "not resolved, or [0, the weakest level tried]",
                "n": n_a,
                **({"low": th.tolerance, "high": high} if n_a > 1 else {}),
            }
        )
    return rows
