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

#: Who must be trusted not to invert a client's update, by design of each defense (SecAgg+'s conditions are
#: stated once under the table, on the page).
TRUSTED = {
    "none": "the server (it holds every update)",
    "secagg+": "a server that keeps SecAgg+'s conditions (see below)",
    "central-dp-server-clipping": "the server (it receives every raw update)",
    "central-dp-client-clipping": "the server (it receives every clipped, un-noised update)",
    "local-dp": "nobody, for the update (the client's own noise)",
    "dp-sgd": "nobody, for the update (the client's own noise, every example, every step)",
}


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
    :func:`decision_table`. A run's ``"rounds"`` (the every-round attack, where the strongest adversary
    ran it) adds a line. ``dp_sgd``: a point of the DP-SGD sweep
    (:func:`~gitutor.chapters.flower_dp.experiments.dp_point`, with its ``"rounds"``), added as the last
    lines."""
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
            "rounds": dp_sgd.get("rounds"),
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
            f"all {rounds} rounds' updates, each at its own model": run.get("rounds"),
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
    IG on every round at its own model (where run), LTI — the attacker's envelope (kept by the matching
    distance over the rounds the server holds) with its recognisable count, the oracle envelope (kept by PSNR: an upper bound no
    attacker can pick), and the step from which the restarted IG's mean PSNR stays within 1 dB of
    its last (:func:`~gitutor.chapters.flower_dp.report.flat_step`)."""
    header = [
        "defense",
        "IG, restarts",
        "IG, every round",
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
        cells = [found[key] for key in ("restarts", "rounds", "lti", "attacker")]
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
        for what, summary in (
            ("", run["round1"]),
            (", every round", run.get("rounds")),
        ):
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
