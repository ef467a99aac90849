"""What chapter 03 shows and records of Stage I in the paper's kind of setting
(:mod:`gitutor.chapters.cv_batch_labels.imagenet`): the headline table and figure, a batch of views and the
results-record rows, the chapter's headline among them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt

from gitutor.chapters.cv_batch_labels.imagenet import BASELINES
from gitutor.chapters.cv_batch_labels.report import capped_rate
from gitutor.results import interval_fields
from gitutor.stats import format_interval, success_interval
from gitutor.tables import markdown_table
from gitutor.viz import interval_errorbars, legible, show_grid

#: The network, as the page and the record name it.
NETWORK = "ImageNet-trained EfficientNet-Lite0"

#: Ye et al.'s central claim for Stage I, in their words (the headline row's ``claim``).
CLAIM = (
    "labels of all training data can be rapidly (requires fewer than 200 iterations and takes less than 1 "
    "second) and accurately inferred (Ye et al. 2024, Methodology, Stage I. Label Inference)"
)


#: Why the substitute's and the random networks' rows are a contrast, not a reproduction (their verdict's reason).
SUBSTITUTE_REASON = (
    "a 16-class ResNet-20 trained on other bundled photographs, attacked on crops it never saw "
    "with random labels: not the paper's ImageNet network, data or true labels (the headline is "
    "the ImageNet row)"
)


def headline_table(summary: Mapping) -> str:
    """Markdown table of :func:`~gitutor.chapters.cv_batch_labels.imagenet.imagenet_summary`: per method the
    exact-batch rate, the exact rate on the batches whose coarse label set was right, the per-label accuracy
    (95 % intervals) and, for the count baselines, the paired difference ours − it with its discordant batches."""
    header = [
        "method",
        "exact batches",
        f"exact, coarse set right (n = {summary['coarse_right']})",
        "per-label accuracy",
        "ours − method, paired",
        "batches only ours / only it got exact",
    ]
    lines = []
    for name, rate in summary["exact"].items():
        given = summary["given_coarse"][name]
        paired = (
            format_interval(summary["paired"][name], count=False)
            if name in summary["paired"]
            else "—"
        )
        split = (
            "{} / {}".format(*summary["discordant"][name])
            if name in summary["discordant"]
            else "—"
        )
        lines.append(
            [
                name,
                format_interval(rate, count=False),
                "n/a" if given is None else format_interval(given, count=False),
                format_interval(summary["accuracy"][name], count=False),
                paired,
                split,
            ]
        )
    return markdown_table(header, lines)


def headline_figure(summary: Mapping):
    """Exact-batch rate of every method, on all batches and on those with the right coarse label set, and
    Eq. 6's minimum with p = 0 imposed, with 95 % intervals."""
    names = list(summary["exact"])
    fig, ax = plt.subplots(figsize=(8.5, 3.6))
    interval_errorbars(
        ax,
        [i - 0.1 for i in range(len(names))],
        [summary["exact"][n] for n in names],
        linestyle="none",
        label="all batches",
    )
    given = [
        (i, summary["given_coarse"][n])
        for i, n in enumerate(names)
        if summary["given_coarse"][n]
    ]
    interval_errorbars(
        ax,
        [i + 0.1 for i, _ in given],
        [v for _, v in given],
        linestyle="none",
        label="coarse label set right",
    )
    if summary["premise"] is not None:
        interval_errorbars(
            ax,
            [len(names)],
            [summary["premise"]],
            linestyle="none",
            color="C3",
            label="same features, p = 0 imposed",
        )
        names = names + ["Eq. 6 minimum,\np = 0"]
    ax.set_xticks(
        range(len(names)),
        [
            "\n".join(n.rsplit(" ", 1)) if len(n) > 10 and "\n" not in n else n
            for n in names
        ],
    )
    ax.set(
        ylabel="exact-batch rate",
        ylim=(0, 1.02),
        xlim=(-0.5, len(names) - 0.5),
        title=f"{NETWORK}, true labels, B = 8: exact label counts (95 % intervals)",
    )
    ax.grid(alpha=0.3, axis="y")
    ax.legend(ncols=3, loc="upper center", bbox_to_anchor=(0.5, -0.3), frameon=False)
    return legible(fig)


def batch_figure(bank, picks, labels, categories: Sequence[str]):
    """The images of one batch (``picks`` of (photograph, view)) with their true class names."""
    images = bank.views[picks[:, 0], picks[:, 1]]
    titles = [
        f"{categories[int(c)].split(',')[0][:16]}\n(photo {int(p)})"
        for c, p in zip(labels, picks[:, 0])
    ]
    return legible(show_grid(images, titles, ncols=4, scale=2.0))


def _row(quantity: str, setting: str, rate, differences: str, **extra) -> dict:
    return {
        "quantity": quantity,
        "setting": setting,
        "paper": "not reported",
        "this_run": round(rate.mean, 3),
        "unit": "fraction",
        **interval_fields(rate, 3),
        "differences": differences,
        **extra,
    }


def imagenet_rows(
    summary: Mapping,
    sweep: Mapping,
    counts: Sequence[int],
    cfg,
    profile: str,
    true_probability: float,
) -> list[dict]:
    """The results-record rows of the ImageNet setting: the headline — ours' exact-batch rate, judged by
    :data:`gitutor.results.VERDICT_RULE` against the paper's claim that the labels of all training data are
    inferred (1.0: its Fig. 4(a) batch has every count right), in the paper's kind of setting (an
    ImageNet-trained network, ImageNet photographs, true labels) —, ours on the batches with the right coarse
    set, the three count baselines (with ours − it, paired), Eq. 6 with p = 0 imposed (the diagnostic that
    explains the headline; the paper states no number for it) and ours per N of the sweep."""
    n, b = summary["trials"], cfg.batch_size
    setting = f"B = {b}, {n} batches from one bank of augmented views"
    low, high = summary["n_aux"]
    how = (
        f"{profile} profile: {NETWORK} (eval mode, 1 000 classes, {cfg.imagenet_size} px) for the paper's "
        f"ResNet34; foolbox's 20 ImageNet photographs with their true labels, a class repeated by augmented "
        f"views of its photograph; {low}–{high} auxiliary photographs not in the batch (paper: 40 web images)"
    )
    ours, capped = capped_rate(
        summary["exact"]["ours"], summary["short"], cfg.iterations
    )
    rows = [
        _row(
            "exact label counts, ours (Stage I), ImageNet-trained network, true labels (headline)",
            setting,
            ours,
            how + f"; B = {b} (paper's Fig. 4(a): one batch of 64); {capped}",
            paper=1.0,
            better="higher",
            headline=True,
            claim=CLAIM,
        )
    ]
    given = summary["given_coarse"]["ours"]
    if given is not None:
        rows.append(
            _row(
                "exact label counts, ours, given a correct coarse label set",
                f"B = {b}, {given.n} of {n} batches",
                given,
                "the counting step on its own, on the headline's batches",
            )
        )
    for name in BASELINES:
        paired = summary["paired"][name]
        rows.append(
            _row(
                f"exact label counts, {name}",
                setting,
                summary["exact"][name],
                f"the headline's batches; ours − {name}, paired: {format_interval(paired)}",
            )
        )
    if summary["premise"] is not None:
        rows.append(
            _row(
                "exact label counts, Eq. 6 minimum, same features with p = 0 imposed",
                setting,
                summary["premise"],
                "diagnostic: the gradient these features would give if the softmax "
                f"were 0 (the premise of Eq. 6); the network's mean p of the true class on the views is "
                f"{true_probability:.2f}; p = 0 − ours, paired: "
                f"{format_interval(summary['premise_paired'])}",
            )
        )
    for i, size in enumerate(cfg.imagenet_batch_sizes):
        if size != b:
            rate, capped = capped_rate(
                success_interval(sweep["ours"]["flags"][i]),
                sweep["ours"]["short"][i],
                cfg.iterations,
            )
            classes = max(
                2, min(int(size * cfg.sweep_class_fraction), cfg.imagenet_max_classes)
            )
            rows.append(
                _row(
                    "exact label counts, ours, batch-size sweep",
                    f"B = {size}, {counts[i]} batches",
                    rate,
                    f"the headline's setting; at most {classes} classes, at most "
                    f"{cfg.imagenet_views} views of a photograph; {capped}",
                )
            )
    return rows


def timing_row(seconds: float, images: int, threads: int) -> dict:
    """The wall-clock row of the ImageNet section's features (``images`` views and centre crops)."""
    return {
        "quantity": f"{NETWORK} features of the views and centre crops",
        "setting": f"{images} images",
        "paper": "not reported",
        "this_run": round(seconds, 1),
        "unit": "s",
        "differences": f"{threads} CPU thread(s), model loading included",
    }
