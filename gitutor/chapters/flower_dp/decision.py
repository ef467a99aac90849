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
from gitutor.tables import markdown_table, split_table

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

#: The tables below are each written as two (:func:`~gitutor.tables.split_table`) so that each fits the
#: page's column (612 px at a 1 200 px window): their first table holds the columns before these.
#: :func:`decision_table`: what the defense promises (who must be trusted, ε, whom it holds for) and which
#: adversary the attacker kept; then what that left (PSNR, recognisable) and what it cost (accuracy).
DECISION_PROMISE_COLUMNS = 5
#: :func:`defense_table`: the defense, what the server attacks, PSNR / SSIM / LPIPS and recognisable; then
#: labels and test accuracy.
DEFENSE_QUALITY_COLUMNS = 6
#: :func:`strongest_table`: the adversaries (IG with restarts, every round, LTI); then the envelopes.
STRONGEST_ADVERSARY_COLUMNS = 4


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


def defense_table(
    runs: Mapping[str, dict], rounds: int, dp_sgd: dict | None = None
) -> str:
    """One line per attack on a defense run: what the server attacked, PSNR / SSIM / LPIPS (intervals
    over the attacked clients), recognisable, labels, test accuracy (Wilson interval); ε is in
    :func:`decision_table`. A run's ``"rounds"`` (the every-round attack, where the strongest adversary
    ran it) adds a line. ``dp_sgd``: a point of the DP-SGD sweep
    (:func:`~gitutor.chapters.flower_dp.experiments.dp_point`, with its ``"rounds"``), added as the last
    lines. Written as two tables (:func:`~gitutor.tables.split_table`, the defense and what the server
    attacks in both), so that each fits the page's column: PSNR to recognisable, then labels and test
    accuracy."""
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
    return split_table(header, lines, DEFENSE_QUALITY_COLUMNS, keys=2)


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


def _holds_for(run: dict | None, point: dict | None = None) -> str:
    """The level and neighbouring relation of a defense run's ε (``run["epsilon"]``, add/remove
    adjacency), against whom it holds, and the ε at the level the other defense states — for a table
    cell. DP-SGD (``run`` None, its sweep ``point``): one example, zero-out (its clipped gradient zero, the
    client's reported count unchanged); a client of
    ``point["client_examples"]`` images as a whole at ``point["client_epsilon"]``. LocalDpMod: one client's
    update under zero-out (the client still sends noise on a zero update); one example of a client with
    several images at the mod's replacement ε (``run["view"].guarantee.epsilon``: sensitivity 2C, no
    per-example clipping)."""
    if run is None:
        whole = eps_text(point["client_epsilon"])
        return (
            "one example, zero-out, the server included; a client of "
            f"{point['client_examples']} images as a whole (zero-out): ε = {whole}"
        )
    if run["view"].guarantee.epsilon is None:
        return "—"
    if run["view"].noise_by == "client":
        one = eps_text(run["view"].guarantee.epsilon)
        return (
            "one client's update, zero-out, the server included; one example of a client "
            f"with several images: ε = {one}"
        )
    return "one client, zero-out, released model only"


def decision_table(
    runs: Mapping[str, dict],
    strongest: Mapping[str, dict],
    point: dict,
    plain: dict,
    rounds: int,
    delta: float,
) -> str:
    """Two Markdown tables, one line per defense in the same order (SecAgg+: its smallest aggregate; the
    DP-SGD line from the sweep ``point``), separated by a blank line, so that each fits the page's
    column. The first: what the defense promises — who must be trusted, ε (``run["epsilon"]``: Opacus
    RDP over ``rounds`` rounds under add/remove adjacency, the DP-SGD sweep's relation; ``delta``: the sweep's δ, in the header where every ε shares it), whom it holds for and
    against — and which adversary the attacker's envelope of
    :func:`~gitutor.chapters.flower_dp.strongest.envelope` kept (per client, by gradient distance, no
    truth used). The second: what that envelope left — its PSNR and recognisable count — and what the
    defense cost: test accuracy and that accuracy minus the undefended run's on the same test images
    (paired; DP-SGD against the sweep's σ = 0 point ``plain``)."""
    k = len(strongest["secagg+"]["attacker"]["rows"][0]["truth"])
    names = {
        name: NAMES[name] + (f" (k = {k})" if name == "secagg+" else "")
        for name in runs
    } | {"dp-sgd": f"Opacus DP-SGD, σ = {point['sigma']:g}"}
    guarantees = {name: run["view"].guarantee for name, run in runs.items()}
    deltas = {g.delta for g in guarantees.values() if g.epsilon is not None} | {delta}
    shared = len(deltas) == 1

    def eps(epsilon, its_delta) -> str:
        if epsilon is None:
            return "none (no DP)"
        return eps_text(epsilon) + ("" if shared else f" (δ = {its_delta:g})")

    lines = [
        [
            names[name],
            TRUSTED[name],
            eps(run["epsilon"], guarantees[name].delta),
            _holds_for(run),
            _kept(strongest[name]["wins"]),
            *_quality(strongest[name]["attacker"]),
            format_interval(run["accuracy"], 2, False),
            "—"
            if name == "none"
            else _difference(run["outcomes"], runs["none"]["outcomes"]),
        ]
        for name, run in runs.items()
    ]
    lines.append(
        [
            names["dp-sgd"],
            TRUSTED["dp-sgd"],
            eps(point["epsilon"], delta),
            _holds_for(None, point),
            _kept(strongest["dp-sgd"]["wins"]),
            *_quality(strongest["dp-sgd"]["attacker"]),
            format_interval(point["accuracy_interval"], 2, False),
            _difference(point["outcomes"], plain["outcomes"]),
        ]
    )
    accountant = f"ε over {rounds} rounds (" + (f"δ = {delta:g}, " if shared else "")
    header = [
        "defense",
        "who must be trusted",
        accountant + "Opacus RDP, add/remove)",
        "ε holds for",
        "adversary kept (per client)",
        "PSNR (dB)",
        "recognisable",
        f"test accuracy (chance {CHANCE:g})",
        "minus undefended",
    ]
    return split_table(header, lines, DECISION_PROMISE_COLUMNS)


def strongest_table(strongest: Mapping[str, dict], sigma: float, k: int) -> str:
    """Per defense, PSNR (dB; interval over the attacked clients) of each adversary — IG with restarts,
    IG on every round at its own model (where run), LTI — the attacker's envelope (kept by the matching
    distance over the rounds the server holds) with its recognisable count, the oracle envelope (kept by PSNR: an upper bound no
    attacker can pick), and the step from which the restarted IG's mean PSNR stays within 1 dB of
    its last (:func:`~gitutor.chapters.flower_dp.report.flat_step`). Written as two tables
    (:func:`~gitutor.tables.split_table`), so that each fits the page's column: the adversaries, then
    the envelopes with the flat step."""
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
    return split_table(header, lines, STRONGEST_ADVERSARY_COLUMNS)


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
