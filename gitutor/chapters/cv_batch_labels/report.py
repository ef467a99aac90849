"""What chapter 03 shows and records of Stage I of Ye et al. (AAAI 2024): the Markdown tables and sentences
the chapter's prose pastes in (myst-nb ``glue``) and the paper-vs-run rows of its own network. The figures
live in :mod:`gitutor.chapters.cv_batch_labels.figures` (re-exported here), the random-vs-trained comparison's
table, rows and headline in :mod:`gitutor.chapters.cv_batch_labels.substitute_report`."""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from gitutor.labels import FeatureCV, evolve_label_counts, label_count_objective
from gitutor.results import interval_fields
from gitutor.stats import interval, success_interval
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
from gitutor.tables import markdown_table
from gitutor.chapters.cv_batch_labels.substitute_report import separated


def generation_loop_source() -> str:
    """The generation loop of :func:`~gitutor.labels.evolve_label_counts` (crossover and Rs, mutation, Eq. 6 for
    the population, Eq. 8's selection), dedented, as printed on the page.

    Raises:
        RuntimeError: if the loop is no longer found in the function's source.
    """
    source = inspect.getsource(evolve_label_counts)
    start = source.find("\n    for _ in tqdm") + 1
    end = (
        source.find("\n    return LabelCountSearch(", start) + 1
    )  # the return after the loop
    if start == 0 or end <= start:
        raise RuntimeError(
            "the generation loop of evolve_label_counts was not found in its source"
        )
    return textwrap.dedent(source[start:end]).rstrip()


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


def effects_table(
    by_m: Mapping[int, tuple[float, float]], by_aux: Mapping[int, tuple[float, float]]
) -> str:
    """Markdown table of :func:`~gitutor.chapters.cv_batch_labels.experiments.aux_and_m_effects`: per setting the per-label
    accuracy and the exact-batch rate of Eq. 6's minimum."""
    lines = [[f"M = {m}", f"{a:.3f}", f"{e:.2f}"] for m, (a, e) in by_m.items()]
    lines += [
        [f"{n} auxiliary images", f"{a:.3f}", f"{e:.2f}"]
        for n, (a, e) in by_aux.items()
    ]
    return markdown_table(["setting", "per-label accuracy", "exact batches"], lines)


def effects_sentence(
    by_m: Mapping[int, tuple[float, float]],
    by_aux: Mapping[int, tuple[float, float]],
    trials: int,
) -> str:
    """Whether :func:`effects_table`'s settings (each on the same ``trials`` batches) differ in the exact-batch
    rate beyond noise: the highest and lowest rate's 95 % Wilson intervals, as a sentence."""
    rates = [e for _, e in (*by_m.values(), *by_aux.values())]
    low, high = (
        success_interval(
            [1.0] * round(r * trials) + [0.0] * (trials - round(r * trials))
        )
        for r in (min(rates), max(rates))
    )
    spread = f"{round(min(rates) * trials)} to {round(max(rates) * trials)} of {trials} batches exact"
    if low.high >= high.low:
        return (
            f"Across these settings Eq. 6's minimum gets {spread}; the 95 % Wilson intervals of the highest "
            f"and the lowest overlap: no measurable effect of M or of the auxiliary count at n = {trials} "
            "batches on a random network."
        )
    return (
        f"Across these settings Eq. 6's minimum gets {spread}; the highest and the lowest differ beyond "
        f"their 95 % Wilson intervals (n = {trials} batches, random network)."
    )


def _share_fields(flags: Sequence[float]) -> dict:
    """``low``/``high`` of a row from 0/1 flags: the Wilson 95 % interval (inside [0, 1])."""
    return interval_fields(success_interval(flags), 3)


def _mean_fields(values: Sequence[float]) -> dict:
    """``low``/``high`` of a row from per-batch accuracies: their 95 % interval inside [0, 1]."""
    return interval_fields(interval(values, bounds=(0.0, 1.0)), 3)


def paper_rows(
    cfg,
    profile: str,
    *,
    scores: Mapping[str, Sequence[dict]],
    sweep: Mapping,
    figure_exact: bool,
    figure_accuracy: float,
    figure_classes: int,
    settled: int,
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
        sweep: :func:`~gitutor.chapters.cv_batch_labels.experiments.batch_size_sweep`'s first value.
        figure_exact, figure_accuracy, figure_classes: ours on the Fig. 4(a) batch: exact counts?, per-label
            accuracy, classes in it.
        settled: generation at which that search settled.
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
        flags = sweep["ours"]["flags"][list(cfg.batch_sizes).index(n64)]
        rows.append(
            {
                "quantity": "exact-batch rate, ours",
                "setting": f"{big}, batch-size sweep",
                "paper": 1.0,
                "this_run": round(float(np.mean(flags)), 3),
                "unit": "fraction",
                **better,
                **_share_fields(flags),
                "differences": differences + f"; {len(flags)} batches; paper: its "
                "one Fig. 4(a) batch exact",
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
        {
            "quantity": "generations until the best J settles",
            "setting": f"{big}, one search",
            "paper": 200,
            "this_run": settled,
            "unit": "generations",
            "better": "lower",
            "n": 1,
            "differences": f"{profile} profile, {model}; the search's speed, not its answer",
            "not_comparable": "the paper states 'fewer than 200 iterations' to infer the labels on its pretrained "
            f"ResNet34; this is when one search's best J stops changing on the {model}, whose "
            "J need not have its minimum at the truth (n = 1)",
        },
    ]
    return rows


def counts_text(counts: Sequence[int] | torch.Tensor) -> str:
    """``"(5, 3)"``: a count vector as the prose writes it."""
    return "(" + ", ".join(str(int(c)) for c in torch.as_tensor(counts).tolist()) + ")"


def surface_note(best: Sequence[int], truth: Sequence[int]) -> str:
    """The sentence under the two-class surface: whether the minimum on the constraint line is the truth."""
    if list(best) == list(truth):
        return "is the truth."
    return (
        "is not the truth: on this batch the objective itself misses, a failure of the kind "
        "analysed below."
    )


def agreement_sentence(agree: int, trials: int) -> str:
    """Whether the evolutionary search found Eq. 6's exhaustive minimum in every one of ``trials`` batches."""
    if agree == trials:
        return (
            "The search found that minimum in every batch, so the remaining errors are the "
            "**objective's**, not the search's."
        )
    return (
        f"The search found that minimum in {agree} of {trials} batches; in the others it stopped "
        "short of it."
    )


def spread_sentence(spread: Mapping[str, Sequence[float]]) -> str:
    """Whether Eq. 6's premise (a_k / n_k equal across a batch's classes) held: the mean spread (std / mean of
    a_k / n_k, :func:`~gitutor.chapters.cv_batch_labels.experiments.compare_methods`'s ``spread``) in the failed against the
    exact batches, or a sentence saying that no batch failed."""
    if not spread["failed"]:
        return "No batch with the right coarse labels failed here, so this run does not show where it breaks."
    return (
        f"It holds only roughly: the spread (std / mean) of aₖ/nₖ across a batch's classes is "
        f"{mean_percent(spread['failed'])} in the failed batches against {mean_percent(spread['exact'])} "
        "in the exact ones."
    )


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
    recovery at B = ``cfg.batch_size`` (the paper: less than 1 s) and the seconds of ResNet34's features of
    ``images`` attacked and auxiliary images (``device`` a ``torch.device``)."""
    where = "CPU, shared machine" if device.type == "cpu" else "GPU"
    return [
        {
            "quantity": "time per recovery",
            "setting": f"B = {cfg.batch_size}, {cfg.population} × {cfg.iterations}",
            "paper": 1,
            "this_run": round(recovery_seconds, 3),
            "unit": "s",
            "better": "lower",
            "differences": f"paper: less than 1 s; {where}",
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


def sweep_wins(
    sweep: Mapping[str, Mapping[str, Sequence]],
    first: str,
    second: str,
    batch_sizes: Sequence[int],
) -> str:
    """At which batch sizes ``first`` got more batches exact than ``second`` in the sweep
    (:func:`~gitutor.chapters.cv_batch_labels.experiments.batch_size_sweep`, both on the same batches) and where
    that holds beyond noise (the paired differences of their exact flags, with the exact sign test:
    :func:`~gitutor.chapters.cv_batch_labels.substitute_report.separated`), as a sentence."""
    more, beyond_noise = [], []
    for i, n in enumerate(batch_sizes):
        a, b = (sweep[name]["flags"][i] for name in (first, second))
        if np.mean(a) > np.mean(b):
            more.append(str(n))
            if separated(a, b):
                beyond_noise.append(str(n))
    trials = len(sweep[first]["flags"][0])
    if not more:
        return f"The {first} gets no more batches exact than {second} at any N."
    how = f"{trials} batches per N, the same for both; by the paired differences and the exact sign test"
    if not beyond_noise:
        return f"This run does not separate the {first} from {second} at any N ({how})."
    rest = (
        ""
        if len(beyond_noise) == len(batch_sizes)
        else "; at the other N this run does not separate them"
    )
    return f"The {first} gets more batches exact than {second} at N = {', '.join(beyond_noise)} ({how}){rest}."
