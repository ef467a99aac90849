"""What chapter 03 shows and records of Stage I in the paper's kind of setting
(:mod:`gitutor.chapters.cv_batch_labels.imagenet`): the headline table and figure, a batch of views, the sentences
the prose glues and the results-record rows, the chapter's headline among them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt

from gitutor.results import interval_fields
from gitutor.stats import format_interval, interval, sign_test, success_interval
from gitutor.tables import markdown_table
from gitutor.viz import interval_errorbars, legible, show_grid
from gitutor.chapters.cv_batch_labels.imagenet import BASELINES

#: The network, as the page and the record name it.
NETWORK = "ImageNet-trained EfficientNet-Lite0"

#: Ye et al.'s central claim for Stage I, in their words (the headline row's ``claim``).
CLAIM = (
    "labels of all training data can be rapidly (requires fewer than 200 iterations and takes less than 1 "
    "second) and accurately inferred (Ye et al. 2024, Methodology, Stage I. Label Inference)"
)


#: The largest mean softmax probability of the true class at which the paper's premise p ≈ 0 of Eq. 6 ("at the
#: beginning of training") is taken to hold (the book's bound; the paper states no number).
PREMISE_P = 0.1


def claim_judgement(
    exact,
    batch_size: int,
    premise=None,
    true_probability: float | None = None,
    sizes_run: Sequence[int] = (),
) -> tuple[str, str]:
    """``(claim_outcome, claim_reason)`` of :data:`CLAIM` from ours' exact-batch rate on the ImageNet network
    (``exact``: its Wilson 95 % interval). *Not comparable* when ``true_probability`` (the network's mean p of
    the true class) exceeds :data:`PREMISE_P`: the setting violates the paper's premise p ≈ 0, and ``premise``
    (Eq. 6's minimum with p = 0 imposed on the same features, an interval) is named in the reason. Otherwise
    *consistent* when the interval lies above ½ (most batches get every count right), *refuted* when it lies
    below ½, else *not resolved*. ``sizes_run``: the batch sizes run on this network (the reason says whether
    the paper's 64 is among them)."""
    said = (
        f"{round(exact.mean * exact.n)} of {exact.n} batches of {batch_size} get every count right (95 % "
        f"[{exact.low:.2f}, {exact.high:.2f}]) on {NETWORK}, true labels"
    )
    if true_probability is not None and true_probability > PREMISE_P:
        diagnostic = (
            ""
            if premise is None
            else f"; with p = 0 imposed on the same features Eq. 6's minimum is "
            f"exact in {premise.mean:.0%} [{premise.low:.0%}, {premise.high:.0%}] of the batches"
        )
        unrun = (
            ""
            if 64 in (batch_size, *sizes_run)
            else "; the paper's batch of 64 is not run on this network"
        )
        return "not comparable", (
            f"the setting violates the paper's stated premise, p ≈ 0 'at the beginning of "
            f"training' (Eq. 6): this trained network puts a mean p = {true_probability:.2f} "
            f"on a view's true class; {said}{diagnostic}{unrun}"
        )
    why = (
        ""
        if premise is None
        else f"; {premise.mean:.0%} with p = 0 imposed on the same features"
    )
    if exact.low > 0.5:
        return "consistent", f"{said}: most batches' labels are all inferred{why}"
    if exact.high < 0.5:
        return "refuted", f"{said}: most batches get some count wrong{why}"
    return (
        "not resolved",
        f"{said}: the interval holds ½; more batches would settle it{why}",
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
    """The results-record rows of the ImageNet setting: the headline (ours' exact-batch rate; not comparable: the
    paper shows one Fig. 4(a) batch of 64 with every label right and states no rate), ours on the batches with
    the right coarse set, the
    three count baselines (with ours − it, paired), Eq. 6 with p = 0 imposed, and ours per N of the sweep."""
    n, b = summary["trials"], cfg.batch_size
    setting = f"B = {b}, {n} batches"
    low, high = summary["n_aux"]
    how = (
        f"{profile} profile: {NETWORK} (eval mode, 1 000 classes, {cfg.imagenet_size} px) for the paper's "
        f"ResNet34; foolbox's 20 ImageNet photographs with their true labels, a class repeated by augmented "
        f"views of its photograph; {low}–{high} auxiliary photographs not in the batch (paper: 40 web images)"
    )
    ours = summary["exact"]["ours"]
    outcome, reason = claim_judgement(
        ours, b, summary["premise"], true_probability, cfg.imagenet_batch_sizes
    )
    rows = [
        _row(
            "exact label counts, ours (Stage I), ImageNet-trained network, true labels (headline)",
            setting,
            ours,
            how,
            paper="every count of its one Fig. 4(a) batch of 64 right (no rate stated)",
            headline=True,
            not_comparable=(
                "the paper shows one batch of 64 on its ResNet34, no rate; this run "
                f"measures B = {b} on {NETWORK} with augmented views"
            ),
            claim=CLAIM,
            claim_outcome=outcome,
            claim_reason=reason,
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
            rows.append(
                _row(
                    "exact label counts, ours, batch-size sweep",
                    f"B = {size}, {counts[i]} batches",
                    success_interval(sweep["ours"]["flags"][i]),
                    "the headline's setting; at most "
                    f"{max(2, min(int(size * cfg.sweep_class_fraction), cfg.imagenet_max_classes))} classes, "
                    f"at most {cfg.imagenet_views} views of a photograph",
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


def counting_sentence(summary: Mapping) -> str:
    """Where Stage I fails on the ImageNet network: the coarse set or the counts, and the p = 0 diagnostic."""
    given, premise = summary["given_coarse"]["ours"], summary["premise"]
    text = (
        f"The coarse label set was right in {summary['coarse_right']} of {summary['trials']} batches, so the "
        f"misses are the counting step's: given the right set, ours counts exactly in "
        f"{format_interval(given)} of the batches."
        if given is not None
        else "No batch had the right coarse label set."
    )
    if premise is not None:
        paired = summary["premise_paired"]  # p = 0 − ours on the same batches
        text += (
            f" With the same trained features and the softmax set to 0 (the premise of Eq. 6), the minimum of "
            f"Eq. 6 is exact in {format_interval(premise)} (p = 0 − ours, paired over the same batches: "
            f"{format_interval(paired, count=False)})"
            + (
                ": above the real gradient's rate beyond noise, so on these batches the network's confidence "
                "on its own classes, not its features, breaks the count."
                if paired.low > 0
                else "; this run does not separate it from the real gradient's rate."
            )
        )
    return text


def change_sentence(early: Mapping[str, Sequence[dict]], summary: Mapping) -> str:
    """The one sentence where the new setting changes the chapter's conclusion (old → new): the paired
    difference ours − bias count of exact batches on the random ResNet34 (``early``:
    :func:`~gitutor.chapters.cv_batch_labels.experiments.compare_methods`'s scores) and on the ImageNet network."""

    old = interval(
        [a["exact"] - b["exact"] for a, b in zip(early["ours"], early["bias count"])],
        bounds=(-1.0, 1.0),
    )
    old_only = (
        sum(
            a["exact"] > b["exact"] for a, b in zip(early["ours"], early["bias count"])
        ),
        sum(
            b["exact"] > a["exact"] for a, b in zip(early["ours"], early["bias count"])
        ),
    )
    new, new_only = summary["paired"]["bias count"], summary["discordant"]["bias count"]

    def word(
        d, only
    ):  # one rule for both settings: the interval and the exact sign test (p < 0.05)
        p = sign_test(*only)
        if d.low > 0 and p < 0.05:
            return "ours counts better than the bias count"
        if d.high < 0 and p < 0.05:
            return "the bias count counts better than ours"
        return "ours and the bias count are not separated"

    text = lambda d, only: (
        f"ours − bias count, paired: {format_interval(d, count=False)} over {d.n} batches, "
        f"exact for ours only: {only[0]}, for the bias count only: {only[1]}; exact sign "
        f"test p = {sign_test(*only):.2g}"
    )
    return (
        f"**Old setting → new:** on the random ResNet34 with random labels {word(old, old_only)} ({text(old, old_only)}); on "
        f"the {NETWORK} with true labels {word(new, new_only)} ({text(new, new_only)}). The two settings differ in the network, "
        "its training, the labels and how batches are built, so the change is consistent with — not shown to "
        "come from — a trained network's confidence on its own classes (the bias count's error N·p̄ₖ no longer "
        "below 1/2)."
    )


def sweep_sentence(
    sweep: Mapping[str, Mapping[str, Sequence]], batch_sizes: Sequence[int]
) -> str:
    """How ours' exact-batch rate moves from the smallest to the largest N of the ImageNet sweep, and which
    methods get no batch exact at any N, as a sentence."""
    ours = sweep["ours"]["exact"]
    text = (
        f"Ours gets {100 * ours[0]:.0f} % of the batches exact at N = {batch_sizes[0]} and "
        f"{100 * ours[-1]:.0f} % at N = {batch_sizes[-1]}."
    )
    never = [
        name
        for name, values in sweep.items()
        if not any(sum(f) for f in values["flags"])
    ]
    if never:
        text += f" No batch is exact at any N for: {', '.join(never)}."
    return text
