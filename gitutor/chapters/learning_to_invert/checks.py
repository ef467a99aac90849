"""Chapter 06's checks of its own verdicts (Wu et al. 2022, Table 1, Fig. 3a, Table 2).

- :func:`paired_comparison`: LTI against Inverting Gradients on the *same* target batches, judged by
  the 95 % interval of the per-batch differences LTI − IG (paired: the targets' own difficulty
  cancels), per defense.
- :func:`input_scale_check`: why an undefended g_θ can come out *worse* than one under sign
  compression — the size of its input coordinates — measured by training g_θ on raw features.
- :func:`ood_reference`: Table 2 read against the reference that ignores the gradient, the mean
  auxiliary image, per target.

Intervals of MSE lie in [0, 1] and of MSE differences in [−1, 1]
(:func:`gitutor.stats.interval` with ``bounds``).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from gitutor.attacks.lti import reconstruct
from gitutor.metrics import mse
from gitutor.stats import NOT_RESOLVED, Interval, format_interval, interval
from gitutor.tables import markdown_table

#: The defended settings of Table 1 (the comparisons the paper's claim is about).
DEFENDED = ("sign", "prune", "gauss")


def difference_verdict(summary: Interval, names: tuple[str, str] = ("LTI", "IG")) -> str:
    """``"A < B"`` when the 95 % interval of the paired differences A − B lies below 0, ``"A > B"``
    when it lies above, else :data:`gitutor.stats.NOT_RESOLVED`."""
    if summary.high < 0:
        return f"{names[0]} < {names[1]}"
    return f"{names[0]} > {names[1]}" if summary.low > 0 else NOT_RESOLVED


def paired_comparison(cells: Mapping, model: str, names: Mapping[str, str], batch_size: int = 1) -> dict:
    """LTI against Inverting Gradients per defense on the target batches both attacked
    (:meth:`~gitutor.chapters.learning_to_invert.experiments.Comparison.per_batch_mse`), paired.

    Returns:
        ``intervals`` ``{(defense, method): Interval}`` of the per-batch MSE (method ``"IG"``,
        ``"LTI"``, ``"LTI − IG"``), ``verdicts`` ``{defense: "LTI < IG" | "LTI > IG" | NOT_RESOLVED}``,
        ``wins`` (how many of :data:`DEFENDED` read "LTI < IG"), ``n`` (batches), ``table``
        (Markdown) and ``defended`` (text: ``"sign comp.: LTI < IG; …"``).

    With one batch the intervals span the whole range and nothing is resolved.
    """
    intervals, verdicts = {}, {}
    for d in names:
        ig, lti = (cells[model, batch_size, d].per_batch_mse(m) for m in ("IG", "LTI"))
        intervals[d, "IG"], intervals[d, "LTI"] = (interval(v, bounds=(0.0, 1.0)) for v in (ig, lti))
        intervals[d, "LTI − IG"] = interval([a - b for a, b in zip(lti, ig)], bounds=(-1.0, 1.0))
        verdicts[d] = difference_verdict(intervals[d, "LTI − IG"])
    n = intervals[next(iter(names)), "IG"].n
    table = markdown_table(["defense", "IG", "LTI", "LTI − IG (paired)", "comparison"],
                           [[names[d], *(format_interval(intervals[d, m], 4, count=False)
                                         for m in ("IG", "LTI", "LTI − IG")), verdicts[d]] for d in names])
    return {"intervals": intervals, "verdicts": verdicts, "n": n, "table": table,
            "wins": sum(verdicts[d] == "LTI < IG" for d in DEFENDED),
            "defended": "; ".join(f"{names[d]}: {verdicts[d]}" for d in DEFENDED)}


def smallest_aux_paired(errors: Mapping[str, Sequence[Sequence[float]]], cells: Mapping, model: str,
                        names: Mapping[str, str]) -> dict:
    """Does g_θ trained on the smallest auxiliary set still beat IG? Per defense of :data:`DEFENDED`, the
    paired differences of its per-target MSE (``errors[d][0]``, every held-out target, from
    :func:`~gitutor.chapters.learning_to_invert.experiments.aux_size_errors`) and IG's on the targets IG attacked.

    Returns:
        ``verdicts`` ``{defense: str}``, ``wins`` (how many read "LTI < IG") and ``defended`` (text).
    """
    verdicts = {}
    for d in DEFENDED:
        ig = cells[model, 1, d].per_batch_mse("IG")
        verdicts[d] = difference_verdict(interval([a - b for a, b in zip(errors[d][0], ig)], bounds=(-1.0, 1.0)))
    return {"verdicts": verdicts, "wins": sum(v == "LTI < IG" for v in verdicts.values()),
            "defended": "; ".join(f"{names[d]}: {verdicts[d]}" for d in DEFENDED)}


def held_out_errors(cell) -> list[float]:
    """Per-target MSE of a B = 1 cell's LTI reconstructions of every held-out target."""
    return mse(cell.lti_images[:, 0], cell.truth[:, 0]).tolist()


def input_scale_check(setup, aux_features: Mapping[str, torch.Tensor], aux_x: torch.Tensor, cells: Mapping,
                      model: str, names: Mapping[str, str], defenses: Sequence[str] = ("none", "sign")) -> dict:
    """Why can the undefended g_θ be *worse* than the sign-compressed one? For each of ``defenses``:
    the mean size of a gradient-feature coordinate (``aux_features[d]`` ``(N, k)``), and the held-out
    MSE of g_θ trained on the raw features (as Wu et al.), of Table 1's g_θ (input standardised,
    ``setup.cfg.standardise``) and of a standardised g_θ trained twice as many epochs — same
    auxiliary pairs, same targets.

    Returns:
        ``size`` ``{d: float}``, ``raw`` / ``standardised`` / ``longer`` ``{d: Interval}`` (per-target
        MSE over every held-out target, in [0, 1]), ``verdicts`` ``{kind: str}`` (paired
        ``defenses[0]`` − ``defenses[1]``: ``"none > sign"`` is the anomaly), ``table`` (Markdown) and
        ``sentence`` (what the verdicts say, for the page).

    Table 1's g_θ is reused for whichever variant its profile trained (``cfg.standardise``); the
    other two are trained here.
    """
    cfg = setup.cfg
    variants = {"raw": cfg.replace(standardise=False), "standardised": cfg.replace(standardise=True),
                "longer": cfg.replace(standardise=True, epochs=2 * cfg.epochs)}
    table1 = "standardised" if cfg.standardise else "raw"
    errors = {kind: {} for kind in variants}
    for d in defenses:
        truth, observed = cells[model, 1, d].truth[:, 0], cells[model, 1, d].features
        errors[table1][d] = held_out_errors(cells[model, 1, d])
        for kind, variant in variants.items():
            if kind == table1:
                continue
            other = type(setup)(variant, setup.seed, setup.device, setup.progress, setup.image_shape)
            inversion, _ = other.fit(aux_features[d], aux_x[:, None], 1)
            errors[kind][d] = mse(reconstruct(inversion, observed).images[:, 0], truth).tolist()
    size = {d: float(aux_features[d].abs().mean()) for d in defenses}
    summary = {kind: {d: interval(errors[kind][d], bounds=(0.0, 1.0)) for d in defenses} for kind in errors}
    first, second = defenses[0], defenses[1]
    verdicts = {kind: difference_verdict(interval([a - b for a, b in zip(errors[kind][first],
                                                                                  errors[kind][second])], bounds=(-1.0, 1.0)),
                                         (first, second)) for kind in errors}
    header = ["defense", "mean abs. feature", f"raw, {cfg.epochs} epochs", f"standardised, {cfg.epochs}",
              f"standardised, {2 * cfg.epochs}"]
    header[2 if table1 == "raw" else 3] += " (Table 1)"
    rows = [[names[d], f"{size[d]:.3f}", *(format_interval(summary[k][d], 4, count=False) for k in errors)]
            for d in defenses]
    rows.append([f"paired {first} − {second}", "", *(verdicts[k] for k in errors)])
    anomaly, a, b = f"{first} > {second}", f"“{names[first]}”", f"“{names[second]}”"
    if verdicts["raw"] == anomaly and verdicts["longer"] != anomaly:
        sentence = (f"The inverse for {a} is the slower one to train: with enough training the gap closes, so a "
                    f"lower MSE under {b} says how far training has got, not that the defense helps the attacker.")
    elif verdicts["longer"] == anomaly:
        sentence = (f"Even with twice the epochs the inverse for {a} stays behind the one for {b}: in this run "
                    f"{b} does not hurt LTI, and the rest of the gap is not explained by the input's size or "
                    "the training length measured here.")
    else:
        sentence = f"Here the inverse for {a} is not behind the one for {b} beyond noise."
    return {"size": size, **summary, "verdicts": verdicts, "table": markdown_table(header, rows),
            "sentence": sentence}


def ood_reference(table2_errors: Mapping[str, Mapping[str, Sequence[float]]], reference: Sequence[float],
                  names: Mapping[str, str]) -> dict:
    """Table 2 against the mean-image reference: per defense and auxiliary set, the paired per-target
    differences MSE(LTI) − MSE(mean OOD auxiliary image) (``reference``, per target).

    Returns:
        ``verdicts`` ``{(defense, variant): "beats the mean image" | "worse than the mean image" |
        NOT_RESOLVED}``, ``reference`` (its Interval), ``table`` (Markdown: MSE [95 %] per cell and
        the reference row), ``beats`` ``{variant: how many defenses beat the reference}`` and
        ``sentence`` (what that says, for the page; the last variant is LTI-OOD).
    """
    words = {"LTI < mean": "beats the mean image", "LTI > mean": "worse than the mean image"}
    variants = list(next(iter(table2_errors.values())))
    verdicts, cells = {}, {}
    for d, by_variant in table2_errors.items():
        for v in variants:
            diffs = [a - b for a, b in zip(by_variant[v], reference)]
            verdict = difference_verdict(interval(diffs, bounds=(-1.0, 1.0)), ("LTI", "mean"))
            verdicts[d, v] = words.get(verdict, verdict)
            cells[d, v] = f"{format_interval(interval(by_variant[v], bounds=(0.0, 1.0)), 4, count=False)}: {verdicts[d, v]}"
    ref = interval(reference, bounds=(0.0, 1.0))
    rows = [[v] + [cells[d, v] for d in table2_errors] for v in variants]
    rows.append(["mean OOD auxiliary image (ignores the gradient)"]
                + [format_interval(ref, 4, count=False)] * len(table2_errors))
    table = markdown_table(["auxiliary set", *(names[d] for d in table2_errors)], rows)
    beats = {v: sum(verdicts[d, v] == words["LTI < mean"] for d in table2_errors) for v in variants}
    n, lti_ood = len(table2_errors), variants[-1]
    if beats[lti_ood] == n:
        sentence = "So LTI-OOD reads something about targets of classes it never saw under every defense."
    elif beats[lti_ood] == 0:
        sentence = ("So under no defense does LTI-OOD beat the image that ignores the gradient: an inverse "
                    "trained on the other digits draws their strokes, and for a digit it never saw that is "
                    "no closer than the blurry mean image.")
    else:
        sentence = (f"So LTI-OOD reads something about targets of unseen classes under {beats[lti_ood]} of the "
                    f"{n} defenses, and under the others no more than the image that ignores the gradient.")
    return {"verdicts": verdicts, "reference": ref, "table": table, "beats": beats, "sentence": sentence}
