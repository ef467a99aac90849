"""What chapter 03 shows and records: the figures of Stage I of Ye et al. (AAAI 2024; Fig. 3's CV of
sorted features, the surface of Eq. 6, the search's progress, Fig. 4(a)'s label distribution, the batch-size
sweep, the effect of M and of the auxiliary images, random vs trained network), the Markdown tables and
sentences the chapter's prose pastes in (myst-nb ``glue``) and the paper-vs-run rows. Every figure function
returns its ``matplotlib`` figure."""
from __future__ import annotations

import inspect
import textwrap
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

from gitutor.labels import FeatureCV, evolve_label_counts, label_count_objective
from gitutor.stats import NOT_RESOLVED, compare, format_interval
from gitutor.studies.figures import interval_errorbars
from gitutor.tables import markdown_table


def row_size_figure(w: torch.Tensor, classes: torch.Tensor, true_counts: torch.Tensor):
    """Left: the row means of a ``(C, m)`` FC weight gradient; right: −row mean of each coarse class against
    its true count."""
    row_means = w[classes].mean(dim=1)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.2))
    axes[0].plot(w.mean(dim=1).numpy(), lw=0.6)
    axes[0].set(xlabel="class (row of ∇W^FC)", ylabel="row mean", title="negative rows = classes present")
    axes[1].scatter(true_counts.numpy(), -row_means.numpy())
    for count, mean, label in zip(true_counts.tolist(), (-row_means).tolist(), classes.tolist()):
        axes[1].annotate(str(label), (count, mean), fontsize=8)
    axes[1].set(xlabel="true number of images of the class", ylabel="− row mean",
                title="row size grows with the count, noisily")
    fig.tight_layout()
    return fig


def cv_figure(stats: FeatureCV):
    """Eq. 5 / Fig. 3: the CV of every sorted feature rank with the M selected ranks t, and the mean feature h̄."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.2))
    ranks, chosen = np.arange(len(stats.cv)), stats.indices.numpy()
    finite_cv = stats.cv[torch.isfinite(stats.cv)]
    axes[0].plot(ranks, stats.cv.numpy(), lw=1)
    axes[0].scatter(chosen, stats.cv[stats.indices].numpy(), color="C3", s=12, zorder=3,
                    label=f"t: the M = {len(chosen)} smallest CVs")
    axes[0].set(xlabel="sorted feature rank (0 = largest activation)", ylabel="CV = std / mean",
                title=f"CV of sorted features over {stats.num_aux} auxiliary images (cf. Fig. 3)",
                ylim=(0, min(float(finite_cv.max()), 3 * float(finite_cv.median())) * 1.05))
    axes[0].legend(fontsize=8)
    axes[1].plot(ranks, stats.mean_feature.numpy(), lw=1)
    axes[1].scatter(chosen, stats.mean_feature[stats.indices].numpy(), color="C3", s=12, zorder=3)
    axes[1].set(xlabel="sorted feature rank", ylabel="h̄", title="mean sorted feature h̄")
    fig.tight_layout()
    return fig


def surface_figure(v1, v2, surface, integer: torch.Tensor, on_line: torch.Tensor, truth: tuple[int, int]):
    """Eq. 6 for two classes: J on the ``(v1, v2)`` grid with the line v₁ + v₂ = N, and J at the integer
    candidates ``integer`` ``(k, 2)`` (values ``on_line``); ``truth`` is starred."""
    total = int(integer[0].sum())
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    image = axes[0].contourf(v1.numpy(), v2.numpy(), surface.numpy(), levels=30, cmap="viridis")
    fig.colorbar(image, ax=axes[0], label="J(v)")
    low, high = float(v1.min()), total - float(v1.min())
    axes[0].plot([low, high], [high, low], color="white", lw=1, label=f"v₁ + v₂ = {total}")
    axes[0].scatter(integer[:, 0], integer[:, 1], color="white", s=12)
    axes[0].scatter([truth[0]], [truth[1]], color="C3", marker="*", s=120, label=f"truth {truth}")
    axes[0].set(xlabel="v₁", ylabel="v₂", title="J is constant along rays")
    axes[0].legend(fontsize=8, loc="upper right")
    axes[1].bar([f"({a},{b})" for a, b in integer.tolist()], on_line.numpy())
    axes[1].set(xlabel=f"counts (v₁, v₂) with v₁ + v₂ = {total}", ylabel="J(v)", yscale="log",
                title="the integer candidates")
    fig.tight_layout()
    return fig


def history_figure(histories: Mapping[str, Sequence[float]]):
    """Best J of the population against the generation, one curve per search."""
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    for name, history in histories.items():
        ax.plot(history, label=name)
    ax.set(xlabel="generation", ylabel="best J(v) in the population", yscale="log", title="objective vs generation")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def distribution_figure(labelings: Mapping[str, torch.Tensor], num_classes: int):
    """Fig. 4(a): images per class of each ``(N,)`` labelling, side by side, over every class any of them holds."""
    shown = torch.unique(torch.cat(list(labelings.values())))
    positions, width = np.arange(len(shown)), 0.8 / len(labelings)
    fig, ax = plt.subplots(figsize=(11, 3.2))
    for index, (name, labels) in enumerate(labelings.items()):
        counts = torch.bincount(labels, minlength=num_classes)[shown]
        ax.bar(positions + (index - (len(labelings) - 1) / 2) * width, counts.numpy(), width=width, label=name)
    ax.set_xticks(positions, [str(c) for c in shown.tolist()], rotation=90, fontsize=7)
    batch = len(next(iter(labelings.values())))
    ax.set(xlabel="class", ylabel="images in the batch", title=f"label distribution of a batch of {batch}")
    ax.legend(fontsize=8)
    return fig


def curves_figure(panels: Sequence[tuple[str, str, Sequence, Mapping[str, Sequence[float]]]], ylim=None):
    """One log-x panel per ``(xlabel, ylabel, xs, {curve name: values at xs})``, legend in the first panel."""
    fig, axes = plt.subplots(1, len(panels), figsize=(4.4 * len(panels), 3.2), squeeze=False)
    for ax, (xlabel, ylabel, xs, curves) in zip(axes[0], panels):
        for name, values in curves.items():
            ax.plot(list(xs), values, marker="o", label=name)
        ax.set(xscale="log", xlabel=xlabel, ylabel=ylabel, **({"ylim": ylim} if ylim else {}))
        ax.set_xticks(list(xs), [str(x) for x in xs])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    return fig


def generation_loop_source() -> str:
    """The generation loop of :func:`~gitutor.labels.evolve_label_counts` (crossover and Rs, mutation, Eq. 6 for
    the population, Eq. 8's selection), dedented, as printed on the page.

    Raises:
        RuntimeError: if the loop is no longer found in the function's source.
    """
    source = inspect.getsource(evolve_label_counts)
    start = source.find("\n    for _ in tqdm") + 1
    end = source.find("\n    return LabelCountSearch(", start) + 1  # the return after the loop
    if start == 0 or end <= start:
        raise RuntimeError("the generation loop of evolve_label_counts was not found in its source")
    return textwrap.dedent(source[start:end]).rstrip()


def objective_surface(w: torch.Tensor, classes: torch.Tensor, stats: FeatureCV, total: int, points: int = 160):
    """Eq. 6 for a two-class batch: ``(v1, v2, J on the (points, points) grid of counts in [0.2, total],
    integer candidates (total − 1, 2) with v₁ + v₂ = total, J at them)``, the inputs of :func:`surface_figure`.

    Raises:
        ValueError: if ``classes`` does not hold exactly two classes.
    """
    if len(classes) != 2:
        raise ValueError(f"classes must hold the two coarse labels of a two-class batch, got {len(classes)}")
    grid = torch.linspace(0.2, float(total), points, dtype=torch.float64)
    v1, v2 = torch.meshgrid(grid, grid, indexing="ij")
    surface = label_count_objective(torch.stack([v1, v2], dim=-1), w, classes, stats)
    integer = torch.tensor([[n, total - n] for n in range(1, total)])
    return v1, v2, surface, integer, label_count_objective(integer, w, classes, stats)


def labelings_table(labelings: Mapping[str, Sequence[int] | torch.Tensor]) -> str:
    """Markdown table: one line per method with its labels, sorted (a multiset of classes)."""
    listed = lambda labels: ", ".join(str(c) for c in sorted(torch.as_tensor(labels).tolist()))
    return markdown_table(["", "labels (sorted)"], [[name, listed(labels)] for name, labels in labelings.items()])


def methods_table(scores: Mapping[str, Sequence[dict]], summary) -> str:
    """Markdown table: per method its mean per-label accuracy and exact-batch rate (``summary`` of its scores)."""
    return markdown_table(["method", "per-label accuracy", "exact batches"],
                          [[name, f"{summary(values)[0]:.3f}", f"{summary(values)[1]:.2f}"]
                           for name, values in scores.items()])


def failures_table(failures: Sequence[tuple[Sequence[int], Sequence[int]]]) -> str:
    """Markdown table of the batches where Eq. 6's minimum is not the truth: true counts, the minimum, how many
    images it moves, and whether the largest class gains; a sentence when there is none."""
    if not failures:
        return "In every batch with the right coarse labels the minimum of Eq. 6 is the truth."
    lines = [[", ".join(map(str, truth)), ", ".join(map(str, best)), int(np.abs(np.subtract(truth, best)).sum()) // 2,
              "yes" if best[int(np.argmax(truth))] > max(truth) else "no"] for truth, best in failures]
    return markdown_table(["true counts", "Eq. 6 minimum", "images moved", "largest class gains"], lines)


def mean_percent(values: Sequence[float]) -> str:
    """``"23 %"``: the mean of ``values`` as a percentage, or ``"n/a"`` when there is none."""
    return f"{100 * float(np.mean(values)):.0f} %" if len(values) else "n/a"


def sweep_table(sweep: Mapping[str, Mapping[str, Sequence[float]]], seconds: Sequence[float],
                batch_sizes: Sequence[int]) -> str:
    """Markdown table of :func:`~gitutor.studies.cv_batch_labels.batch_size_sweep`: per batch size N the per-label
    accuracy of every method, the exact-batch rate of ours and ours' milliseconds per recovery."""
    header = ["N", *(f"accuracy, {name}" for name in sweep), "exact batches, ours", "ms per recovery"]
    lines = [[n, *(f"{sweep[name]['accuracy'][i]:.3f}" for name in sweep), f"{sweep['ours']['exact'][i]:.2f}",
              f"{1000 * seconds[i]:.0f}"] for i, n in enumerate(batch_sizes)]
    return markdown_table(header, lines)


def sweep_figure(sweep: Mapping[str, Mapping[str, Sequence[float]]], seconds: Sequence[float],
                 batch_sizes: Sequence[int]):
    """Per-label accuracy and exact-batch rate of every method, and ours' ms per recovery, against the batch
    size (:func:`curves_figure` of :func:`~gitutor.studies.cv_batch_labels.batch_size_sweep`)."""
    n = "batch size N"
    return curves_figure([(n, "per-label accuracy", batch_sizes, {k: v["accuracy"] for k, v in sweep.items()}),
                          (n, "exact-batch rate", batch_sizes, {k: v["exact"] for k, v in sweep.items()}),
                          (n, "ms per recovery (ours)", batch_sizes, {"ours": [1000 * s for s in seconds]})])


def effects_figure(by_m: Mapping[int, tuple[float, float]], by_aux: Mapping[int, tuple[float, float]]):
    """Per-label accuracy and exact-batch rate of Eq. 6's minimum against M and against the number of auxiliary
    images (:func:`~gitutor.studies.cv_batch_labels.aux_and_m_effects`)."""
    panels = [(xlabel, "", list(results), {"per-label accuracy": [r[0] for r in results.values()],
                                           "exact batches": [r[1] for r in results.values()]})
              for results, xlabel in ((by_m, "M (ranks with the smallest CV)"), (by_aux, "auxiliary images"))]
    return curves_figure(panels, ylim=(0, 1.02))


def effects_table(by_m: Mapping[int, tuple[float, float]], by_aux: Mapping[int, tuple[float, float]]) -> str:
    """Markdown table of :func:`~gitutor.studies.cv_batch_labels.aux_and_m_effects`: per setting the per-label
    accuracy and the exact-batch rate of Eq. 6's minimum."""
    lines = [[f"M = {m}", f"{a:.3f}", f"{e:.2f}"] for m, (a, e) in by_m.items()]
    lines += [[f"{n} auxiliary images", f"{a:.3f}", f"{e:.2f}"] for n, (a, e) in by_aux.items()]
    return markdown_table(["setting", "per-label accuracy", "exact batches"], lines)


def paper_rows(cfg, profile: str, *, accuracy: float, exact: float, exact_exhaustive: float, yin_accuracy: float,
               figure_accuracy: float, figure_classes: int, settled: int) -> list[dict]:
    """The results record's rows (see :mod:`gitutor.results`): ours at B = ``cfg.batch_size`` (per-label accuracy,
    exact-batch rate against Eq. 6's exhaustive minimum), ours on the Fig. 4(a) batch of ``figure_classes``
    classes against the paper's "all 64 labels right", Yin et al., and the generation at which the search settled."""
    model = "pretrained ResNet34" if cfg.pretrained else "random ResNet34"
    differences = (f"{profile} profile: {model} (eval mode), {cfg.image_size}×{cfg.image_size} crops of bundled "
                   "photographs, random labels" if profile == "quick" else "full profile: ImageNet validation images")
    big = f"B = {cfg.figure_batch_size}"
    return [
        {"quantity": "per-label accuracy, ours", "setting": f"B = {cfg.batch_size}, repeats over ≤ {cfg.max_classes} classes",
         "paper": "all labels right (Fig. 4a, B = 64)", "this_run": round(accuracy, 3), "unit": "fraction",
         "differences": differences + f"; {cfg.trials} batches"},
        {"quantity": "exact-batch rate, ours", "setting": f"B = {cfg.batch_size}", "paper": "not reported",
         "this_run": round(exact, 2), "unit": "fraction", "differences": f"Eq. 6 exhaustive minimum: {exact_exhaustive:.2f}"},
        {"quantity": "per-label accuracy, ours", "setting": f"{big} (Fig. 4a)", "paper": 1.0,
         "this_run": round(figure_accuracy, 3), "unit": "fraction", "better": "higher",
         "differences": differences + f"; {figure_classes} classes in the batch; paper: all 64 labels right"},
        {"quantity": "per-label accuracy, Yin et al.", "setting": f"B = {cfg.batch_size}, repeated labels",
         "paper": "poor (Fig. 4a)", "this_run": round(yin_accuracy, 3), "unit": "fraction", "differences": differences},
        {"quantity": "generations to converge", "setting": big, "paper": 200, "this_run": settled,
         "unit": "generations", "better": "lower", "differences": differences + "; paper: fewer than 200"},
    ]


def counts_text(counts: Sequence[int] | torch.Tensor) -> str:
    """``"(5, 3)"``: a count vector as the prose writes it."""
    return "(" + ", ".join(str(int(c)) for c in torch.as_tensor(counts).tolist()) + ")"


def surface_note(best: Sequence[int], truth: Sequence[int]) -> str:
    """The sentence under the two-class surface: whether the minimum on the constraint line is the truth."""
    if list(best) == list(truth):
        return "is the truth."
    return ("is not the truth: on this batch the objective itself misses, a failure of the kind "
            "analysed below.")


def agreement_sentence(agree: int, trials: int) -> str:
    """Whether the evolutionary search found Eq. 6's exhaustive minimum in every one of ``trials`` batches."""
    if agree == trials:
        return ("The search found that minimum in every batch, so the remaining errors are the "
                "**objective's**, not the search's.")
    return (f"The search found that minimum in {agree} of {trials} batches; in the others it stopped "
            "short of it.")


#: Row names of the random-vs-trained table, by the keys of
#: :func:`~gitutor.studies.cv_batch_labels.substitute_networks` (plus ``"chapter"``: the ResNet34 above).
NETWORK_NAMES = {"chapter": "ResNet34, random (the network above)", "random": "ResNet-20, random",
                 "trained": "ResNet-20, trained substitute",
                 "trained, new head": "ResNet-20, trained features, new head"}


def networks_table(summaries: Mapping[str, Mapping]) -> str:
    """Markdown table of :func:`~gitutor.studies.cv_batch_labels.comparison_summary` per network (keys of
    :data:`NETWORK_NAMES`): classes, input size, batches with the right coarse label set, mean top softmax
    probability, mean CV at the kept ranks, mean per-label accuracy and the exact-batch rate with its 95 %
    interval."""
    header = ["network", "classes", "input", "coarse set right", "mean top p", "CV at t",
              "per-label accuracy", "exact batches"]
    lines = [[NETWORK_NAMES.get(key, key), s["classes"], f"{s['image_size']} px",
              f"{s['coarse_right']} / {s['trials']}", f"{s['top_probability']:.2f}", f"{s['kept_cv']:.2f}",
              f"{s['accuracy'].mean:.2f}", format_interval(s["exact"])] for key, s in summaries.items()]
    return markdown_table(header, lines)


def networks_figure(summaries: Mapping[str, Mapping]):
    """Exact-batch rate of ours per network with its 95 % interval (error bars)."""
    names = [NETWORK_NAMES.get(key, key).replace(", ", ",\n", 1) for key in summaries]
    fig, ax = plt.subplots(figsize=(7.5, 3.2))
    interval_errorbars(ax, list(range(len(names))), [s["exact"] for s in summaries.values()], linestyle="none")
    ax.set_xticks(range(len(names)), names, fontsize=8)
    ax.set(ylabel="exact-batch rate", ylim=(0, 1), xlim=(-0.5, len(names) - 0.5),
           title="Stage I, B = 8: exact batches with 95 % intervals")
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return fig


def difference_sentence(summaries: Mapping[str, Mapping], first: str, second: str) -> str:
    """Whether the exact-batch rates of networks ``first`` and ``second`` differ beyond noise
    (:func:`~gitutor.stats.compare`: only when the 95 % intervals do not overlap), as a sentence.

    Raises:
        KeyError: if a name is not in ``summaries``.
    """
    names = (NETWORK_NAMES.get(first, first), NETWORK_NAMES.get(second, second))
    verdict = compare(summaries[first]["exact"], summaries[second]["exact"], names)
    if verdict == NOT_RESOLVED:
        return (f"the 95 % intervals of the {names[0]} and the {names[1]} overlap, so this run does not "
                "resolve a difference between them")
    higher, lower = verdict.split(" > ") if " > " in verdict else reversed(verdict.split(" < "))
    return f"the {higher} recovers more batches exactly than the {lower} (the 95 % intervals do not overlap)"


def substitute_rows(summaries: Mapping[str, Mapping], cfg, profile: str) -> list[dict]:
    """Results-record rows (no paper number: the paper does not report an exact-batch rate) for every network
    of the random-vs-trained comparison except ``"chapter"`` (already a row of :func:`paper_rows`)."""
    rows = []
    for key, s in summaries.items():
        if key == "chapter":
            continue
        rows.append({"quantity": f"exact-batch rate, ours, {NETWORK_NAMES.get(key, key)}",
                     "setting": f"B = {cfg.batch_size}, {s['trials']} batches", "paper": "not reported",
                     "this_run": round(s["exact"].mean, 2), "unit": "fraction",
                     "differences": (f"{profile} profile: 95 % interval [{s['exact'].low:.2f}, "
                                     f"{s['exact'].high:.2f}]; {s['classes']} classes, {s['image_size']}-px "
                                     "crops of photographs the substitute never saw; paper: pretrained "
                                     "ResNet34 on ImageNet")})
    return rows


def spread_sentence(spread: Mapping[str, Sequence[float]]) -> str:
    """Whether Eq. 6's premise (a_k / n_k equal across a batch's classes) held: the mean spread (std / mean of
    a_k / n_k, :func:`~gitutor.studies.cv_batch_labels.compare_methods`'s ``spread``) in the failed against the
    exact batches, or a sentence saying that no batch failed."""
    if not spread["failed"]:
        return "No batch with the right coarse labels failed here, so this run does not show where it breaks."
    return (f"It holds only roughly: the spread (std / mean) of aₖ/nₖ across a batch's classes is "
            f"{mean_percent(spread['failed'])} in the failed batches against {mean_percent(spread['exact'])} "
            "in the exact ones.")


def chapter_timings(cfg, device, *, recovery_seconds: float, feature_seconds: float, images: int,
                    threads: int) -> list[dict]:
    """The wall-clock rows of the results record (``save_results(..., timings=...)``): ours' mean seconds per
    recovery at B = ``cfg.batch_size`` (the paper: less than 1 s) and the seconds of ResNet34's features of
    ``images`` attacked and auxiliary images (``device`` a ``torch.device``)."""
    where = "CPU, shared machine" if device.type == "cpu" else "GPU"
    return [
        {"quantity": "time per recovery", "setting": f"B = {cfg.batch_size}, {cfg.population} × {cfg.iterations}",
         "paper": 1, "this_run": round(recovery_seconds, 3), "unit": "s", "better": "lower",
         "differences": f"paper: less than 1 s; {where}"},
        {"quantity": "ResNet34 features of the attacked and auxiliary images", "setting": f"{images} images",
         "paper": "not reported", "this_run": round(feature_seconds, 1), "unit": "s",
         "differences": f"{threads} CPU threads" if device.type == "cpu" else "GPU"},
    ]


def network_values(summaries: Mapping[str, Mapping]) -> dict[str, float | int]:
    """The numbers the random-vs-trained prose glues, per network key of :data:`NETWORK_NAMES` written with
    underscores (``"trained, new head"`` → ``trained_new_head``): ``sub_<key>_exact`` / ``_low`` / ``_high``
    (exact-batch rate and its 95 % interval, in %), ``_cv`` (mean CV at the kept ranks), ``_p`` (mean top
    softmax probability) and ``_coarse`` (batches with the right coarse label set)."""
    values = {}
    for key, s in summaries.items():
        name = "sub_" + key.replace(", ", "_").replace(" ", "_")
        values |= {f"{name}_exact": 100 * s["exact"].mean, f"{name}_low": 100 * s["exact"].low,
                   f"{name}_high": 100 * s["exact"].high, f"{name}_cv": s["kept_cv"],
                   f"{name}_p": s["top_probability"], f"{name}_coarse": s["coarse_right"]}
    return values
