"""Chapter 08's defense tables: what each Flower defense leaves the server, and the decision table.

Every number comes from the runs of :mod:`.defenses` and the DP-SGD sweep of :mod:`.experiments`;
the fixed words (who must be trusted, where the noise is added) are the defenses' designs as Flower's
and Opacus' documentation state them.
"""

from __future__ import annotations

from collections.abc import Mapping

from gitutor.chapters.flower_dp.report import envelope, eps_text
from gitutor.paired import paired_difference
from gitutor.stats import format_interval
from gitutor.tables import markdown_table

NAMES = {"none": "none (FedAvg)", "secagg+": "SecAgg+", "central-dp-server-clipping":
         "central DP, server-side clipping", "central-dp-client-clipping":
         "central DP, client-side clipping", "local-dp": "LocalDpMod"}

#: Who must be trusted not to invert a client's update, by design of each defense.
TRUSTED = {
    "none": "the server: it holds every client's update",
    "secagg+": "a server that does not collude with the reconstruction threshold of clients nor drop or "
               "fake clients to shrink the aggregate towards one update; it holds the aggregate of the round's "
               "clients",
    "central-dp-server-clipping": "the server: it receives every raw update and noises only the average",
    "central-dp-client-clipping": "the server: it receives every clipped update without noise",
    "local-dp": "nobody for the update: the client clips and noises it with its own seed",
    "dp-sgd": "nobody for the update: the client clips each example's gradient and noises each step "
              "with its own seed",
}


def _scores(summary: dict) -> list[str]:
    lpips = "n/a" if summary["lpips"] is None else format_interval(summary["lpips"], 3, False)
    return [format_interval(summary["psnr"], 1, False), format_interval(summary["ssim"], 2, False),
            lpips, f"{summary['recognised']}/{summary['images']}"]


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
    if g.level == "update":
        return (f"{g.epsilon:g} per round (client's update), ≤ ({rounds * g.epsilon:g}, {rounds * g.delta:g}) "
                f"over {rounds} rounds by basic composition (a loose bound: ε and δ both add up); "
                "Gaussian mechanism")
    return (f"{eps_text(g.epsilon)} client-level over {rounds} rounds, δ = {g.delta:g} (Opacus RDP); "
            "for the released model only")


def defense_table(runs: Mapping[str, dict], rounds: int) -> str:
    """One line per attack on a defense run: what the server attacked, PSNR / SSIM / LPIPS (intervals
    over the attacked clients), recognisable, labels, test accuracy (Wilson interval); ε is in
    :func:`decision_table`."""
    header = ["defense", "the server attacks", "PSNR (dB)", "SSIM", "LPIPS", "recognisable",
              "labels", "test accuracy"]
    lines = []
    for name, run in runs.items():
        attacks = {"round 1's update as received" if name != "central-dp-server-clipping"
                   else "round 1's update after its own clipping": run["round1"],
                   f"mean of the {rounds} rounds' updates": run["average"]}
        for what, summary in attacks.items():
            if summary is None:
                continue
            lines.append([NAMES[name], what, *_scores(summary), f"{summary['label_rate']:.0%}",
                          format_interval(run["accuracy"], 2, False)])
    return markdown_table(header, lines)


def secagg_table(aggregates: Mapping[int, dict]) -> str:
    """One line per k: PSNR / SSIM / LPIPS (means over a group's k images; 95 % intervals over the
    groups' aggregates), recognisable images of all groups."""
    header = ["clients in the aggregate k", "groups", "PSNR (dB)", "SSIM", "LPIPS", "recognisable"]
    return markdown_table(header, [[str(k), str(len(found["rows"])), *_scores(found)]
                                   for k, found in aggregates.items()])


def _difference(outcomes, baseline) -> str:
    return format_interval(paired_difference([float(v) for v in outcomes],
                                             [float(v) for v in baseline]), 2, False)


def decision_table(runs: Mapping[str, dict], aggregates: Mapping[int, dict], point: dict,
                   plain: dict, rounds: int) -> str:
    """Defense × who must be trusted × ε (level) × the strongest attack run × accuracy: one line per
    defense, the DP-SGD line from the sweep ``point``; SecAgg+ scored on its smallest aggregate. The
    last column: accuracy minus the undefended run's on the same test images (paired; DP-SGD against
    the sweep's σ = 0 point ``plain``)."""
    header = ["defense", "who must be trusted", "ε (level, accountant)", "strongest attack run",
              "PSNR (dB)", "recognisable", "test accuracy", "minus undefended"]
    lines = []
    for name, run in runs.items():
        if name == "secagg+":
            k = min(aggregates)
            found, what = aggregates[k], f"IG on the aggregate of k = {k} clients (batch of {k})"
        else:
            candidates = {"IG, round 1": run["round1"], f"IG, mean of {rounds} rounds": run["average"]}
            what, found = max(((w, s) for w, s in candidates.items() if s is not None),
                              key=lambda ws: ws[1]["psnr"].mean)
        lines.append([NAMES[name], TRUSTED[name], guarantee_text(run, rounds), what, *_quality(found),
                      format_interval(run["accuracy"], 2, False),
                      "—" if name == "none" else _difference(run["outcomes"], runs["none"]["outcomes"])])
    best = envelope(point)
    what = "IG, round 1" if best is point else f"IG, mean of {rounds} rounds"
    lines.append([f"Opacus DP-SGD, σ = {point['sigma']:g}", TRUSTED["dp-sgd"],
                  f"{eps_text(point['epsilon'])} per example over {rounds} rounds (Opacus RDP)", what,
                  *_quality(best), format_interval(point["accuracy_interval"], 2, False),
                  _difference(point["outcomes"], plain["outcomes"])])
    return markdown_table(header, lines)


def defense_rows(runs: Mapping[str, dict], aggregates: Mapping[int, dict], k: int) -> dict:
    """Reconstructions of the attacked clients' faces under each defense, for
    :func:`~gitutor.chapters.flower_dp.report.reconstruction_grid` (SecAgg+: the aggregate of the
    first ``k`` faces, the same faces in the same order; left out when ``k`` was not run)."""
    import torch

    rows = {}
    for name, run in runs.items():
        if name == "secagg+":
            if k in aggregates:
                rows[f"SecAgg+, k = {k}"] = aggregates[k]["rows"][0]["images"]
            continue
        for what, summary in (("", run["round1"]), (", mean", run["average"])):
            if summary is not None:
                label = NAMES[name].split(" (")[0].replace("`", "") + what  # figure text: no Markdown
                rows[label] = torch.cat([r["images"] for r in summary["rows"]])
    return rows


def truth_of(runs: Mapping[str, dict]):
    """The attacked clients' photographs, in the order of the rows of :func:`defense_rows`."""
    import torch

    return torch.cat([r["truth"] for r in runs["none"]["round1"]["rows"]])



def versus_none(runs: Mapping[str, dict], defense: str = "central-dp-client-clipping") -> str:
    """``defense``'s run against the undefended one, paired: the attack's PSNR over the same clients and
    the test accuracy over the same test images, each with whether its interval excludes 0."""
    def said(diff, unit):
        verdict = ("higher" if diff.low > 0 else "lower" if diff.high < 0 else "not resolved (covers 0)")
        return f"{format_interval(diff, 2, False)}{unit}, {verdict}"

    psnr = paired_difference([r["psnr"] for r in runs[defense]["round1"]["rows"]],
                             [r["psnr"] for r in runs["none"]["round1"]["rows"]])
    accuracy = paired_difference([float(v) for v in runs[defense]["outcomes"]],
                                 [float(v) for v in runs["none"]["outcomes"]])
    return (f"paired with the undefended run, the PSNR difference over the same clients is "
            f"{said(psnr, ' dB')}, and the accuracy difference over the same test images {said(accuracy, '')}.")
