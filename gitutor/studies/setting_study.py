"""The setting study of chapter 04: which setting lets IG, GradInversion and stepwise
GradInversion recover a whole photograph, changing one factor at a time from a base setting.

A *setting* fixes the network (architecture, trained substitute or random weights), the image
size, the batch size, the prior weights (TV and R_BN at the paper's λ_tv = 0.01, λ_BN = 1e-4
times ``prior_scale``; Ye et al., AAAI 2024, §Experiments) and the client's BatchNorm mode
(eval: running statistics, as Ye et al.; train: batch statistics, where R_BN is off because it
compares with running statistics the client did not use) and the learning rate of the signed
Adam update (0.1 in the paper, then × 0.33 at 3/8, 5/8 and 7/8 of the budget). A *trial* runs one method on one
batch of :data:`gitutor.data.ATTACKED_PHOTOGRAPHS` for ``iterations`` steps and
scores the snapshots along the way (PSNR, SSIM after Hungarian matching): the curve is the
trajectory of one run whose lr schedule spans the whole budget.

The base setting is the shipped trained ResNet-20 substitute at 32 px, B = 1, eval mode, with
ten times the paper's prior weights: ``gitutor``'s TV is a mean over pixels, not a sum, so the
paper's λ_tv = 0.01 makes the prior almost vanish; ×1, ×0.1 and ×100 are among the factors.
"""
from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace

import torch

from gitutor.attacks.comparison import run_attack
from gitutor.data import (ATTACKED_PHOTOGRAPHS, TRAINING_PHOTOGRAPHS, attacked_photographs,
                          bundled_crops)
from gitutor.federated.client import client_gradients
from gitutor.files import read_json
from gitutor.metrics import match_batch, psnr, ssim
from gitutor.models import calibrate_batchnorm
from gitutor.models.substitute import load_substitute, substitute_network
from gitutor.seeding import make_generator
from gitutor.stats import format_interval, interval

METHODS = ("Inverting Gradients", "GradInversion", "Stepwise")
#: Iterations at which a trial's snapshot is scored (those ≤ its budget).
CHECKPOINTS = (0, 10, 30, 100, 300, 1000, 2000, 3000, 5000, 10_000, 15_000, 20_000, 30_000)
PAPER_TV, PAPER_BN = 0.01, 1e-4


@dataclass(frozen=True)
class Setting:
    """One point of the study (see the module docstring)."""

    architecture: str = "resnet20"
    weights: str = "trained"
    image_size: int = 32
    batch_size: int = 1
    prior_scale: float = 10.0
    bn_mode: str = "eval"
    lr: float = 0.1

    def __post_init__(self) -> None:
        if self.weights not in ("trained", "random"):
            raise ValueError(f"weights must be 'trained' or 'random', got {self.weights!r}")
        if self.bn_mode not in ("eval", "train"):
            raise ValueError(f"bn_mode must be 'eval' or 'train', got {self.bn_mode!r}")
        if not 1 <= self.batch_size <= len(ATTACKED_PHOTOGRAPHS):
            raise ValueError(f"batch_size must be in [1, {len(ATTACKED_PHOTOGRAPHS)}], "
                             f"got {self.batch_size!r}")

    def label(self, base: "Setting") -> str:
        """What differs from ``base``, e.g. ``"weights=random"`` (``"base"`` if nothing)."""
        changed = [f"{k}={v}" for k, v in asdict(self).items() if getattr(base, k) != v]
        return ", ".join(changed) or "base"


BASE = Setting()
#: One factor at a time: factor name → the settings that change it.
FACTORS = {
    "weights": [replace(BASE, weights="random")],
    "architecture": [replace(BASE, architecture="resnet34")],
    "resolution": [replace(BASE, image_size=size) for size in (64, 96, 128)],
    "batch size": [replace(BASE, batch_size=size) for size in (2, 4)],  # 8 > the 6 held-out photographs
    "prior weights": [replace(BASE, prior_scale=1.0), replace(BASE, prior_scale=100.0),
                      replace(BASE, prior_scale=0.1)],
    "BatchNorm mode": [replace(BASE, bn_mode="train")],
    "learning rate": [replace(BASE, lr=0.03)],
}


def study_batch(setting: Setting, index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Batch ``index`` of a setting (:func:`gitutor.data.attacked_photographs`), ``(B, 3, S, S)``
    in [0, 1], with distinct labels drawn from the substitute's classes (seed ``index``)."""
    labels = torch.randperm(len(TRAINING_PHOTOGRAPHS), generator=make_generator(index))
    x = attacked_photographs(setting.image_size, setting.batch_size, index)
    return x, labels[:setting.batch_size]


@functools.lru_cache(maxsize=4)
def study_model(architecture: str, weights: str, image_size: int,
                weights_path: str | None) -> torch.nn.Sequential:
    """The attacked network in eval mode: the trained substitute at ``weights_path``, or a
    random one whose BatchNorm statistics are calibrated on 64 auxiliary crops (cached)."""
    if weights == "trained":
        return load_substitute(weights_path)
    model = substitute_network(architecture)
    return calibrate_batchnorm(model, bundled_crops(64, image_size, 1, "aux")).eval()


def trial(context: Mapping, *, setting: Setting, method: str, batch: int, iterations: int,
          seed: int = 0) -> dict:
    """One scored run (what :func:`gitutor.sweeps.run_trials` calls).

    ``context["weights"]`` maps an architecture to its trained substitute's path; the trial runs on
    ``context.get("device", "cpu")`` and is scored on the CPU.

    Returns:
        ``{"curve": [[iteration, PSNR dB, SSIM], …] at the :data:`CHECKPOINTS` ≤ iterations
        and the end, "images": final reconstruction matched to the truth, "seconds"}``.
    """
    start = time.perf_counter()
    path = context["weights"].get(setting.architecture)
    device = torch.device(context.get("device", "cpu"))
    model = study_model(setting.architecture, setting.weights, setting.image_size, path).to(device)
    model.train(setting.bn_mode == "train")
    x, y = (t.to(device) for t in study_batch(setting, batch))
    shared = client_gradients(model, x, y)
    scale = setting.prior_scale
    settings = {"dropout": 0.3, "tv_weight": PAPER_TV * scale, "ig_tv_weight": PAPER_TV * scale,
                "bn_weight": PAPER_BN * scale if setting.bn_mode == "eval" else 0.0, "lr": setting.lr,
                "t1": 3000, "t2": 5000, "dlg_inner_steps": 20,
                "num_classes": len(TRAINING_PHOTOGRAPHS), "record_every": 10}
    attack_context = {"model": model, "batches": {(setting.batch_size, batch): (x, y, shared)},
                      "settings": settings}
    result = run_attack(attack_context, method, (setting.batch_size, batch), iterations, seed)
    model.eval()
    wanted = {t for t in CHECKPOINTS if t <= iterations} | {iterations}
    x = x.cpu()
    curve = [[t, *_scores(images.cpu(), x)] for t, images in result.snapshots if t in wanted]
    return {"curve": curve, "images": match_batch(result.images.cpu().clamp(0, 1), x),
            "seconds": time.perf_counter() - start}


def _scores(images: torch.Tensor, truth: torch.Tensor) -> tuple[float, float]:
    matched = match_batch(images.clamp(0, 1), truth)
    return psnr(matched, truth).mean().item(), ssim(matched, truth).mean().item()


def study_trials(settings: Sequence[Setting], iterations: int, batches: int = 3,
                 methods: Sequence[str] = METHODS) -> list[dict]:
    """Every (setting, method, batch) trial at ``iterations``; batch i starts from seed i."""
    return [dict(setting=s, method=m, batch=i, iterations=iterations, seed=i)
            for s in settings for m in methods for i in range(batches)]


def curves(outcomes: Sequence[Mapping]) -> dict[tuple[Setting, str, int], dict]:
    """``{(setting, method, iterations): {"t": [...], "PSNR": [Interval…], "SSIM": [...]}}``:
    mean and 95 % interval over batches at each checkpoint common to the batches.

    ``outcomes``: stored trials, each ``{"trial": {...}, "value": trial(...) output}``.
    """
    grouped: dict[tuple, list[list]] = {}
    for outcome in outcomes:
        t = outcome["trial"]
        grouped.setdefault((t["setting"], t["method"], t["iterations"]), []).append(
            outcome["value"]["curve"])
    summary = {}
    for key, runs in grouped.items():
        times = sorted(set.intersection(*({row[0] for row in run} for run in runs)))
        rows = [{row[0]: row for row in run} for run in runs]
        summary[key] = {"t": times, "n": len(runs),
                        "PSNR": [interval([r[t][1] for r in rows]) for t in times],
                        "SSIM": [interval([r[t][2] for r in rows]) for t in times]}
    return summary


def load_record(path) -> tuple[list[dict], dict]:
    """The stored trials of a setting-study record (``scripts/setting_study.py``) with their
    ``setting`` turned back into :class:`Setting`, and the record's per-phase provenance.

    Raises:
        FileNotFoundError: if there is no record at ``path``.
        ValueError: naming ``path`` if it is truncated or not JSON.
    """
    record = read_json(path, "setting-study record")
    outcomes = [{**o, "trial": {**o["trial"], "setting": Setting(**o["trial"]["setting"])}}
                for o in record["trials"] if o["value"] is not None]
    return outcomes, record["phases"]


def summary_rows(summary: Mapping[tuple, Mapping], at: Sequence[int] = (1000, 5000)) -> list[dict]:
    """One row per (setting, method): SSIM and PSNR means with 95 % intervals at the
    iterations ``at`` (``"—"`` where the run was shorter), batches, and the factor changed."""
    rows = []
    for (setting, method, iterations), curve in summary.items():
        row = {"setting": setting.label(BASE), "method": method, "budget": iterations,
               "batches": curve["n"]}
        for t in at:
            k = curve["t"].index(t) if t in curve["t"] else None
            row[f"SSIM at {t}"] = "—" if k is None else format_interval(curve["SSIM"][k], count=False)
        row["PSNR at end (dB)"] = format_interval(curve["PSNR"][-1], count=False)
        rows.append(row)
    return rows


def best_setting(summary: Mapping[tuple, Mapping]) -> tuple[tuple, object]:
    """The (setting, method, iterations) key whose final mean SSIM is highest, and that
    :class:`~gitutor.stats.Interval`.

    Raises:
        ValueError: if ``summary`` is empty.
    """
    if not summary:
        raise ValueError("summary is empty: no trials were recorded")
    key = max(summary, key=lambda k: summary[k]["SSIM"][-1].mean)
    return key, summary[key]["SSIM"][-1]


def curve_figure(summary: Mapping[tuple, Mapping], keys: Sequence[tuple], metric: str = "SSIM",
                 title: str = ""):
    """``metric`` (``"SSIM"`` or ``"PSNR"``) against iterations (log axis) for each key of
    ``summary`` in ``keys``: the mean over batches as a line, the 95 % interval as a band
    (clipped to the axes where a single batch makes it unbounded). Returns the figure."""
    import matplotlib.pyplot as plt

    if metric not in ("SSIM", "PSNR"):
        raise ValueError(f"metric must be 'SSIM' or 'PSNR', got {metric!r}")
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for key in keys:
        curve = summary[key]
        ts = [max(t, 1) for t in curve["t"]]
        means = [v.mean for v in curve[metric]]
        line, = ax.plot(ts, means, marker="o", ms=3, label=f"{key[1]} · {key[0].label(BASE)}")
        ax.fill_between(ts, [v.low for v in curve[metric]], [v.high for v in curve[metric]],
                        color=line.get_color(), alpha=0.15)
    ax.set(xscale="log", xlabel="iteration (1 = start)", ylabel=metric + (" (dB)" if metric == "PSNR" else ""),
           title=title)
    low, high = min(v.mean for k in keys for v in summary[k][metric]), max(
        v.mean for k in keys for v in summary[k][metric])
    pad = 0.25 * (high - low or 1)
    ax.set_ylim(low - pad, high + pad)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def final_images(outcomes: Sequence[Mapping], key: tuple) -> tuple[torch.Tensor, torch.Tensor]:
    """The truth and the final reconstructions of every batch of ``key`` = (setting, method,
    iterations), each ``(n · B, 3, S, S)`` in [0, 1], batches in order."""
    setting, method, iterations = key
    found = sorted((o for o in outcomes if (o["trial"]["setting"], o["trial"]["method"],
                                            o["trial"]["iterations"]) == key),
                   key=lambda o: o["trial"]["batch"])
    truth = torch.cat([study_batch(setting, o["trial"]["batch"])[0] for o in found])
    images = torch.cat([torch.tensor(o["value"]["images"], dtype=torch.float32) / 255 for o in found])
    return truth, images


def factor_keys(summary: Mapping[tuple, Mapping], factor: str, method: str,
                budget: int) -> list[tuple]:
    """The summary keys of ``method`` at ``budget`` iterations for the base setting and each
    setting of ``factor`` (:data:`FACTORS`) that was run."""
    wanted = [(setting, method, budget) for setting in (BASE, *FACTORS[factor])]
    return [key for key in wanted if key in summary]


def recorded_table(summary: Mapping[tuple, Mapping], setting: Setting,
                   iterations: int) -> dict[str, dict]:
    """Table 1 of a recorded setting: ``{method: {"PSNR": Interval, "SSIM": Interval}}`` at the
    end of each method's ``iterations``-long runs, preceded by the noise baseline (every run's
    starting point, iteration 0 of the Inverting Gradients runs), methods in :data:`METHODS`
    order. Intervals are 95 % over the batches (:func:`curves`).

    Raises:
        KeyError: naming the (setting, method, iterations) the summary lacks.
    """
    table = {}
    for method in METHODS:
        key = (setting, method, iterations)
        if key not in summary:
            raise KeyError(f"the record holds no runs of {method} in setting "
                           f"{setting.label(BASE)!r} at {iterations} iterations")
        curve = summary[key]
        if method == METHODS[0] and curve["t"][0] == 0:
            table["Noise N(0, I)"] = {m: curve[m][0] for m in ("PSNR", "SSIM")}
        table[method] = {m: curve[m][-1] for m in ("PSNR", "SSIM")}
    return table


def provenance_sentence(phase: Mapping) -> str:
    """How a recorded phase was made, as one Markdown sentence (date, commit, device, trials,
    wall time, command) from the record's ``phases[name]``."""
    dirty = " with uncommitted changes" if phase.get("dirty") else ""
    return (f"recorded on {phase['date']} at commit `{phase['commit'][:10]}`{dirty} on "
            f"{phase['device']}: {phase['trials']} trials of {phase['iterations']} iterations "
            f"in {_duration(phase['wall_seconds'])} of wall time, by "
            f"`{phase['command']}`")


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def ssim_ranking(table: Mapping[str, Mapping]) -> str:
    """One Markdown sentence on a :func:`recorded_table`: the method with the highest mean SSIM,
    its interval, and whether that interval clears every other row's (then the lead is
    resolved) or overlaps one (then it is not resolved at this budget)."""
    best = max(table, key=lambda name: table[name]["SSIM"].mean)
    top = table[best]["SSIM"]
    overlapping = [name for name in table if name != best
                   and table[name]["SSIM"].high >= top.low]
    lead = (f"**{best}** has the highest mean SSIM, {top}; ")
    if overlapping:
        return lead + ("its interval overlaps that of " + ", ".join(overlapping)
                       + ", so which leads is not resolved by this record")
    return lead + "its interval clears every other method's, so its lead is resolved"


def factor_figure(summary: Mapping[tuple, Mapping], budget: int):
    """Final SSIM (mean, 95 % interval) of every setting run for ``budget`` iterations, one row
    per setting (the base first, then :data:`FACTORS` order) and one marker colour per method:
    the whole one-factor-at-a-time study in one figure. Returns the figure.

    Raises:
        ValueError: if no setting was run for ``budget`` iterations.
    """
    import matplotlib.pyplot as plt

    order = [BASE, *(s for group in FACTORS.values() for s in group)]
    settings = [s for s in order if any((s, m, budget) in summary for m in METHODS)]
    if not settings:
        raise ValueError(f"no setting was run for {budget} iterations")
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(settings) + 1.2))
    for k, method in enumerate(METHODS):
        rows = [(i, summary[(s, method, budget)]["SSIM"][-1]) for i, s in enumerate(settings)
                if (s, method, budget) in summary]
        if not rows:
            continue
        ys = [i + 0.2 * (k - 1) for i, _ in rows]
        means = [v.mean for _, v in rows]
        errors = [[v.mean - max(v.low, -1.0) for _, v in rows],
                  [min(v.high, 1.0) - v.mean for _, v in rows]]
        ax.errorbar(means, ys, xerr=errors, fmt="o", ms=4, capsize=2, label=method)
    ax.set_yticks(range(len(settings)), [s.label(BASE) for s in settings])
    ax.invert_yaxis()
    ax.axvline(0, color="grey", lw=0.5)
    ax.set(xlabel=f"SSIM after {budget} iterations (mean, 95 % interval)")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def best_sentence(summary: Mapping[tuple, Mapping]) -> str:
    """Markdown: which (method, setting, budget) of ``summary`` ends with the highest mean SSIM
    (:func:`best_setting`), with its interval."""
    (setting, method, iterations), ssim_interval = best_setting(summary)
    return (f"**{method}** in the setting *{setting.label(BASE)}* after {iterations} "
            f"iterations: SSIM {ssim_interval}")


def seconds_per_iteration(outcomes: Sequence[Mapping]) -> dict[tuple[str, str], float]:
    """Mean wall seconds per iteration of each (setting label, method) in a record: what a trial
    cost on the recording machine (one Ray worker, one thread), scoring included."""
    costs: dict[tuple[str, str], list[float]] = {}
    for outcome in outcomes:
        t = outcome["trial"]
        costs.setdefault((t["setting"].label(BASE), t["method"]), []).append(
            outcome["value"]["seconds"] / t["iterations"])
    return {key: sum(v) / len(v) for key, v in costs.items()}


def budget_to_reach(summary: Mapping[tuple, Mapping], key: tuple, target: float) -> float | None:
    """Iterations at which a log-linear fit of the mean SSIM curve of ``key`` (its checkpoints
    from 100 iterations on) reaches ``target`` (:func:`gitutor.stats.budget_for`): an
    extrapolation, None when the curve does not rise or the budget would exceed 1 000 × the
    longest run."""
    from gitutor.stats import budget_for

    curve = summary[key]
    points = [(t, v.mean) for t, v in zip(curve["t"], curve["SSIM"]) if t >= 100]
    if len(points) < 2:
        return None
    return budget_for([t for t, _ in points], [m for _, m in points], target)


def key_label(key: tuple) -> str:
    """Markdown name of a summary key (setting, method, iterations): ``**method** · *setting*``."""
    return f"**{key[1]}** · *{key[0].label(BASE)}*"


def extrapolation_sentence(needed: float | None, seconds_per_iteration: float) -> str:
    """What :func:`budget_to_reach` found, as a clause: the iterations and, at
    ``seconds_per_iteration``, the hours for one photograph on one core — or that the curve
    gives no basis for an extrapolation."""
    if needed is None:
        return ("the curve does not rise fast enough for an extrapolation within 1 000 times its "
                "budget, so no budget on this setting can be predicted to reach the target")
    return (f"it would reach the target after about {needed:,.0f} iterations, "
            f"{needed * seconds_per_iteration / 3600:,.1f} h per photograph on one core "
            "(an extrapolation, not a measurement)")
