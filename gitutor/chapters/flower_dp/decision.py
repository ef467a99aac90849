"""Chapter 08's defense tables: what each Flower defense leaves the server, and the decision table.

Every number comes from the runs of :mod:`.defenses` and the DP-SGD sweep of :mod:`.experiments`;
the fixed words (who must be trusted, where the noise is added) are the defenses' designs as Flower's
and Opacus' documentation state them.
"""

from __future__ import annotations

from collections.abc import Mapping

from gitutor.chapters.flower_dp.accuracy import CHANCE
from gitutor.chapters.flower_dp.report import (
    eps_text,
    flat_step,
    flat_words,
    label_text,
)
from gitutor.paired import paired_difference
from gitutor.stats import format_interval
from gitutor.tables import markdown_table

NAMES = {
    "none": "none (FedAvg)",
    "secagg+": "SecAgg+",
    "central-dp-server-clipping": "central DP, server-side clipping",
    "central-dp-client-clipping": "central DP, client-side clipping",
    "local-dp": "LocalDpMod",
}

#: Who must be trusted not to invert a client's update, by design of each defense (SecAgg+'s conditions:
#: :data:`SECAGG_TRUST`, stated once under the table).
TRUSTED = {
    "none": "the server (it holds every update)",
    "secagg+": "a server that keeps SecAgg+'s conditions (see below)",
    "central-dp-server-clipping": "the server (it receives every raw update)",
    "central-dp-client-clipping": "the server (it receives every clipped, un-noised update)",
    "local-dp": "nobody, for the update (the client's own noise)",
    "dp-sgd": "nobody, for the update (the client's own noise, every example, every step)",
}

#: SecAgg+'s conditions on the server, the words under the decision table.
SECAGG_TRUST = (
    "it must not collude with as many clients as SecAgg+'s reconstruction threshold, nor drop or "
    "fake clients to shrink the aggregate towards one update; it then holds only the aggregate of "
    "the round's clients"
)


def _scores(summary: dict) -> list[str]:
    lpips = (
        "n/a"
        if summary["lpips"] is None
        else format_interval(summary["lpips"], 3, False)
    )
    return [
        format_interval(summary["psnr"], 1, False),
        format_interval(summary["ssim"], 2, False),
        lpips,
        f"{summary['recognised']}/{summary['images']}",
    ]


def _quality(summary: dict) -> list[str]:
    """PSNR and recognisable of :func:`_scores` (the decision table's attack quality; SSIM and LPIPS are in
    :func:`defense_table`)."""
    scores = _scores(summary)
    return [scores[0], scores[3]]


def guarantee_text(run: dict, rounds: int) -> str:
    """ε of a defense run with its level and source, for a table cell."""
    g = run["view"].guarantee
    if g.epsilon is None:
        return "none (no DP)"
    against = (
        "the server included"
        if run["view"].noise_by == "client"
        else "released model only"
    )
    return f"{eps_text(g.epsilon)} per client over {rounds} rounds, δ = {g.delta:g} (Opacus RDP); {against}"


def defense_table(
    runs: Mapping[str, dict], rounds: int, dp_sgd: dict | None = None
) -> str:
    """One line per attack on a defense run: what the server attacked, PSNR / SSIM / LPIPS (intervals
    over the attacked clients), recognisable, labels, test accuracy (Wilson interval); ε is in
    :func:`decision_table`. ``dp_sgd``: a point of the DP-SGD sweep
    (:func:`~gitutor.chapters.flower_dp.experiments.dp_point`), added as the last lines."""
    header = [
        "defense",
        "the server attacks",
        "PSNR (dB)",
        "SSIM",
        "LPIPS",
        "recognisable",
        "labels",
        "test accuracy",
    ]
    lines = []
    runs = dict(runs)
    if dp_sgd is not None:
        runs["dp-sgd"] = {
            "round1": dp_sgd,
            "average": dp_sgd["average"],
            "accuracy": dp_sgd["accuracy_interval"],
        }
    names = NAMES | {
        "dp-sgd": "Opacus DP-SGD, σ = " + (f"{dp_sgd['sigma']:g}" if dp_sgd else "")
    }
    for name, run in runs.items():
        attacks = {
            "round 1's update as received"
            if name != "central-dp-server-clipping"
            else "round 1's update after its own clipping": run["round1"],
            f"mean of the {rounds} rounds' updates": run["average"],
        }
        for what, summary in attacks.items():
            if summary is None:
                continue
            lines.append(
                [
                    names[name],
                    what,
                    *_scores(summary),
                    label_text(summary),
                    format_interval(run["accuracy"], 2, False),
                ]
            )
    return markdown_table(header, lines)


def secagg_table(aggregates: Mapping[int, dict]) -> str:
    """One line per k: PSNR / SSIM / LPIPS (means over a group's k images; 95 % intervals over the
    groups' aggregates), recognisable images of all groups."""
    header = [
        "clients in the aggregate k",
        "groups",
        "PSNR (dB)",
        "SSIM",
        "LPIPS",
        "recognisable",
    ]
    return markdown_table(
        header,
        [
            [str(k), str(len(found["rows"])), *_scores(found)]
            for k, found in aggregates.items()
        ],
    )


def _difference(outcomes, baseline) -> str:
    return format_interval(
        paired_difference([float(v) for v in outcomes], [float(v) for v in baseline]),
        2,
        False,
    )


def _kept(wins: Mapping[str, int]) -> str:
    """Which adversaries the attacker kept, with counts: "IG, restarts 4/5; LTI 1/5"."""
    total = sum(wins.values())
    return "; ".join(f"{name} {count}/{total}" for name, count in wins.items() if count)


def decision_table(
    runs: Mapping[str, dict],
    strongest: Mapping[str, dict],
    point: dict,
    plain: dict,
    rounds: int,
    delta: float,
) -> str:
    """Defense × who must be trusted × ε (level) × the strongest adversary × accuracy: one line per
    defense (SecAgg+: its smallest aggregate), the DP-SGD line from the sweep ``point``. The attack
    columns are the attacker's envelope of :func:`~gitutor.chapters.flower_dp.strongest.envelope`
    (kept per client by gradient distance, no truth used). The last column: accuracy minus the
    undefended run's on the same test images (paired; DP-SGD against the sweep's σ = 0 point
    ``plain``); ``delta``: the sweep's δ."""
    header = [
        "defense",
        "who must be trusted",
        "ε (level, accountant)",
        "adversary kept (per client)",
        "PSNR (dB)",
        "recognisable",
        f"test accuracy (chance {CHANCE:g})",
        "minus undefended",
    ]
    lines = []
    k = len(strongest["secagg+"]["attacker"]["rows"][0]["truth"])
    for name, run in runs.items():
        found = strongest[name]["attacker"]
        lines.append(
            [
                NAMES[name] + (f" (k = {k})" if name == "secagg+" else ""),
                TRUSTED[name],
                guarantee_text(run, rounds),
                _kept(strongest[name]["wins"]),
                *_quality(found),
                format_interval(run["accuracy"], 2, False),
                "—"
                if name == "none"
                else _difference(run["outcomes"], runs["none"]["outcomes"]),
            ]
        )
    lines.append(
        [
            f"Opacus DP-SGD, σ = {point['sigma']:g}",
            TRUSTED["dp-sgd"],
            f"{eps_text(point['epsilon'])} per example over {rounds} rounds, δ = {delta:g} (Opacus RDP)",
            _kept(strongest["dp-sgd"]["wins"]),
            *_quality(strongest["dp-sgd"]["attacker"]),
            format_interval(point["accuracy_interval"], 2, False),
            _difference(point["outcomes"], plain["outcomes"]),
        ]
    )
    return markdown_table(header, lines)


def strongest_table(strongest: Mapping[str, dict], sigma: float, k: int) -> str:
    """Per defense, PSNR (dB; interval over the attacked clients) of each adversary — IG with restarts,
    IG on the mean of the rounds (where run), LTI — the attacker's envelope (kept by gradient
    distance) with its recognisable count, the oracle envelope (kept by PSNR: an upper bound no
    attacker can pick), and the step from which the restarted IG's mean PSNR stays within 1 dB of
    its last (:func:`~gitutor.chapters.flower_dp.report.flat_step`)."""
    header = [
        "defense",
        "IG, restarts",
        "IG, mean of rounds",
        "LTI",
        "attacker's envelope",
        "recognisable",
        "oracle envelope",
        "IG flat from step",
    ]
    names = NAMES | {
        "dp-sgd": f"Opacus DP-SGD, σ = {sigma:g}",
        "secagg+": f"SecAgg+, k = {k}",
    }
    lines = []
    for name, found in strongest.items():
        cells = [found[key] for key in ("restarts", "average", "lti", "attacker")]
        lines.append(
            [
                names[name],
                *[
                    "—" if c is None else format_interval(c["psnr"], 1, False)
                    for c in cells
                ],
                f"{found['attacker']['recognised']}/{found['attacker']['images']}",
                format_interval(found["oracle"]["psnr"], 1, False),
                flat_words(found["curve"]),
            ]
        )
    return markdown_table(header, lines)


def defense_rows(
    runs: Mapping[str, dict], aggregates: Mapping[int, dict], k: int
) -> dict:
    """Reconstructions of the attacked clients' photographs under each defense, for
    :func:`~gitutor.chapters.flower_dp.report.reconstruction_grid` (SecAgg+: the aggregate of the
    first ``k`` photographs, the same ones in the same order; left out when ``k`` was not run)."""
    import torch

    rows = {}
    for name, run in runs.items():
        if name == "secagg+":
            if k in aggregates:
                rows[f"SecAgg+, k = {k}"] = aggregates[k]["rows"][0]["images"]
            continue
        for what, summary in (("", run["round1"]), (", mean", run["average"])):
            if summary is not None:
                label = (
                    NAMES[name].split(" (")[0].replace("`", "") + what
                )  # figure text: no Markdown
                rows[label] = torch.cat([r["images"] for r in summary["rows"]])
    return rows


def truth_of(runs: Mapping[str, dict]):
    """The attacked clients' photographs, in the order of the rows of :func:`defense_rows`."""
    import torch

    return torch.cat([r["truth"] for r in runs["none"]["round1"]["rows"]])


def versus_none(
    runs: Mapping[str, dict], defense: str = "central-dp-client-clipping"
) -> str:
    """``defense``'s run against the undefended one, paired: the attack's PSNR over the same clients and
    the test accuracy over the same test images, each with whether its interval excludes 0."""

    def said(diff, unit):
        verdict = (
            "higher"
            if diff.low > 0
            else "lower"
            if diff.high < 0
            else "the same on every one"
            if diff.low == diff.high == 0
            else "not resolved (covers 0)"
        )
        return f"{format_interval(diff, 2, False)}{unit}, {verdict}"

    psnr = paired_difference(
        [r["psnr"] for r in runs[defense]["round1"]["rows"]],
        [r["psnr"] for r in runs["none"]["round1"]["rows"]],
    )
    accuracy = paired_difference(
        [float(v) for v in runs[defense]["outcomes"]],
        [float(v) for v in runs["none"]["outcomes"]],
    )
    return (
        f"paired with the undefended run, the PSNR difference over the same clients is "
        f"{said(psnr, ' dB')}, and the accuracy difference over the same test images {said(accuracy, '')}."
    )


def strongest_words(
    strongest: Mapping[str, dict],
    mean_colour: float,
    noised: tuple[str, ...] = ("local-dp", "dp-sgd"),
) -> str:
    """What the strongest-adversary table says, in words built from it: the restarts' paired PSNR gain
    on the undefended update (over the same clients, resolved or not), where the restarted IG was still
    moving at its last step (a bound at this budget), the largest gap between the oracle's and the
    attacker's envelope, the recognisable counts under the defenses whose noise is the client's, and
    LTI's mean PSNR there against ``mean_colour``, the mean-colour control's mean PSNR (dB) on the same
    photographs."""
    none = strongest["none"]
    gain = paired_difference(
        [r["psnr"] for r in none["restarts"]["rows"]],
        [r["psnr"] for r in none["single"]["rows"]],
    )
    verdict = (
        "raise"
        if gain.low > 0
        else "lower"
        if gain.high < 0
        else "do not resolvably change"
    )
    words = [
        (
            f"On the undefended update the restarts {verdict} the PSNR of one run: "
            f"{format_interval(gain, 1, False)} dB, paired over the {gain.n} clients."
        )
    ]
    moving = [
        NAMES.get(n, "Opacus DP-SGD")
        for n, f in strongest.items()
        if flat_step(f["curve"]) == max(f["curve"])
    ]
    flat = (
        "The restarted IG's mean PSNR is flat (within 1 dB of its last) before its last step under "
        "every defense."
    )
    still = (
        f"The restarted IG's mean PSNR was still moving at its last step under {', '.join(moving)}: "
        "there its number is a lower bound on what a longer attack gets."
    )
    words.append(still if moving else flat)
    name = max(
        strongest,
        key=lambda n: (
            strongest[n]["oracle"]["psnr"].mean - strongest[n]["attacker"]["psnr"].mean
        ),
    )
    gap = (
        strongest[name]["oracle"]["psnr"].mean
        - strongest[name]["attacker"]["psnr"].mean
    )
    words.append(
        f"The largest gap between the oracle's and the attacker's envelope is {gap:.1f} dB in mean "
        f"PSNR ({NAMES.get(name, 'Opacus DP-SGD')}; the gradient distance kept "
        f"{_kept(strongest[name]['wins'])})."
    )
    counts = [
        f"{NAMES.get(n, 'Opacus DP-SGD')}: {strongest[n]['attacker']['recognised']}/"
        f"{strongest[n]['attacker']['images']} (oracle {strongest[n]['oracle']['recognised']})"
        for n in noised
        if n in strongest
    ]
    words.append(
        "Recognisable images under the client's own noise, attacker's envelope: "
        + "; ".join(counts)
        + "."
    )
    lti = {
        NAMES.get(n, "Opacus DP-SGD"): strongest[n]["lti"]["psnr"].mean
        for n in noised
        if n in strongest
    }
    side = (
        "below"
        if max(lti.values()) < mean_colour
        else "above"
        if min(lti.values()) > mean_colour
        else "around"
    )
    words.append(
        "There LTI's mean PSNR ("
        + ", ".join(f"{n}: {v:.1f} dB" for n, v in lti.items())
        + f") lies {side} the mean-colour control's {mean_colour:.1f} dB: what a constant image of "
        "the right brightness scores."
    )
    return " ".join(words)


def decision_words(
    runs: Mapping[str, dict], strongest: Mapping[str, dict], point: dict, plain: dict
) -> str:
    """The decision table's lesson in words built from it: under which defenses the attacker's envelope
    recognised no photograph, and which of those paid for it in accuracy (paired difference to the
    undefended run, resolved or not) — the DP-SGD ``point`` against the sweep's σ = 0 ``plain``."""
    rows = {
        name: (strongest[name]["attacker"], run["outcomes"], runs["none"]["outcomes"])
        for name, run in runs.items()
    }
    rows["dp-sgd"] = (
        strongest["dp-sgd"]["attacker"],
        point["outcomes"],
        plain["outcomes"],
    )
    name = NAMES | {"dp-sgd": f"Opacus DP-SGD (σ = {point['sigma']:g})"}
    safe = [n for n, (found, _, _) in rows.items() if found["recognised"] == 0]
    leaked = [n for n, (found, _, _) in rows.items() if found["recognised"] > 0]
    cost = {
        n: paired_difference(
            [float(v) for v in rows[n][1]], [float(v) for v in rows[n][2]]
        )
        for n in safe
    }
    paid = [
        f"{name[n]} ({format_interval(d, 2, False)})"
        for n, d in cost.items()
        if d.high < 0
    ]
    kept = [name[n] for n, d in cost.items() if d.high >= 0]
    listed = (
        "; ".join(name[n] for n in safe) or "no defense"
    )  # "; ": the names hold commas
    words = [
        f"Against this page's adversaries, no photograph was recognisable under {listed}"
    ]
    if safe:
        words.append(
            f". Of these, {'; '.join(paid) or 'none'} lost accuracy (paired, resolved), and "
            f"{'; '.join(kept) or 'none'} showed no resolved loss"
        )
    if leaked:
        words.append(
            f". At least one photograph was recognisable under {'; '.join(name[n] for n in leaked)}"
        )
    return "".join(words) + "."
