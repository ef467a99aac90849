"""What chapter 03 shows of its random-vs-trained comparison (:mod:`gitutor.chapters.cv_batch_labels.substitute`): the table
and figure per network, the numbers its prose pastes in (myst-nb ``glue``) and the results-record rows."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt

from gitutor.chapters.cv_batch_labels.imagenet_report import SUBSTITUTE_REASON
from gitutor.results import interval_fields
from gitutor.stats import format_interval
from gitutor.tables import markdown_table
from gitutor.viz import interval_errorbars, legible

#: Row names of the random-vs-trained table, by the keys of
#: :func:`~gitutor.chapters.cv_batch_labels.experiments.substitute_networks` (plus ``"chapter"``: the ResNet34 above).
NETWORK_NAMES = {
    "chapter": "ResNet34, random (the network above)",
    "random": "ResNet-20, random",
    "trained": "ResNet-20, trained substitute",
    "trained, new head": "ResNet-20, trained features, new head",
}


#: The label-count methods the network table and figure show beside ours (exact-batch rate each).
BASELINES = ("bias count", "LLG", "LLG+")


def networks_table(summaries: Mapping[str, Mapping]) -> str:
    """Markdown table of :func:`~gitutor.chapters.cv_batch_labels.substitute.comparison_summary` per network (keys of
    :data:`NETWORK_NAMES`): classes, input size, batches with the right coarse label set, mean top softmax
    probability, mean CV at the kept ranks, ours' mean per-label accuracy and the exact-batch rate with its
    95 % interval of ours and of every :data:`BASELINES` method the comparison ran."""
    header = [
        "network",
        "classes",
        "input",
        "coarse set right",
        "mean top p",
        "CV at t",
        "per-label accuracy, ours",
        "exact, ours",
        *(f"exact, {name}" for name in BASELINES),
    ]
    cell = lambda s, name: (
        format_interval(s["methods"][name], count=False)
        if name in s["methods"]
        else "n/a"
    )
    lines = [
        [
            NETWORK_NAMES.get(key, key),
            s["classes"],
            f"{s['image_size']} px",
            f"{s['coarse_right']} / {s['trials']}",
            f"{s['top_probability']:.2f}",
            f"{s['kept_cv']:.2f}",
            f"{s['accuracy'].mean:.2f}",
            format_interval(s["exact"], count=False),
            *(cell(s, name) for name in BASELINES),
        ]
        for key, s in summaries.items()
    ]
    return markdown_table(header, lines)


def networks_figure(summaries: Mapping[str, Mapping]):
    """Exact-batch rate per network of ours and of each :data:`BASELINES` method, with 95 % intervals."""
    names = [
        NETWORK_NAMES.get(key, key).replace(", ", ",\n").replace(" (", "\n(")
        for key in summaries
    ]
    fig, ax = plt.subplots(figsize=(8, 4.2))
    methods = ("ours", *BASELINES)
    for j, method in enumerate(methods):
        where = [
            (i, s["methods"][method])
            for i, s in enumerate(summaries.values())
            if method in s["methods"]
        ]
        offset = (j - (len(methods) - 1) / 2) * 0.16
        interval_errorbars(
            ax,
            [i + offset for i, _ in where],
            [v for _, v in where],
            linestyle="none",
            label=method,
        )
    ax.set_xticks(range(len(names)), names)
    ax.set(
        ylabel="exact-batch rate",
        ylim=(0, 1.02),
        xlim=(-0.5, len(names) - 0.5),
        title="Label counts, B = 8: exact batches with 95 % intervals",
    )
    ax.grid(alpha=0.3, axis="y")
    ax.legend(
        ncols=len(methods),
        loc="upper center",
        bbox_to_anchor=(0.5, -0.28),
        frameon=False,
    )
    return legible(fig)


def substitute_rows(summaries: Mapping[str, Mapping], cfg, profile: str) -> list[dict]:
    """Results-record rows for every network of the random-vs-trained comparison except ``"chapter"`` (already
    rows of :func:`~gitutor.chapters.cv_batch_labels.report.paper_rows`): ours' exact-batch rate with its Wilson
    95 % interval. The trained substitute's row is judged against the paper's Fig. 4(a) batch, all counts right
    (1.0), but marked not comparable (:data:`~gitutor.chapters.cv_batch_labels.imagenet_report.SUBSTITUTE_REASON`):
    the chapter's headline is the ImageNet row; the others state no paper number."""
    rows = []
    for key, s in summaries.items():
        if key == "chapter":
            continue
        setting = (
            f"{profile} profile: {s['trials']} batches of B = {cfg.batch_size}, repeats over ≤ "
            f"{cfg.max_classes} of {s['classes']} classes, {s['image_size']}-px crops of photographs the "
            "substitute never saw"
        )
        row = {
            "quantity": f"exact-batch rate, ours, {NETWORK_NAMES.get(key, key)}",
            "setting": f"B = {cfg.batch_size}, {s['trials']} batches",
            "paper": "not reported",
            "this_run": round(s["exact"].mean, 3),
            "unit": "fraction",
            **interval_fields(s["exact"], 3),
            "differences": f"{setting}; paper: pretrained ResNet34 on ImageNet",
        }
        if key == "trained":
            row |= {
                "quantity": "exact label counts, ours (Stage I), trained substitute",
                "paper": 1.0,
                "better": "higher",
                "not_comparable": SUBSTITUTE_REASON,
                "differences": f"{setting}; the contrast to the ImageNet headline",
            }
        rows.append(row)
    return rows


def network_values(summaries: Mapping[str, Mapping]) -> dict[str, float | int]:
    """The numbers the random-vs-trained prose glues, per network key of :data:`NETWORK_NAMES` written with
    underscores (``"trained, new head"`` → ``trained_new_head``): ``sub_<key>_exact`` / ``_low`` / ``_high``
    (exact-batch rate and its 95 % interval, in %), ``_cv`` (mean CV at the kept ranks), ``_p`` (mean top
    softmax probability) and ``_coarse`` (batches with the right coarse label set)."""
    values = {}
    for key, s in summaries.items():
        name = "sub_" + key.replace(", ", "_").replace(" ", "_")
        values |= {
            f"{name}_exact": 100 * s["exact"].mean,
            f"{name}_low": 100 * s["exact"].low,
            f"{name}_high": 100 * s["exact"].high,
            f"{name}_cv": s["kept_cv"],
            f"{name}_p": s["top_probability"],
            f"{name}_coarse": s["coarse_right"],
        }
    return values
