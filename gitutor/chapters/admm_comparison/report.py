"""Chapter 07's summaries: final scores of the Fig. 1 comparison, what it reproduces, the Markdown
tables and short strings its prose pastes in (myst-nb ``glue``), and the paper-vs-run rows (the DLG
reproduction report §4–5, Fig. 1–2).

``runs`` below is ``{(kind, image index): {attack: AttackResult}}`` from
:func:`gitutor.chapters.admm_comparison.compare.compare_kind`; ``data`` is ``{kind: (images, labels)}`` from
:func:`~gitutor.chapters.admm_comparison.rounds.load_kinds`; ``tables`` is ``{kind: admm_compare.scores(...)}``.

Every score is taken on the reconstruction **clipped to [0, 1]** (:func:`scored`): DLG's dummy image is
unbounded and the ADMM variants drive it far outside the range of an image, but a reconstruction is an
estimate of an image in [0, 1], so the attacker clips it before anyone looks at it. (The iDLG code takes
the MSE of the raw dummy, which would make a dummy that left the range look worse than noise.)
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence

import torch

from gitutor.attacks import AttackResult
from gitutor.controls import RECOGNISABLE_PSNR
from gitutor.metrics import mse
from gitutor.results import interval_fields
from gitutor.stats import Interval, format_interval, success_interval
from gitutor.chapters.admm_comparison.rounds import NAMES
from gitutor.tables import markdown_table


def scored(images: torch.Tensor) -> torch.Tensor:
    """``images`` ``(B, C, H, W)`` clipped to [0, 1]: the reconstruction every score of the chapter
    measures (see the module docstring); shape and device unchanged."""
    return images.clamp(0, 1)


def snapshot_curve(
    result: AttackResult, truth: torch.Tensor, metric: Callable = mse
) -> list[float]:
    """``metric(snapshot, truth)`` of every recorded snapshot of ``result``, the snapshot clipped to
    [0, 1] (:func:`scored`); truth ``(B, C, H, W)`` in [0, 1]. Returns one float per snapshot.

    Raises:
        ValueError: as ``metric`` (e.g. a truth outside [0, 1]).
    """
    return [float(metric(scored(images), truth)) for _, images in result.snapshots]


def _span(summary: Interval, digits: int) -> str:
    return f"[{summary.low:.{digits}f}, {summary.high:.{digits}f}]"


def results_rows(
    tables: Mapping,
    cfg,
    *,
    gaps: Mapping[str, Interval],
    judgements: Mapping[str, Mapping],
    closed_form_error: float,
    lowest_cosine: float,
) -> list[dict]:
    """The paper-vs-run rows of the results record.

    The headline is the report's conclusion, that ADMM may protect privacy (§5), judged from this chapter's
    evidence kind by kind (:mod:`gitutor.chapters.admm_comparison.judgement`): per kind, the images that the
    attacker's pick of the three round-1 attacks on the increment makes recognisable, read *refuted* / *consistent* / not
    resolved by their 95 % Wilson interval against ½; the claim reads *refuted* when some kind refutes it
    (:func:`~gitutor.chapters.admm_comparison.judgement.claim_outcome`). The row's number is how many kinds
    refute it. Then the paired log10 MSE gaps of :func:`~gitutor.chapters.admm_comparison.compare.log_gaps`
    (pooled "both", DLG, iDLG; mean and 95 % interval) — the report states "clear vs noise", no number, so
    they are not comparable — per kind the fraction recognisable from the increment and from the gradient
    (95 % Wilson intervals), the closed-form error (float32) and the lowest round-2 cosine of the ablation.

    Args:
        tables: ``{kind: {attack: [(MSE, PSNR)]}}``; cfg: the chapter's profile; gaps: ``{"DLG", "iDLG",
            "both"}`` intervals; judgements: :func:`~gitutor.chapters.admm_comparison.judgement.kind_judgements`.

    Raises:
        KeyError: naming a missing gap or kind.
    """
    from gitutor.chapters.admm_comparison.judgement import claim_outcome, kinds_text

    n = gaps["both"].n
    kinds = ", ".join(NAMES[k] for k in tables)
    differences = profile_differences(cfg)
    setting = f"{n} images: {cfg.images_per_kind} each of {kinds}"
    T = RECOGNISABLE_PSNR

    def row(quantity, paper, this_run, unit, setting=setting, **extra):
        return {
            "quantity": quantity,
            "setting": setting,
            "paper": paper,
            "this_run": this_run,
            "unit": unit,
            "differences": differences,
        } | extra

    outcome = claim_outcome(judgements)
    refuting = sum(j["verdict"] == "refuted" for j in judgements.values())
    reason = (
        f"round 1, E = {cfg.local_steps}: −Δ/η = 2∇f; recognisable (≥ {T:.0f} dB) from it: "
        f"{kinds_text(judgements, NAMES)}"
    )  # ≤ 150 characters: the ledger's line
    rows = [
        row(
            "ADMM protects the training images from gradient inversion (the report's conclusion)",
            "DLG-ADMM and iDLG-ADMM stay noise (Fig. 1)",
            refuting,
            f"data kinds (of {len(judgements)}) that refute it: the 95 % Wilson interval of their images "
            "recognisable from −Δ/η lies above ½",
            headline=True,
            n=1,
            claim="ADMM may be an effective privacy-protection technique (§5, on Fig. 1; "
            "translated)",
            claim_outcome=outcome,
            claim_reason=reason,
            not_comparable="the report gives no number; judged per data kind from this chapter's evidence",
        )
    ]
    gap_words = "clear vs noise (Fig. 1); the report states no number"
    rows += [
        row(
            f"log10(MSE of {name}-ADMM / MSE of {name})"
            + (", the smaller of X = DLG, iDLG per image" if name == "X" else ""),
            gap_words,
            round(gaps[key].mean, 2),
            f"log10 ratio, mean; 95 % interval {_span(gaps[key], 2)}",
            not_comparable="the report states no number: the gap is this book's measure of clear vs noise",
            **interval_fields(gaps[key], 2),
        )
        for name, key in (("X", "both"), ("DLG", "DLG"), ("iDLG", "iDLG"))
    ]
    papers = {
        "gradient": "clear by ~280 iterations (Fig. 1)",
        "increment": "noise (Fig. 1; DLG-ADMM, iDLG-ADMM)",
    }
    attacks = {
        "gradient": "the better of DLG, iDLG on ∇f, by PSNR (an oracle, for reference)",
        "increment": "DLG or iDLG on −Δ/(2η) or cosine on −Δ/η, the attacker's pick by cosine "
        "to −Δ/η",
    }
    for kind, judged in judgements.items():
        for source in ("gradient", "increment"):
            rate = judged[source]
            rows.append(
                row(
                    f"images recognisable (PSNR ≥ {T:.0f} dB): {attacks[source]}",
                    papers[source],
                    round(rate.mean, 3),
                    f"fraction; 95 % Wilson interval {_span(rate, 2)}",
                    setting=f"{cfg.images_per_kind} images of {NAMES[kind]}",
                    **interval_fields(rate, 3),
                )
            )
    rows.append(
        row(
            "relative error of −Δ/η vs 2∇f (one step, first round)",
            "not stated",
            float(f"{closed_form_error:.2g}"),
            "ratio",
            setting="float32, first image of the first kind",
        )
    )
    rows.append(
        row(
            "lowest cos(−Δ/η, ∇f(w)), round 2",
            "not studied",
            round(lowest_cosine, 3),
            "cosine",
            setting=f"ρ ∈ {cfg.cosine_rhos}, E ∈ {cfg.cosine_local_steps}, one earlier round",
            differences=profile_differences(
                cfg,
                rho=list(cfg.cosine_rhos),
                local_steps=list(cfg.cosine_local_steps),
                round_number=2,
            ),
        )
    )
    return rows


def round_two_table(found: Mapping) -> str:
    """Markdown table of :func:`~gitutor.chapters.admm_comparison.rounds.round_two_attacks`: per attack the
    images recognisable (PSNR ≥ :data:`~gitutor.controls.RECOGNISABLE_PSNR` dB) with their 95 % Wilson
    interval, and the PSNR per image (dB)."""
    lines = []
    for name, psnrs in found["psnr"].items():
        hits = [p >= RECOGNISABLE_PSNR for p in psnrs]
        share = success_interval(hits)
        count = f"{sum(hits)}/{len(hits)} {_span(share, 2)}"
        lines.append([name, count, ", ".join(f"{p:.1f}" for p in psnrs)])
    header = [
        "attack on round 2's Δ",
        "recognisable [95 % Wilson]",
        "PSNR per image (dB)",
    ]
    return markdown_table(header, lines)


def round_two_rows(found: Mapping, cfg, kind: str, iterations: int) -> list[dict]:
    """The results record's rows for the second round (this book's addition: the report attacks round 1
    only): per attack of :func:`~gitutor.chapters.admm_comparison.rounds.round_two_attacks`, the fraction of
    the images recognisable with its 95 % Wilson interval (``paper``: "not studied"), and the closed form's
    largest relative error. Their ``differences`` name round 2 with E = 1 and the profile's ρ."""
    differences = profile_differences(cfg, local_steps=1, round_number=2)
    setting = (
        f"{len(found['error'])} images of {NAMES[kind]}, round 2, E = 1, ρ = {cfg.rho}, "
        f"η = {cfg.lr}, {iterations} L-BFGS steps each"
    )
    rows = []
    for name, psnrs in found["psnr"].items():
        rate = success_interval([p >= RECOGNISABLE_PSNR for p in psnrs])
        rows.append(
            {
                "quantity": f"images recognisable (PSNR ≥ {RECOGNISABLE_PSNR:.0f} dB), round 2: {name}",
                "setting": setting,
                "paper": "not studied (the report attacks round 1)",
                "this_run": round(rate.mean, 3),
                "unit": f"fraction; 95 % Wilson interval {_span(rate, 2)}",
                "differences": differences,
                **interval_fields(rate, 3),
            }
        )
    rows.append(
        {
            "quantity": "relative error of the closed form's ∇f(w), round 2 (largest over the images)",
            "setting": setting + ", float32",
            "paper": "not studied",
            "this_run": float(f"{max(found['error']):.2g}"),
            "unit": "ratio",
            "differences": differences,
        }
    )
    return rows


def _setting_values(values, name: str, check) -> str:
    """``values`` (one value or a non-empty sequence of them) as text, each checked by ``check``."""
    many = isinstance(values, (list, tuple))
    if many and not values:
        raise ValueError(f"{name} must hold at least one value, got {values!r}")
    for value in values if many else [values]:
        if isinstance(value, bool) or not check(value):
            raise ValueError(f"{name} must be {check.__doc__}, got {value!r}")
    return "{" + ", ".join(f"{v:g}" for v in values) + "}" if many else f"{values:g}"


def _positive(value) -> bool:
    """a number > 0 (or a sequence of them)"""
    return isinstance(value, (int, float)) and value > 0


def _steps(value) -> bool:
    """an int ≥ 1 (or a sequence of them)"""
    return isinstance(value, int) and value >= 1


def profile_differences(
    cfg,
    *,
    rho: float | Sequence[float] | None = None,
    local_steps: int | Sequence[int] | None = None,
    round_number: int = 1,
) -> str:
    """How a row's setting differs from the report's, in one line (a row's ``differences``): the
    profile's image side and budgets, and the FedADMM round the row attacked — ρ and E (one value, or
    the grid a row spans; default the profile's ``cfg.rho`` and ``cfg.local_steps``) and
    ``round_number`` (1: the first round, as in the report; 2: after one earlier round).

    Raises:
        ValueError: naming ``round_number`` when it is not 1 or 2, ``rho`` when a value is not > 0, or
            ``local_steps`` when a value is not an int ≥ 1.
    """
    if isinstance(round_number, bool) or round_number not in (1, 2):
        raise ValueError(f"round_number must be 1 or 2, got {round_number!r}")
    rho = _setting_values(cfg.rho if rho is None else rho, "rho", _positive)
    steps = cfg.local_steps if local_steps is None else local_steps
    steps = _setting_values(steps, "local_steps", _steps)
    which = (
        "first round" if round_number == 1 else "second round (after one earlier round)"
    )
    return (
        f"{cfg.profile} profile: {cfg.image_size}×{cfg.image_size} images (paper 32×32), "
        f"{iterations_note(cfg)} (paper 300), random-init LeNet, ρ={rho}, η={cfg.lr}, "
        f"E={steps}, {which}"
    )


def true_class_probabilities(
    model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor
) -> list[float]:
    """The probability ``model`` gives the true class of each of ``images`` ``(n, C, H, W)`` (int labels
    ``(n,)``). Below ½ the round-1 target −Δ/η = 2∇f has a last-layer bias entry 2(p_c − 1) < −1 that no
    image and label can produce (the entry p_c − 1 of a gradient lies in (−1, 0)).

    Raises:
        ValueError: naming ``labels`` when images and labels are empty or differ in number.
    """
    if len(images) == 0 or len(labels) != len(images):
        raise ValueError(
            f"labels must hold one label per image (≥ 1), got {len(labels)} for {len(images)}"
        )
    with torch.no_grad():
        probabilities = torch.softmax(model(images), dim=-1)
    return probabilities[torch.arange(len(labels)), labels].tolist()


def pixel_range(runs: Mapping, name: str) -> tuple[float, float]:
    """Smallest and largest pixel value of attack ``name``'s final (unclipped) images over all ``runs``:
    how far the dummy left the [0, 1] range of the true images.

    Raises:
        KeyError: if a run lacks ``name``; ValueError: if ``runs`` is empty.
    """
    if not runs:
        raise ValueError("runs is empty")
    images = [results[name].images for results in runs.values()]
    return min(float(x.min()) for x in images), max(float(x.max()) for x in images)


def data_note(cfg, data_root: str) -> str:
    """What the chapter attacks, in a few words: the profile's ``cfg.data``, or the bundled stand-ins
    when ``data_root`` is ``"bundled"`` (the full profile's code path offline)."""
    if str(data_root) == "bundled":
        return "bundled stand-ins (digits, photographs, LFW subset) with the profile's classes and channels"
    return cfg.data


def iterations_note(cfg) -> str:
    """``"20 L-BFGS steps on digits (MNIST stand-in), 80 on … and 20 on …"``: the attack budget per
    data kind."""
    parts = [f"{cfg.iterations[kind]} on {NAMES[kind]}" for kind in cfg.kinds]
    listed = (
        parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    )
    return listed.replace(" on ", " L-BFGS steps on ", 1)


def rate_table(
    tables: Mapping[str, Mapping[str, Sequence[tuple[float, float]]]], threshold: float
) -> str:
    """Markdown table: per data kind and attack, images recognisable (PSNR ≥ ``threshold`` dB) "k / n" and
    the median PSNR (dB) over the kind's images."""
    attacks = list(next(iter(tables.values())))
    lines = []
    for kind, table in tables.items():
        cells = []
        for name in attacks:
            values = [p for _, p in table[name]]
            cells.append(
                f"{sum(v >= threshold for v in values)} / {len(values)} "
                f"({statistics.median(values):.0f} dB)"
            )
        lines.append([NAMES[kind], *cells])
    return markdown_table(["data", *attacks], lines)


def gap_table(
    per_kind: Mapping[str, Mapping[str, Interval]], pooled: Mapping[str, Interval]
) -> str:
    """Markdown table of the paired log10 MSE gaps (mean [95 % interval] (n)) per data kind and pooled."""
    names = list(pooled)
    lines = [
        [NAMES[kind], *(format_interval(gaps[name]) for name in names)]
        for kind, gaps in per_kind.items()
    ]
    lines.append(["all kinds", *(format_interval(pooled[name]) for name in names)])
    headers = {
        "DLG": "DLG-ADMM / DLG",
        "iDLG": "iDLG-ADMM / iDLG",
        "both": "smaller of the two",
    }
    return markdown_table(["data", *(headers.get(n, n) for n in names)], lines)


def gap_side(gap: Interval, orders: float = 0.0) -> str:
    """Where a pooled paired log10 gap's 95 % interval lies against ``orders`` (default 0: the ADMM
    variant's MSE is no larger than the gradient attack's; the report states no number to test against):
    ``"wholly above"``, ``"wholly below"`` or ``"on both sides of"``."""
    if gap.low > orders:
        return "wholly above"
    return "wholly below" if gap.high < orders else "on both sides of"


def cosine_table(
    cosines: Mapping[tuple[int, float, int], float],
    ratios: Mapping[tuple[int, float, int], float],
) -> str:
    """Markdown table of :func:`~gitutor.chapters.admm_comparison.rounds.alignment_grid`: per (round, ρ) row and E
    column, ``cos(−Δ/η, ∇f(w)) / ×‖−Δ/η‖ ÷ ‖∇f(w)‖``."""
    rounds = sorted({key[0] for key in cosines})
    rhos = sorted({key[1] for key in cosines})
    steps = sorted({key[2] for key in cosines})
    rows = [
        [
            r,
            rho,
            *(f"{cosines[r, rho, e]:.3f} / ×{ratios[r, rho, e]:.2g}" for e in steps),
        ]
        for r in rounds
        for rho in rhos
    ]
    return markdown_table(["round", "ρ", *(f"E = {e}" for e in steps)], rows)


def cosine_summary(cosines: Mapping[tuple[int, float, int], float]) -> dict:
    """Glue-ready values of the cosine grid: ``round1_low``/``round1_high`` (E = 1, round 1; the closed
    form says 1), ``round2_low``/``round2_high``, ``lowest_rho``/``lowest_steps`` (where round 2's lowest
    cosine is) and ``round2_sign`` (``"all negative"``, ``"some negative"`` or ``"all positive"``: the
    round-2 cosines' signs).

    Raises:
        ValueError: if the grid lacks round 1 with E = 1 or round 2.
    """
    first = [v for (r, _, e), v in cosines.items() if r == 1 and e == 1]
    second = {key: v for key, v in cosines.items() if key[0] == 2}
    if not first or not second:
        raise ValueError(
            "cosines must hold round 1 with E = 1 and round 2, keyed (round, rho, E)"
        )
    lowest = min(second, key=second.get)
    sign = (
        "all negative"
        if max(second.values()) < 0
        else "some negative"
        if second[lowest] < 0
        else "all positive"
    )
    return {
        "round1_low": min(first),
        "round1_high": max(first),
        "round2_low": second[lowest],
        "round2_high": max(second.values()),
        "lowest_rho": lowest[1],
        "lowest_steps": lowest[2],
        "round2_sign": sign,
    }


def local_steps_summary(
    cosines: Mapping[tuple[int, float, int], float],
    ratios: Mapping[tuple[int, float, int], float],
) -> dict:
    """Glue-ready facts on E local steps in round 1 (w = z, π = 0): ``lowest`` cosine of −Δ/η with ∇f over
    every ρ and E, ``steps`` (the largest E), ``ratio_low``/``ratio_high`` (‖−Δ/η‖ ÷ ‖∇f‖ at that E over
    ρ) and ``twice_steps`` (2E, the ratio of E steps that all saw the gradient at z).

    Raises:
        ValueError: if the grid has no round 1.
    """
    first = {key: value for key, value in cosines.items() if key[0] == 1}
    if not first:
        raise ValueError("cosines must hold round 1, keyed (round, rho, E)")
    steps = max(key[2] for key in first)
    at = [ratios[key] for key in first if key[2] == steps]
    return {
        "lowest": min(first.values()),
        "steps": steps,
        "ratio_low": min(at),
        "ratio_high": max(at),
        "twice_steps": 2 * steps,
    }
