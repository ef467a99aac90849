"""Chapter 08's noise sweeps (DP-SGD over σ, LocalDpMod over z): attack PSNR along the sweep, the one-start
Inverting Gradients beside the envelope of the strongest adversary
(:func:`~gitutor.chapters.flower_dp.strongest.sweep_strongest`: the attacker's, and the oracle's upper
bound); its figure, its tables, and the σ / ε from which no photograph is recognisable, written as a bound
where the sweep does not locate it, and the point where the budget check runs (:func:`budget_point`).

``along`` is aligned with the sweep's ``points``: the envelope run at that σ, or None where the one-start
IG already recovered every attacked client (there the envelope was not run: the defense failed anyway).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt

from gitutor.chapters.flower_dp.report import (
    FIGURE_WIDTH,
    eps_text,
    flat_words,
    label_text,
)
from gitutor.checks import check_choice, check_real
from gitutor.paired import paired_difference
from gitutor.stats import format_interval
from gitutor.tables import markdown_table, split_table
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


def threshold_sigma_text(
    points: Sequence[dict], along: Sequence[dict | None], which: str = "attacker"
) -> str:
    """The σ bracket of :func:`threshold` for the page: ``"(a, b]"`` inside the sweep, ``"(0, b]"`` at its
    small-σ edge, ``"> a"`` beyond its large-σ edge, "not located (none recognisable at σ = 0)"."""
    i, j = threshold(points, along, which)
    if j is None:
        return f"> {points[i]['sigma']:g}"
    if points[j]["sigma"] == 0:
        return "not located (none recognisable at σ = 0)"
    low = 0 if i is None else points[i]["sigma"]
    return f"({low:g}, {points[j]['sigma']:g}]"


def rounds_gain_table(points: Sequence[dict], along: Sequence[dict | None]) -> str:
    """At every σ > 0 of the sweep where the strongest adversary ran (``along``): the PSNR of its
    every-round attack minus that of the one-start IG on round 1's update alone, and minus that of the same
    attack with its matching term removed (``along[i]["prior"]``,
    :func:`~gitutor.chapters.flower_dp.strongest.prior_alone`: what its prior gives whatever the updates
    hold), each paired over the attacked clients (dB, mean [95 % interval]) with whether the interval
    excludes 0 ("gain", "loss", "not resolved"); "not run" where the one-start IG recovered every client.

    Raises:
        ValueError: for a sweep without a σ > 0, or as :func:`threshold` for ``points`` and ``along``.
    """
    _check(points, along)
    noisy = sorted(
        ((p, f) for p, f in zip(points, along) if p["sigma"] > 0),
        key=lambda pair: pair[0]["sigma"],
    )
    if not noisy:
        raise ValueError("points must hold a σ > 0")

    def against(found, rows):
        diff = paired_difference(
            [r["psnr"] for r in found["rounds"]["rows"]], [r["psnr"] for r in rows]
        )
        word = "gain" if diff.low > 0 else "loss" if diff.high < 0 else "not resolved"
        return [format_interval(diff, 1, False), word]

    lines = []
    for point, found in noisy:
        if found is None or found.get("rounds") is None:
            lines.append([f"{point['sigma']:g}", "not run", "—", "not run", "—"])
            continue
        lines.append(
            [f"{point['sigma']:g}"]
            + against(found, point["rows"])
            + against(found, found["prior"]["rows"])
        )
    header = [
        "σ",
        "every round − round 1 (dB, paired over the clients)",
        "resolved",
        "every round − its prior alone (dB, paired)",
        "resolved",
    ]
    return markdown_table(header, lines)


def budget_point(points: Sequence[dict], along: Sequence[dict | None]) -> dict | None:
    """The point at which a longer attack tests the budget: the smallest σ > 0 from which the attacker's
    envelope recognises no photograph (:func:`threshold`), where more steps could move the threshold;
    None when the sweep has no such σ."""
    _, j = threshold(points, along, "attacker")
    return None if j is None or points[j]["sigma"] == 0 else points[j]


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
    *,
    symbol: str = "σ",
    level: str = "per example",
):
    """Attack PSNR (95 % intervals over clients) against the sweep's noise multiplier (``symbol``: σ of
    DP-SGD, z of LocalDpMod) on a categorical axis (ε at ``level`` under each): the one-start IG on round
    1's update, the attacker's envelope and the oracle envelope (where run; "envelopes not run" where the
    one-start IG recovered every client); lines ``success`` and the best ``control`` (dB); the legend
    above the axes. Below: test accuracy (Wilson interval over the test images), ``chance``.
    :data:`~gitutor.chapters.flower_dp.report.FIGURE_WIDTH` wide.

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
        2,
        1,
        figsize=(FIGURE_WIDTH, 6.8),
        sharex=True,
        gridspec_kw={"height_ratios": [3, 2]},
    )
    interval_errorbars(
        top,
        [x - 0.12 for x in xs],
        [p["psnr"] for p in points],
        color="C3",
        label="IG, one start, round 1",
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
    # more ticks than fit side by side at the page's text size: labels and notes upright
    crowded = len(points) > 6
    for x in set(xs) - set(ran):
        # at the foot of the axes (the one-start IG recovered all there: its interval is high up);
        # upright, beside that interval
        top.text(
            x + (0.2 if crowded else 0.0),
            0.04,
            "envelopes not run" if crowded else "envelopes\nnot run",
            transform=top.get_xaxis_transform(),
            ha="center",
            va="bottom",
            rotation=90 if crowded else 0,
        )
    top.axhline(
        success, color="k", ls="--", lw=1, label=f"recognisable ({success:g} dB)"
    )
    top.axhline(control, color="grey", ls=":", lw=1, label="best control")
    top.set_ylabel("attack PSNR (dB)")
    top.set_xlim(-0.6, len(xs) - 0.4)
    # above the axes, the attacks in the first column, the two lines in the second: inside, five entries
    # at the page's text size would cover intervals
    handles, labels = top.get_legend_handles_labels()
    lines = {f"recognisable ({success:g} dB)", "best control"}
    order = sorted(range(len(labels)), key=lambda i: labels[i] in lines)
    top.legend(
        [handles[i] for i in order],
        [labels[i] for i in order],
        loc="lower left",
        bbox_to_anchor=(0, 1.02),
        borderaxespad=0,
        ncol=2,
        frameon=False,
        columnspacing=1.0,
        handlelength=1.5,
    )
    interval_errorbars(bottom, xs, [p["accuracy_interval"] for p in points], color="C0")
    bottom.axhline(chance, color="C0", ls=":", lw=1)
    bottom.set_ylabel("test accuracy")
    bottom.set_ylim(0, 1.05)
    ticks = [(f"{p['sigma']:g}", eps_text(p["epsilon"])) for p in points]
    if crowded:  # one line each, upright
        bottom.set_xticks(xs, [f"{s} (ε {e})" for s, e in ticks], rotation=90)
        where = "in brackets"
    else:
        bottom.set_xticks(xs, [f"{s}\n{e}" for s, e in ticks])
        where = "the lower line"
    bottom.set_xlabel(
        f"noise multiplier {symbol} and its ε {level} over all rounds\n"
        f"(ε: Opacus RDP, add/remove, {where}), on a categorical axis"
    )
    fig.tight_layout()
    return legible(fig, width=FIGURE_WIDTH)


#: :func:`sweep_table`'s first table: σ, ε and the attacks' PSNR, its columns before this one; its second
#: table: σ and the columns from this one on (recognisable counts, the every-round attack's run, labels,
#: accuracy, and any column added after them).
SWEEP_PSNR_COLUMNS = 6


def sweep_table(
    points: Sequence[dict],
    along: Sequence[dict | None],
    delta: float,
    *,
    symbol: str = "σ",
    level: str = "per example",
) -> str:
    """One line per σ (``symbol``): ε (``level``), PSNR (intervals over clients) of the one-start IG on
    round 1 and of the attack on every round at its own model
    (:func:`~gitutor.chapters.flower_dp.experiments.attack_rounds`), of the attacker's and the oracle
    envelope ("not run" where the one-start IG recovered every client), recognisable images under each,
    where the every-round attack's curve flattens, labels (the sign rule on the mean of the rounds'
    updates where that attack ran, else on round 1's) and test accuracy (interval over the test images).
    Written as two tables (:func:`~gitutor.tables.split_table`, one line per σ in each), so that each fits
    the page's column: ε and the PSNR columns (before :data:`SWEEP_PSNR_COLUMNS`), then σ with the rest.

    Raises:
        TypeError / ValueError: naming ``delta`` when not a number in (0, 1), or as :func:`threshold`.
    """
    _check(points, along)
    delta = check_real(delta, "delta", low=0.0, high=1.0, low_open=True, high_open=True)
    header = [
        symbol,
        f"ε {level}, add/remove (δ = {delta:g})",
        "IG one start, round 1 (dB)",
        "IG, every round (dB)",
        "attacker's envelope (dB)",
        "oracle envelope, upper bound (dB)",
        "recognisable: one start / attacker / oracle",
        "every-round IG flat from step",
        "labels (every round where run)",
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
                "not run"
                if found is None
                else format_interval(found["rounds"]["psnr"], 1, False),
                *envelope,
                " / ".join(map(str, counts)) + f" of {p['images']}",
                "—" if found is None else flat_words(found["curve"]),
                label_text(p if found is None else found["rounds"]),
                format_interval(p["accuracy_interval"], 2, False),
            ]
        )
    return split_table(header, lines, SWEEP_PSNR_COLUMNS)
