"""Chapter 08's DP-SGD curve: attack PSNR along the σ sweep, the one-start Inverting Gradients beside the
envelope of the strongest adversary (:func:`~gitutor.chapters.flower_dp.strongest.sweep_strongest`: the
attacker's, and the oracle's upper bound); its figure, its table, and the σ / ε from which no photograph
is recognisable, written as a bound where the sweep does not locate it; the noise's norm there in units of
the clipping norm, and the budget check at it (:func:`budget_point`, :func:`budget_words`).

``along`` is aligned with the sweep's ``points``: the envelope run at that σ, or None where the one-start
IG already recovered every attacked client (there the envelope was not run: the defense failed anyway).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt

from gitutor.chapters.flower_dp.report import eps_text, flat_words, label_text
from gitutor.checks import check_choice, check_int, check_real
from gitutor.paired import paired_difference
from gitutor.stats import format_interval
from gitutor.tables import markdown_table
from gitutor.viz import interval_errorbars, legible

#: The two envelopes of :func:`~gitutor.chapters.flower_dp.strongest.envelope`, as the page names them.
ENVELOPES = {
    "attacker": "the attacker's envelope",
    "oracle": "the oracle envelope (an upper bound on these adversaries)",
}


def _check(
    points: Sequence[dict], along: Sequence[dict | None], which: str | None = None
) -> None:
    """``points`` a non-empty sweep (each point a mapping with a real ``sigma`` ≥ 0), ``along`` aligned
    with it, ``which`` None or a key of :data:`ENVELOPES`.

    Raises:
        TypeError: naming ``points``, ``along`` or ``which`` when of the wrong kind.
        ValueError: naming ``points`` (empty, or a point without a σ ≥ 0), ``along`` (another length) or
            ``which`` (unknown).
    """
    for name, value in (("points", points), ("along", along)):
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
            raise TypeError(
                f"{name} must be a list, one entry per σ of the sweep, got {type(value).__name__}"
            )
    if not points:
        raise ValueError(
            "points must hold at least one point of the sweep (dp_point), got none"
        )
    for i, point in enumerate(points):
        if not isinstance(point, Mapping) or "sigma" not in point:
            raise ValueError(
                f"points[{i}] must be a sweep point (dp_point) with its 'sigma'"
            )
        check_real(point["sigma"], f"points[{i}]['sigma']", low=0.0)
    if len(along) != len(points):
        raise ValueError(
            f"along must hold one entry per point: {len(along)} for {len(points)}"
        )
    if which is not None:
        check_choice(which, "which", tuple(ENVELOPES))


def recognised(point: dict, found: dict | None, which: str) -> int:
    """Photographs recognisable at one σ under the ``which`` envelope; where it was not run (``found``
    None) the one-start IG's count, which recovered every client there."""
    return point["recognised"] if found is None else found[which]["recognised"]


def threshold(
    points: Sequence[dict], along: Sequence[dict | None], which: str
) -> tuple[int | None, int | None]:
    """The sweep's bracket of the σ from which the ``which`` envelope recognises no photograph, as
    indices into ``points``: ``(below, at)``, ``at`` the smallest σ run from which no larger σ run
    recognises one (None if the largest still does), ``below`` the σ run just under it (None if ``at``
    is the smallest σ run).

    Raises:
        ValueError: for empty ``points`` (or a point without a σ ≥ 0), ``along`` not aligned with
            ``points`` or an unknown ``which`` (:func:`_check`).
        TypeError: for ``points``/``along`` that are not lists or a ``which`` that is not a string.
    """
    _check(points, along)
    check_choice(which, "which", tuple(ENVELOPES))
    order = sorted(range(len(points)), key=lambda i: points[i]["sigma"])
    at = None
    for i in reversed(order):
        if recognised(points[i], along[i], which):
            break
        at = i
    if at is None:
        return order[-1], None
    place = order.index(at)
    return (order[place - 1] if place else None), at


def _sigma(p: dict) -> str:
    return f"σ = {p['sigma']:g} (ε = {eps_text(p['epsilon'])})"


def threshold_sentence(
    points: Sequence[dict], along: Sequence[dict | None], which: str
) -> str:
    """Where the ``which`` envelope stops recognising any photograph, in words that say how far the sweep
    locates it (:func:`threshold`): inside (a, b] between two σ run; a bound at the sweep's edge — in
    (0, b] when b is the smallest σ > 0 run (ε ≥ b's), above the largest σ when that still recognises
    one; nothing when even σ = 0 recognises none."""
    i, j = threshold(points, along, which)
    who, n = ENVELOPES[which], points[0]["images"]
    if j is None:
        return (
            f"No σ tried stops {who}: at the largest, {_sigma(points[i])}, it still recognises "
            f"{recognised(points[i], along[i], which)} of {n} photographs, so the threshold lies above the "
            f"sweep — a bound: **σ > {points[i]['sigma']:g}, ε < {eps_text(points[i]['epsilon'])}**."
        )
    at = points[j]
    if at["sigma"] == 0:
        return (
            f"{who[0].upper() + who[1:]} recognises no photograph even without noise (σ = 0): the sweep "
            "says nothing about ε."
        )
    if i is None or points[i]["sigma"] == 0:
        return (
            f"From {_sigma(at)} on, the smallest σ > 0 run, {who} recognises none of the {n} photographs: "
            f"the threshold lies somewhere in σ ∈ (0, {at['sigma']:g}], which this sweep bounds and does "
            f"not locate — **ε ≥ {eps_text(at['epsilon'])}** at the threshold."
        )
    below = points[i]
    skipped = (
        " (one start alone recovers every client there)" if along[i] is None else ""
    )
    return (
        f"From {_sigma(at)} on, {who} recognises none of the {n} photographs at any σ run; at "
        f"{_sigma(below)} it recognises {recognised(below, along[i], which)}{skipped}: the threshold lies "
        f"somewhere in **σ ∈ ({below['sigma']:g}, {at['sigma']:g}]**, ε between {eps_text(at['epsilon'])} "
        f"and {eps_text(below['epsilon'])}."
    )


def threshold_words(points: Sequence[dict], along: Sequence[dict | None]) -> str:
    """:func:`threshold_sentence` of the attacker's envelope, then the oracle's — or, where the oracle
    brackets the threshold between the same σ, that it does."""
    words = threshold_sentence(points, along, "attacker")
    if threshold(points, along, "oracle") == threshold(points, along, "attacker"):
        return (
            words
            + " The oracle envelope, an upper bound on these adversaries, brackets it the same way."
        )
    return words + " " + threshold_sentence(points, along, "oracle")


def threshold_text(
    points: Sequence[dict], along: Sequence[dict | None], which: str = "attacker"
) -> str:
    """The ε at the threshold of :func:`threshold` for a table cell: ``"≥ e"`` at the sweep's small-σ
    edge, ``"< e"`` beyond its large-σ edge, ``"[e_at, e_below)"`` inside, or "not located"."""
    i, j = threshold(points, along, which)
    if j is None:
        return f"< {eps_text(points[i]['epsilon'])}"
    if points[j]["sigma"] == 0:
        return "not located (none recognisable at σ = 0)"
    if i is None or points[i]["sigma"] == 0:
        return f"≥ {eps_text(points[j]['epsilon'])}"
    return f"[{eps_text(points[j]['epsilon'])}, {eps_text(points[i]['epsilon'])})"


def noise_scale_words(
    points: Sequence[dict], along: Sequence[dict | None], m: int
) -> str:
    """The attacker's threshold of :func:`threshold` in the units that explain it: the noise's norm
    σ·C·√m (``m`` parameters) as a multiple of C, the largest norm of the clipped gradient it is added to
    — at both ends of the bracket when the sweep locates it, at its one end when it bounds it, "" when
    even σ = 0 recognises nothing.

    Raises:
        ValueError: for ``m`` < 1, or as :func:`threshold`.
        TypeError: for an ``m`` that is not an int, or as :func:`threshold`.
    """
    check_int(m, "m")
    i, j = threshold(points, along, "attacker")

    def scale(p):
        return f"{p['sigma'] * m**0.5:.2g} C"

    if j is None:
        return (
            f"Even at σ = {points[i]['sigma']:g}, noise of norm about {scale(points[i])}, a photograph "
            "was recognisable."
        )
    if points[j]["sigma"] == 0:
        return ""
    if i is None or points[i]["sigma"] == 0:
        return (
            f"The noise's norm at σ = {points[j]['sigma']:g} is about {scale(points[j])}, against a clipped "
            "gradient of norm ≤ C: the attack had stopped by then."
        )
    low, high = scale(points[i]), scale(points[j])
    stopped = (
        "well before the noise outweighs the gradient"
        if points[j]["sigma"] * m**0.5 < 1
        else "about where the noise outweighs the gradient"
    )
    return (
        f"Across the attacker's bracket the noise's norm σC√m grows from about {low} to {high}, against a clipped "
        f"gradient of norm ≤ C: the attack stops {stopped}."
    )


def budget_point(points: Sequence[dict], along: Sequence[dict | None]) -> dict | None:
    """The point at which a longer attack tests the budget: the smallest σ > 0 from which the attacker's
    envelope recognises no photograph (:func:`threshold`), where more steps could move the threshold;
    None when the sweep has no such σ."""
    _, j = threshold(points, along, "attacker")
    return None if j is None or points[j]["sigma"] == 0 else points[j]


def budget_words(point: dict | None, longer: dict | None, steps: int) -> str:
    """What the one-start IG with ``steps`` steps (``longer``: its summary on ``point``'s round-1 updates,
    from the same starts) changes at :func:`budget_point`: the paired PSNR difference over the clients and
    its recognisable count, and so whether the threshold holds at that budget ("" without a point).

    Raises:
        TypeError / ValueError: naming ``steps`` when not an int ≥ 1.
    """
    check_int(steps, "steps")
    if point is None or longer is None:
        return ""
    diff = paired_difference(
        [r["psnr"] for r in longer["rows"]], [r["psnr"] for r in point["rows"]]
    )
    what = (
        "raises"
        if diff.low > 0
        else "lowers"
        if diff.high < 0
        else "does not resolvably change"
    )
    held = (
        "so the threshold holds at that budget"
        if longer["recognised"] == 0
        else "so at that budget the threshold moves to a larger σ: the bracket above is a lower bound on it"
    )
    return (
        f"The budget check: at σ = {point['sigma']:g}, the smallest σ from which the attacker's envelope "
        f"recognises none, the one-start IG run for {steps} steps from the same starts {what} the PSNR "
        f"({format_interval(diff, 2, False)} dB, paired over the {diff.n} clients) and recognises "
        f"{longer['recognised']} of {longer['images']}, {held}."
    )


def run_sigmas(points: Sequence[dict], along: Sequence[dict | None]) -> str:
    """The σ at which the envelope ran, for the page: "0.01, 0.1, 1, 12" (or "none")."""
    _check(points, along)
    return (
        ", ".join(
            f"{p['sigma']:g}" for p, found in zip(points, along) if found is not None
        )
        or "none"
    )


def epsilon_figure(
    points: Sequence[dict],
    along: Sequence[dict | None],
    success: float,
    control: float,
    chance: float,
):
    """Attack PSNR (95 % intervals over clients) against the sweep's σ on a categorical axis (ε under
    each σ): the one-start IG on round 1's update, the attacker's envelope and the oracle envelope
    (where run; "not run" where the one-start IG recovered every client); lines ``success`` and the best
    ``control`` (dB). Below: test accuracy (Wilson interval over the test images), ``chance``.

    Raises:
        TypeError / ValueError: naming ``success``, ``control`` or ``chance`` when not a finite number
            (``chance`` in [0, 1]), or as :func:`threshold` for ``points`` and ``along``.
    """
    _check(points, along)
    success, control = check_real(success, "success"), check_real(control, "control")
    chance = check_real(chance, "chance", low=0.0, high=1.0)
    xs = list(range(len(points)))
    ran = [x for x in xs if along[x] is not None]
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(8, 6.2), sharex=True, gridspec_kw={"height_ratios": [3, 2]}
    )
    interval_errorbars(
        top,
        [x - 0.12 for x in xs],
        [p["psnr"] for p in points],
        color="C3",
        label="IG, one start, round 1's update",
    )
    if ran:
        interval_errorbars(
            top,
            ran,
            [along[x]["attacker"]["psnr"] for x in ran],
            color="C2",
            label="attacker's envelope",
        )
        interval_errorbars(
            top,
            [x + 0.12 for x in ran],
            [along[x]["oracle"]["psnr"] for x in ran],
            color="grey",
            mfc="white",
            label="oracle envelope (upper bound)",
        )
    for x in set(xs) - set(ran):
        top.text(
            x + 0.3,
            0.4 * success,
            "envelope\nnot run\n(one start\nrecovers all)",
            ha="center",
            va="center",
            fontsize=8,
        )
    top.axhline(
        success, color="k", ls="--", lw=1, label=f"recognisable ({success:g} dB)"
    )
    top.axhline(control, color="grey", ls=":", lw=1, label="best control")
    top.set_ylabel("attack PSNR (dB)")
    top.legend(fontsize=8, loc="upper right")
    interval_errorbars(bottom, xs, [p["accuracy_interval"] for p in points], color="C0")
    bottom.axhline(chance, color="C0", ls=":", lw=1)
    bottom.set_ylabel("test accuracy")
    bottom.set_ylim(0, 1.05)
    bottom.set_xticks(
        xs,
        [f"σ = {p['sigma']:g}\nε = {eps_text(p['epsilon'])}" for p in points],
        fontsize=8,
    )
    bottom.set_xlabel(
        "noise multiplier σ (categorical axis; ε: Opacus RDP, all rounds, per example)"
    )
    fig.tight_layout()
    return legible(fig)


def sweep_table(
    points: Sequence[dict], along: Sequence[dict | None], delta: float
) -> str:
    """One line per σ: ε, PSNR (intervals over clients) of the one-start IG on round 1 and on the mean of
    all rounds, of the attacker's and the oracle envelope ("not run" where the one-start IG recovered every
    client), recognisable images under each, where the restarted IG's curve flattens, labels (the
    one-start sign rule) and test accuracy (interval over the test images).

    Raises:
        TypeError / ValueError: naming ``delta`` when not a number in (0, 1), or as :func:`threshold`.
    """
    _check(points, along)
    delta = check_real(delta, "delta", low=0.0, high=1.0, low_open=True, high_open=True)
    header = [
        "σ",
        f"ε per example, all rounds (δ = {delta:g})",
        "IG one start, round 1 (dB)",
        "IG, mean of rounds (dB)",
        "attacker's envelope (dB)",
        "oracle envelope, upper bound (dB)",
        "recognisable: one start / attacker / oracle",
        "IG flat from step",
        "labels",
        "test accuracy",
    ]
    lines = []
    for p, found in zip(points, along):
        envelope = (
            ["not run"] * 2
            if found is None
            else [
                format_interval(found[w]["psnr"], 1, False)
                for w in ("attacker", "oracle")
            ]
        )
        counts = [p["recognised"]] + (
            ["—"] * 2
            if found is None
            else [found[w]["recognised"] for w in ("attacker", "oracle")]
        )
        lines.append(
            [
                f"{p['sigma']:g}",
                eps_text(p["epsilon"]),
                format_interval(p["psnr"], 1, False),
                format_interval(p["average"]["psnr"], 1, False),
                *envelope,
                " / ".join(map(str, counts)) + f" of {p['images']}",
                "—" if found is None else flat_words(found["curve"]),
                label_text(p),
                format_interval(p["accuracy_interval"], 2, False),
            ]
        )
    return markdown_table(header, lines)


def average_gain_sentence(points: Sequence[dict]) -> str:
    """At every σ > 0 of the sweep, the PSNR of IG on the mean of the rounds minus that on round 1's
    update, paired over the attacked clients, grouped by whether it is a resolved gain, a resolved loss
    (the model's drift between rounds costs more than the averaged-down noise gains) or not resolved.

    Raises:
        ValueError: for a sweep without a σ > 0.
    """
    noisy = sorted((p for p in points if p["sigma"] > 0), key=lambda p: p["sigma"])
    if not noisy:
        raise ValueError("points must hold a σ > 0")
    groups = {"raises": [], "lowers": [], "does not resolvably change": []}
    n = 0
    for point in noisy:
        diff = paired_difference(
            [r["psnr"] for r in point["average"]["rows"]],
            [r["psnr"] for r in point["rows"]],
        )
        n = diff.n
        what = (
            "raises"
            if diff.low > 0
            else "lowers"
            if diff.high < 0
            else "does not resolvably change"
        )
        groups[what].append((point["sigma"], format_interval(diff, 1, False)))
    parts = []
    for what, found in groups.items():
        if found:
            sigmas = ", ".join(f"{s:g}" for s, _ in found)
            diffs = "; ".join(d for _, d in found)
            parts.append(
                f"{what} {'it' if parts else 'the PSNR'} at σ = {sigmas} ({diffs} dB)"
            )
    return (
        "Attacking the mean of the rounds instead of round 1's update, paired over the "
        f"{n} clients, "
        + ", ".join(parts[:-1])
        + (" and " if len(parts) > 1 else "")
        + parts[-1]
        + "."
    )
