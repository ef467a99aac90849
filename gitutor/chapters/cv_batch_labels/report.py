"""What chapter 03 shows and records of Stage I of Ye et al. (AAAI 2024): the Markdown tables, the
numbers and single words the chapter's Markdown pastes in (myst-nb ``glue``) and the paper-vs-run rows of
its own network. The figures live in :mod:`gitutor.chapters.cv_batch_labels.figures` (re-exported here),
the random-vs-trained comparison's table, rows and headline in
:mod:`gitutor.chapters.cv_batch_labels.substitute_report`."""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from gitutor.chapters.cv_batch_labels.experiments import SETTLE_PATIENCE
from gitutor.chapters.cv_batch_labels.figures import (  # noqa: F401  (the chapter calls them as report.*)
    curves_figure,
    cv_figure,
    distribution_figure,
    effects_figure,
    history_figure,
    row_size_figure,
    surface_figure,
    sweep_figure,
)
from gitutor.labels import FeatureCV, evolve_label_counts, label_count_objective
from gitutor.labels.count_search import _crossover, _mutate
from gitutor.results import interval_fields
from gitutor.stats import Interval, interval, success_interval
from gitutor.tables import markdown_table


def generation_loop_source() -> str:
    """The code of Ye et al.'s search as it runs: the sources of the crossover (Eq. 7) and the mutation
    and the body of :func:`~gitutor.labels.evolve_label_counts` from its initial population to its
    return (Rs, crossover, mutation, Eq. 6 for the population, Eq. 8's selection), as printed on the page.

    Raises:
        RuntimeError: if the body is no longer found in the function's source.
    """
    source = inspect.getsource(evolve_label_counts)
    start = source.find("\n    rng = np.random.default_rng(seed)") + 1
    end = source.find("\n", source.find("\n    return LabelCountSearch(", start) + 1)
    if start == 0 or end <= start:
        raise RuntimeError(
            "the generation loop of evolve_label_counts was not found in its source"
        )
    parts = [inspect.getsource(part) for part in (_crossover, _mutate)]
    return "\n".join([*parts, textwrap.dedent(source[start:end]).rstrip()])


def side(difference) -> str:
    """Where a paired difference's 95 % interval lies: ``"above"`` or ``"below"`` 0, ``"touching"`` it (an
    end at 0 exactly, e.g. [0, 28] from one discordant batch) or ``"across"`` it (the one test of a paired
    comparison in this chapter: the interval excludes 0 or it does not; touching does not)."""
    if difference.low > 0:
        return "above"
    if difference.high < 0:
        return "below"
    if difference.low == 0 or difference.high == 0:
        return "touching"
    return "across"


def paired_values(
    first: Sequence[float], second: Sequence[float], prefix: str
) -> dict[str, float | int | str]:
    """The numbers the page glues for ``first`` − ``second``, two methods' (or networks') 0/1 exact flags
    on the same batches: ``<prefix>`` (the mean paired difference, percentage points), ``_low`` /
    ``_high`` (its 95 % interval, :func:`gitutor.stats.interval` of the differences in [−1, 1]), ``_n`` (batches),
    ``_only_first`` / ``_only_second`` (batches only one of the two got exact) and ``_side``
    (:func:`side`: the comparison's one verdict).

    Raises:
        ValueError: if the flags differ in length or are empty.
    """
    if len(first) != len(second) or not len(first):
        raise ValueError(
            f"first and second must hold one 0/1 flag per batch, the same batches: got "
            f"{len(first)} and {len(second)}"
        )
    difference = interval(
        np.asarray(first, float) - np.asarray(second, float), bounds=(-1.0, 1.0)
    )
    return {
        prefix: 100 * difference.mean,
        f"{prefix}_low": 100 * difference.low,
        f"{prefix}_high": 100 * difference.high,
        f"{prefix}_n": difference.n,
        f"{prefix}_only_first": int(sum(a > b for a, b in zip(first, second))),
        f"{prefix}_only_second": int(sum(b > a for a, b in zip(first, second))),
        f"{prefix}_side": side(difference),
    }


def objective_surface(
    w: torch.Tensor,
    classes: torch.Tensor,
    stats: FeatureCV,
    total: int,
    points: int = 160,
):
    """Eq. 6 for a two-class batch: ``(v1, v2, J on the (points, points) grid of counts in [0.2, total],
    integer candidates (total − 1, 2) with v₁ + v₂ = total, J at them)``, the inputs of :func:`surface_figure`.

    Raises:
        ValueError: if ``classes`` does not hold exactly two classes.
    """
    if len(classes) != 2:
        raise ValueError(
            f"classes must hold the two coarse labels of a two-class batch, got {len(classes)}"
        )
    grid = torch.linspace(0.2, float(total), points, dtype=torch.float64)
    v1, v2 = torch.meshgrid(grid, grid, indexing="ij")
    surface = label_count_objective(torch.stack([v1, v2], dim=-1), w, classes, stats)
    integer = torch.tensor([[n, total - n] for n in range(1, total)])
    return v1, v2, surface, integer, label_count_objective(integer, w, classes, stats)


def labelings_table(labelings: Mapping[str, Sequence[int] | torch.Tensor]) -> str:
    """Markdown table: one line per method with its labels, sorted (a multiset of classes)."""
    listed = lambda labels: ", ".join(
        str(c) for c in sorted(torch.as_tensor(labels).tolist())
    )
    return markdown_table(
        ["", "labels (sorted)"],
        [[name, listed(labels)] for name, labels in labelings.items()],
    )


def methods_table(scores: Mapping[str, Sequence[dict]], summary) -> str:
    """Markdown table: per method its mean per-label accuracy and exact-batch rate (``summary`` of its scores)."""
    return markdown_table(
        ["method", "per-label accuracy", "exact batches"],
        [
            [name, f"{summary(values)[0]:.3f}", f"{summary(values)[1]:.2f}"]
            for name, values in scores.items()
        ],
    )


def failures_table(failures: Sequence[tuple[Sequence[int], Sequence[int]]]) -> str:
    """Markdown table of the batches where Eq. 6's minimum is not the truth: true counts, the minimum, how many
    images it moves, and whether the largest class gains; a sentence when there is none."""
    if not failures:
        return "In every batch with the right coarse labels the minimum of Eq. 6 is the truth."
    lines = [
        [
            ", ".join(map(str, truth)),
            ", ".join(map(str, best)),
            int(np.abs(np.subtract(truth, best)).sum()) // 2,
            "yes" if best[int(np.argmax(truth))] > max(truth) else "no",
        ]
        for truth, best in failures
    ]
    return markdown_table(
        ["true counts", "Eq. 6 minimum", "images moved", "largest class gains"], lines
    )


def mean_percent(values: Sequence[float]) -> str:
    """``"23 %"``: the mean of ``values`` as a percentage, or ``"n/a"`` when there is none."""
    return f"{100 * float(np.mean(values)):.0f} %" if len(values) else "n/a"


def sweep_table(
    sweep: Mapping[str, Mapping[str, Sequence]],
    seconds: Sequence[float],
    batch_sizes: Sequence[int],
) -> str:
    """Markdown table of :func:`~gitutor.chapters.cv_batch_labels.experiments.batch_size_sweep`: per batch size N the exact
    batches of every method ("k / n") and ours' milliseconds per recovery."""
    header = ["N", *(f"exact, {name}" for name in sweep), "ms per recovery (ours)"]
    lines = [
        [
            n,
            *(
                f"{int(sum(sweep[name]['flags'][i]))} / {len(sweep[name]['flags'][i])}"
                for name in sweep
            ),
            f"{1000 * seconds[i]:.0f}",
        ]
        for i, n in enumerate(batch_sizes)
    ]
    return markdown_table(header, lines)


def effects_table(by_m: Mapping[int, tuple], by_aux: Mapping[int, tuple]) -> str:
    """Markdown table of :func:`~gitutor.chapters.cv_batch_labels.experiments.aux_and_m_effects`: per setting the per-label
    accuracy and the exact-batch rate of Eq. 6's minimum."""
    lines = [[f"M = {m}", f"{r[0]:.3f}", f"{r[1]:.2f}"] for m, r in by_m.items()]
    lines += [
        [f"{n} auxiliary images", f"{r[0]:.3f}", f"{r[1]:.2f}"]
        for n, r in by_aux.items()
    ]
    return markdown_table(["setting", "per-label accuracy", "exact batches"], lines)


def _share_fields(flags: Sequence[float]) -> dict:
    """``low``/``high`` of a row from 0/1 flags: the Wilson 95 % interval (inside [0, 1])."""
    return interval_fields(success_interval(flags), 3)


def _mean_fields(values: Sequence[float]) -> dict:
    """``low``/``high`` of a row from per-batch accuracies: their 95 % interval inside [0, 1]."""
    return interval_fields(interval(values, bounds=(0.0, 1.0)), 3)


def capped_rate(rate: Interval, short: int, generations: int) -> tuple[Interval, str]:
    """Ours' exact-batch ``rate`` (:func:`~gitutor.stats.success_interval` over its batches) with what the
    search's cap leaves open: ``short`` of the wrong batches
    (:func:`~gitutor.chapters.cv_batch_labels.experiments.search_fell_short`) have true counts that score a
    lower Eq. 6 J than the counts found in ``generations`` generations, so a longer search could still get
    them right. Returns ``(rate, note)``: with none short, ``rate`` and a note that the cap does not set it;
    otherwise the interval from ``rate``'s lower bound to the Wilson upper bound with those batches counted
    exact, and a note that says so.

    Raises:
        ValueError: when ``short`` is negative or more than the wrong batches.
    """
    exact = round(rate.mean * rate.n)
    wrong = rate.n - exact
    if not 0 <= short <= wrong:
        raise ValueError(
            f"short must be in [0, {wrong}] (the wrong batches), got {short}"
        )
    if short == 0:
        return rate, (
            f"on each of the {wrong} wrong batches the found counts score an Eq. 6 J no higher than "
            f"the true counts', so no longer search reaches the truth: the {generations}-generation "
            "cap does not set this rate"
        )
    best = success_interval([1.0] * (exact + short) + [0.0] * (wrong - short))
    widened = Interval(rate.mean, rate.low, best.high, rate.n, rate.bounds)
    return widened, (
        f"{short} of the {wrong} wrong batches have true counts with a lower Eq. 6 J than the "
        f"{generations}-generation search found: the interval's upper end counts them exact"
    )


def paper_rows(
    cfg,
    profile: str,
    *,
    scores: Mapping[str, Sequence[dict]],
    sweep: Mapping,
    figure_exact: bool,
    figure_accuracy: float,
    figure_classes: int,
    settled: int | None,
    cap: int,
) -> list[dict]:
    """The results record's rows for the chapter's own network (see :mod:`gitutor.results`); the headline, on the
    trained network, comes from :func:`~gitutor.chapters.cv_batch_labels.substitute_report.substitute_rows`.

    With random weights (the quick profile) the network is not the paper's pretrained ResNet34 and Stage I
    leans on trained features, so these rows state no direction (not comparable, the reason in their
    differences column); with the full profile's pretrained network they get one. Rows from several batches
    carry their 95 % interval (Wilson for exact-batch rates, Student-t cut to [0, 1] for accuracies).

    Args:
        cfg, profile: the chapter's profile and its name.
        scores: :func:`~gitutor.chapters.cv_batch_labels.experiments.compare_methods`'s ``scores`` at B = ``cfg.batch_size``.
        sweep: :func:`~gitutor.chapters.cv_batch_labels.experiments.batch_size_sweep`'s first value, run with
            its ``stats`` (ours' ``"short"`` widens the N = 64 row, :func:`capped_rate`).
        figure_exact, figure_accuracy, figure_classes: ours on the Fig. 4(a) batch: exact counts?, per-label
            accuracy, classes in it.
        settled, cap: generation at which that batch's search settled by the settling rule
            (:func:`~gitutor.chapters.cv_batch_labels.experiments.settled_generation`; None: not settled
            within ``cap`` generations).
    """
    pretrained = cfg.pretrained
    reason = "random weights; Stage I rests on a trained network's features"
    better = {"better": "higher"} | ({} if pretrained else {"not_comparable": reason})
    model = "pretrained ResNet34" if pretrained else "random ResNet34"
    why = (
        ""
        if pretrained
        else "not comparable: random weights, and Stage I rests on a trained network's "
        "features (the headline row is on a trained one); "
    )
    differences = why + (
        f"{profile} profile: {model} (eval mode), {cfg.image_size}×{cfg.image_size} crops of "
        "bundled photographs, random labels"
        if profile == "quick"
        else f"{profile} profile: {model}, ImageNet validation images"
    )
    ours = scores["ours"]
    big, n64 = f"B = {cfg.figure_batch_size}", cfg.figure_batch_size
    rows = [
        {
            "quantity": "per-label accuracy, ours",
            "setting": f"B = {cfg.batch_size}, repeats over ≤ {cfg.max_classes} "
            "classes",
            "paper": "all labels right (Fig. 4a, B = 64)",
            "this_run": round(float(np.mean([s["accuracy"] for s in ours])), 3),
            "unit": "fraction",
            **_mean_fields([s["accuracy"] for s in ours]),
            "differences": differences + f"; {len(ours)} batches",
        },
        {
            "quantity": "exact-batch rate, ours",
            "setting": f"B = {cfg.batch_size}",
            "paper": "not reported",
            "this_run": round(float(np.mean([s["exact"] for s in ours])), 2),
            "unit": "fraction",
            **_share_fields([s["exact"] for s in ours]),
            "differences": f"{len(ours)} batches; Eq. 6 exhaustive minimum: "
            f"{np.mean([s['exact'] for s in scores['Eq. 6 exhaustive']]):.2f}",
        },
        {
            "quantity": "exact counts, ours",
            "setting": f"{big}, the Fig. 4(a) batch",
            "paper": 1.0,
            "this_run": float(figure_exact),
            "unit": "fraction",
            **better,
            "n": 1,
            "differences": differences
            + f"; one batch (n = 1) of {figure_classes} classes; paper: all 64 right",
        },
        {
            "quantity": "per-label accuracy, ours",
            "setting": f"{big} (Fig. 4a)",
            "paper": 1.0,
            "this_run": round(figure_accuracy, 3),
            "unit": "fraction",
            **better,
            "n": 1,
            "differences": differences
            + f"; one batch (n = 1) of {figure_classes} classes; paper: all 64 labels right",
        },
    ]
    if n64 in cfg.batch_sizes:
        at = list(cfg.batch_sizes).index(n64)
        flags = sweep["ours"]["flags"][at]
        # the batches a longer search could still get right widen the interval (no rate at a cap)
        rate, capped = capped_rate(
            success_interval(flags), sweep["ours"]["short"][at], cfg.iterations
        )
        rows.append(
            {
                "quantity": "exact-batch rate, ours",
                "setting": f"{big}, batch-size sweep",
                "paper": 1.0,
                "this_run": round(float(np.mean(flags)), 3),
                "unit": "fraction",
                **better,
                **interval_fields(rate, 3),
                "differences": differences + f"; {len(flags)} batches; paper: its "
                f"one Fig. 4(a) batch exact; {capped}",
            }
        )
    rows += [
        {
            "quantity": "per-label accuracy, Yin et al.",
            "setting": f"B = {cfg.batch_size}, repeated labels",
            "paper": "poor (Fig. 4a)",
            "this_run": round(
                float(np.mean([s["accuracy"] for s in scores["Yin et al."]])), 3
            ),
            "unit": "fraction",
            **_mean_fields([s["accuracy"] for s in scores["Yin et al."]]),
            "differences": differences,
        },
        settled_row(settled, cap, big, profile, model, pretrained),
    ]
    return rows


def settled_row(
    settled: int | None,
    cap: int,
    setting: str,
    profile: str,
    model: str,
    pretrained: bool,
) -> dict:
    """The row "generations until the best J settles" of the Fig. 4(a) batch's search (paper: "fewer than 200
    iterations"): the settled generation, or the words "not settled at ``cap``" (no number: a cap is not a
    result). Judged only on a pretrained network; on a random one it is not comparable."""
    row = {
        "quantity": "generations until the best J settles",
        "setting": f"{setting}, one search, settling rule",
        "paper": 200,
        "this_run": settled if settled is not None else f"not settled at {cap}",
        "unit": "generations",
        "n": 1,
        "differences": f"{profile} profile, {model}; paper: fewer than 200 (a bound); the search's "
        "speed, not its answer; "
        f"settled: the best J unchanged for the next {SETTLE_PATIENCE} generations "
        f"(at most {cap})",
    }
    if settled is not None:
        row["better"] = "lower"
    if not pretrained:
        row["not_comparable"] = (
            "the paper states 'fewer than 200 iterations' to infer the labels on its "
            f"pretrained ResNet34; the {model}'s J need not have its minimum at the truth"
        )
    return row


def chapter_timings(
    cfg,
    device,
    *,
    recovery_seconds: float,
    feature_seconds: float,
    images: int,
    threads: int,
) -> list[dict]:
    """The wall-clock rows of the results record (``save_results(..., timings=...)``): ours' mean seconds per
    recovery at B = ``cfg.batch_size`` (the paper: less than 1 s; a time on this machine, not judged) and
    the seconds of ResNet34's features of ``images`` attacked and auxiliary images (``device`` a
    ``torch.device``)."""
    where = "CPU, shared machine" if device.type == "cpu" else "GPU"
    return [
        {
            "quantity": "time per recovery",
            "setting": f"B = {cfg.batch_size}, {cfg.population} × {cfg.iterations}",
            "paper": "less than 1 s",
            "this_run": round(recovery_seconds, 3),
            "unit": "s",
            "differences": f"a wall-clock time on this machine, not a result; {where}",
        },
        {
            "quantity": "ResNet34 features of the attacked and auxiliary images",
            "setting": f"{images} images",
            "paper": "not reported",
            "this_run": round(feature_seconds, 1),
            "unit": "s",
            "differences": f"{threads} CPU threads" if device.type == "cpu" else "GPU",
        },
    ]


def settle_table(runs: Sequence[Mapping], budget: int, cap: int) -> str:
    """Markdown table of :func:`~gitutor.chapters.cv_batch_labels.experiments.search_until_settled` runs, one
    per seed: best J and images in a wrong class after ``budget`` generations and at the end, and the
    generation at which the best J settled ("not settled at ``cap``" when it did not)."""
    shown = lambda value: "n/a" if value is None else value
    return markdown_table(
        [
            "seed",
            f"best J, {budget} gen.",
            f"images wrong, {budget} gen.",
            "settled at generation",
            "best J at the end",
            "images wrong at the end",
        ],
        [
            [
                seed,
                f"{run['j_budget']:.6f}",
                shown(run["wrong_budget"]),
                run["settled"]
                if run["settled"] is not None
                else f"not settled at {cap}",
                f"{run['j_final']:.6f}",
                shown(run["wrong"]),
            ]
            for seed, run in enumerate(runs)
        ],
    )
