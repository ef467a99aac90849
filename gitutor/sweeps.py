"""Independent trials (method × batch × seed × budget) run in-process, in worker processes or on Ray.

``run_trials(function, trials, context=…)`` calls ``function(context, **trial)`` once per trial
and returns one :class:`TrialOutcome` per trial, in the order given. A trial that raises is
reported (its ``error`` holds the exception) and the others go on.

* ``engine="local"``: a plain loop in this process (what the quick profiles use; Ray is not
  imported).
* ``engine="processes"``: ``num_cpus`` worker processes of this machine (spawned, so each may
  open its own CUDA context), for a machine without Ray; ``context`` is pickled with every trial
  and each worker runs ``cpus_per_trial`` OpenMP threads (``OMP_NUM_THREADS``). A worker ends
  within a second of its parent (also when the parent is killed with SIGKILL).
* ``engine="ray"``: trials run on Ray actors, one per ``cpus_per_trial`` CPUs of the cluster
  (``pip install -e ".[sweeps]" in the checkout``). Without a running
  Ray, ``ray.init()`` starts a local one, which uses every core (and GPU) of the machine unless
  ``num_cpus`` caps it; with ``RAY_ADDRESS`` set (``ray.init`` reads it) the trials go to that
  cluster. ``context`` (e.g. the model and the batches) is put in Ray's object store once and
  unpickled once per actor (unpickling it for every trial made a worker grow by one context per
  trial). Each actor reserves ``cpus_per_trial`` CPUs (Ray sets its ``OMP_NUM_THREADS``, hence
  torch's thread count, to it) and ``gpus_per_trial`` GPUs; an actor that dies (e.g. out of
  memory) fails its trial, which is reported, and is replaced.

With ``journal=path`` every trial that finishes without an error is appended to that JSON-lines
file at once (:mod:`gitutor.journal`), keyed by its parameters and by its run
(:func:`gitutor.identity.run_identity`: the trial function, a digest of ``context`` and the code's
commit); running the same sweep again skips the journaled trials of the same run and
runs only the rest (after a kill, a reboot, or failed trials), and the outcomes of every trial are
read back from the journal, so a resumed sweep returns what an uninterrupted one returns. Values
are stored by :func:`gitutor.journal.to_json` (JSON, tuples, tensors) unless ``encode``/``decode``
convert them; a finished value that cannot be stored is kept in memory with a warning (a rerun runs
that trial again). Without a journal nothing is written, unless the environment variable
``GITUTOR_JOURNALS`` names a folder (``scripts/record.py`` sets it for the notebook it records):
then every sweep journals into ``<folder>/<function>-<hash of its trials and run>.jsonl``.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import inspect
import json
import multiprocessing
import os
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from gitutor.checkpoints import Checkpoint
from gitutor.checks import check_choice, check_int, check_real
from gitutor.identity import run_identity
from gitutor.journal import Journal, trial_key

ENGINES = ("local", "processes", "ray")
#: Iterations between two checkpoints of a journaled trial, unless ``checkpoint_every`` says otherwise.
CHECKPOINT_EVERY = 100
#: Environment variable naming a folder where every sweep without an explicit journal keeps one.
JOURNALS_ENV = "GITUTOR_JOURNALS"


@dataclass(frozen=True)
class TrialOutcome:
    """One trial: its parameters, what ``function`` returned (or None) and the error (or None)."""

    trial: dict
    value: Any = None
    error: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


def _call(
    function: Callable,
    context: Any,
    trial: Mapping,
    checkpoint: Checkpoint | None = None,
) -> TrialOutcome:
    gc.collect()  # what the previous trial left in reference cycles (counted in objects, not bytes)
    start = time.perf_counter()
    try:
        value = (
            function(context, **trial)
            if checkpoint is None
            else function(context, **trial, checkpoint=checkpoint)
        )
    except Exception as error:  # noqa: BLE001 - a failing trial is reported, not fatal
        last = traceback.format_exception_only(type(error), error)[-1].strip()
        return TrialOutcome(dict(trial), None, last, time.perf_counter() - start)
    return TrialOutcome(dict(trial), value, None, time.perf_counter() - start)


def run_trials(
    function: Callable[..., Any],
    trials: Sequence[Mapping[str, Any]],
    *,
    context: Any = None,
    engine: str = "local",
    num_cpus: int | None = None,
    cpus_per_trial: float = 1,
    gpus_per_trial: float = 0,
    progress: bool = False,
    journal: str | os.PathLike | None = None,
    encode: Callable[[Any], Any] | None = None,
    decode: Callable[[Any], Any] | None = None,
    checkpoint_every: int | None = None,
) -> list[TrialOutcome]:
    """Run ``function(context, **trial)`` for every trial; see the module docstring.

    Args:
        function: a module-level function or closure (pickled by Ray's cloudpickle for ``"ray"``).
        trials: keyword arguments, one mapping per trial.
        context: shared read-only data passed as the first argument.
        engine: ``"local"``, ``"processes"`` or ``"ray"``.
        num_cpus: worker processes for ``"processes"`` (None: one per core); CPUs of a local Ray
            started here (None: all); ignored for ``"local"`` or when Ray is already running or
            ``RAY_ADDRESS`` points to a cluster.
        cpus_per_trial, gpus_per_trial: resources each Ray actor (one trial at a time) reserves.
        progress: show a tqdm bar.
        journal: a JSON-lines file that keeps every finished trial (see the module docstring);
            None: none (unless ``GITUTOR_JOURNALS`` is set).
        encode, decode: turn a value into JSON for the journal and back (default:
            :func:`gitutor.journal.to_json` and :func:`~gitutor.journal.from_json`).
        checkpoint_every: with a journal, a ``function`` that takes a ``checkpoint`` keyword gets a
            :class:`~gitutor.checkpoints.Checkpoint` per trial, saved every ``checkpoint_every``
            iterations (None: :data:`CHECKPOINT_EVERY`; given without a journal: ValueError) in ``<journal>.checkpoints/`` and keyed by the trial and its run, so that a trial
            killed midway resumes from its last checkpoint on a rerun; it is removed once the trial is
            journaled.

    Returns:
        One :class:`TrialOutcome` per trial, in the order of ``trials`` (with a journal, the
        finished ones as read back from it: value decoded, ``seconds`` of the run that made it).

    Raises:
        TypeError: if ``function`` is not callable or, with a journal, for a trial whose parameters
            are not JSON (or dataclasses of it) or a ``context`` that cannot be digested.
        ValueError: for an unknown engine, a trial that is not a mapping, or non-positive resources;
            with a journal, for two trials with the same parameters, a journal path where no file
            can be written (a folder) or a journal line that is not an entry (naming the file and
            line) — all before any trial runs.
        ImportError: for ``engine="ray"`` when Ray is not installed (``pip install -e ".[sweeps]" in the checkout``).
    """
    if not callable(function):
        raise TypeError(f"function must be callable, got {type(function).__name__}")
    check_choice(engine, "engine", ENGINES)
    if isinstance(trials, (str, bytes, Mapping)) or not isinstance(trials, Iterable):
        raise TypeError(
            f"trials must be a list of mappings (keyword arguments of function), got {type(trials).__name__}"
        )
    trials = list(trials)  # a generator too
    if not all(isinstance(trial, Mapping) for trial in trials):
        raise ValueError(
            "trials must be a sequence of mappings (keyword arguments of function)"
        )
    check_real(cpus_per_trial, "cpus_per_trial", low=0.0, low_open=True)
    check_real(gpus_per_trial, "gpus_per_trial", low=0.0)
    if num_cpus is not None:
        check_int(num_cpus, "num_cpus", low=1)
    if checkpoint_every is not None:
        check_int(checkpoint_every, "checkpoint_every", low=1)
        if journal is None and not os.environ.get(JOURNALS_ENV):
            raise ValueError(
                "checkpoint_every needs a journal: checkpoints live beside it (journal=...)"
            )
    run = functools.partial(
        _run,
        function,
        context=context,
        engine=engine,
        num_cpus=num_cpus,
        cpus_per_trial=cpus_per_trial,
        gpus_per_trial=gpus_per_trial,
        progress=progress,
    )
    if journal is None and os.environ.get(JOURNALS_ENV):
        journal = _journal_in(Path(os.environ[JOURNALS_ENV]), function, trials, context)
    if journal is None:
        return run(trials, keep=lambda outcome: outcome)
    book = Journal(journal, encode, decode, run=run_identity(function, context))
    takes = "checkpoint" in inspect.signature(function).parameters
    every = CHECKPOINT_EVERY if checkpoint_every is None else checkpoint_every
    return _journaled(run, trials, book, every if takes else None)


def _journal_in(
    folder: Path, function: Callable, trials: Sequence[Mapping], context: Any
) -> Path | None:
    """``<folder>/<module.function>-<sha256 of the trials' keys and the run, 12 hex>.jsonl`` (None, with
    a warning, when the trials cannot be keyed: parameters that are not JSON, two trials with the same
    ones, or a context that cannot be digested)."""
    try:
        keys = [trial_key(trial) for trial in trials]
        if len(set(keys)) < len(keys):
            raise ValueError("two trials have the same parameters")
        keys.append(json.dumps(run_identity(function, context), sort_keys=True))
    except (TypeError, ValueError) as error:
        warnings.warn(
            f"{JOURNALS_ENV} is set but this sweep cannot be journaled: {error}",
            stacklevel=3,
        )
        return None
    name = f"{getattr(function, '__module__', '')}.{getattr(function, '__qualname__', 'trial')}"
    name = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
    digest = hashlib.sha256("\n".join(keys).encode()).hexdigest()[:12]
    return folder / f"{name}-{digest}.jsonl"


def _journaled(
    run: Callable, trials: Sequence[Mapping], book: Journal, every: int | None
) -> list[TrialOutcome]:
    """Run the trials ``book`` does not hold, journal each success, read every outcome back; with
    ``every``, give each trial its checkpoint (removed once the trial is journaled)."""
    keys = [trial_key(trial) for trial in trials]
    first: dict[str, int] = {}
    for index, key in enumerate(keys):
        if first.setdefault(key, index) != index:
            raise ValueError(
                f"trials[{first[key]}] and trials[{index}] have the same parameters {key}: "
                "a journal keeps one outcome per parameter set"
            )
    finished = book.read()
    todo = [index for index, key in enumerate(keys) if key not in finished]
    checkpoints = {}
    if every is not None:
        folder, run_key = (
            book.path.with_name(book.path.name + ".checkpoints"),
            json.dumps(book.run, sort_keys=True),
        )
        for index in todo:
            name = hashlib.sha256(f"{keys[index]} {run_key}".encode()).hexdigest()[
                :16
            ]  # other code: afresh
            checkpoints[keys[index]] = Checkpoint(
                folder / f"{name}.pt", every, key=f"{keys[index]} {run_key}"
            )

    def keep(outcome: TrialOutcome) -> TrialOutcome:
        if outcome.ok:
            try:
                book.append(outcome.trial, outcome.value, outcome.seconds)
            except (
                TypeError,
                ValueError,
            ) as error:  # the trial's work is not lost: it stays in memory
                warnings.warn(
                    f"trial {outcome.trial} finished but cannot be journaled ({error}); "
                    "a rerun will run it again",
                    stacklevel=2,
                )
            else:
                checkpoint = checkpoints.get(trial_key(outcome.trial))
                if checkpoint is not None:
                    checkpoint.remove()
        return outcome

    ran = dict(
        zip(
            todo,
            run(
                [trials[index] for index in todo],
                keep=keep,
                checkpoints=[checkpoints.get(keys[index]) for index in todo],
            ),
        )
    )
    finished = book.read()
    return [
        TrialOutcome(dict(trial), *finished[key]) if key in finished else ran[index]
        for index, (trial, key) in enumerate(zip(trials, keys))
    ]


def _run(
    function,
    trials,
    *,
    context,
    engine,
    num_cpus,
    cpus_per_trial,
    gpus_per_trial,
    progress,
    keep,
    checkpoints=None,
):
    """The outcomes of ``trials`` by ``engine``, each passed through ``keep`` as soon as it finishes;
    ``checkpoints[i]`` (None: none) is trial i's checkpoint."""
    if not trials:
        return []
    checkpoints = checkpoints or [None] * len(trials)
    if engine == "local":
        return [
            keep(_call(function, context, trial, checkpoint))
            for trial, checkpoint in tqdm(
                list(zip(trials, checkpoints)), desc="trials", disable=not progress
            )
        ]
    if engine == "processes":
        return _run_in_processes(
            function,
            trials,
            checkpoints,
            context,
            num_cpus,
            cpus_per_trial,
            progress,
            keep,
        )
    return _run_on_ray(
        function,
        trials,
        checkpoints,
        context,
        num_cpus,
        cpus_per_trial,
        gpus_per_trial,
        progress,
        keep,
    )


def _end_with_parent(parent: int) -> None:
    """A worker's initializer: a daemon thread that ends the worker once its parent ``parent`` is gone
    (a parent killed with SIGKILL cannot stop its workers itself; they would go on computing)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="end-with-parent").start()


def _run_in_processes(
    function, trials, checkpoints, context, workers, threads, progress, keep
):
    before = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = str(
        max(1, int(threads))
    )  # each spawned worker's torch reads it
    try:
        with ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_end_with_parent,
            initargs=(os.getpid(),),
        ) as pool:
            futures = {
                pool.submit(_call, function, context, dict(trial), checkpoint): index
                for index, (trial, checkpoint) in enumerate(zip(trials, checkpoints))
            }
            outcomes: list[TrialOutcome | None] = [None] * len(trials)
            for future in tqdm(
                as_completed(futures),
                total=len(futures),
                desc="trials (processes)",
                disable=not progress,
            ):
                outcomes[futures[future]] = keep(future.result())
            return outcomes
    finally:
        if before is None:
            del os.environ["OMP_NUM_THREADS"]
        else:
            os.environ["OMP_NUM_THREADS"] = before


class _Runner:
    """A Ray actor holding ``function`` and ``context``: the context is unpickled once per actor, not per trial."""

    def __init__(self, function: Callable, context: Any) -> None:
        self.function, self.context = function, context

    def run(self, trial: Mapping, checkpoint: Checkpoint | None = None) -> TrialOutcome:
        return _call(self.function, self.context, trial, checkpoint)


def _run_on_ray(
    function,
    trials,
    checkpoints,
    context,
    num_cpus,
    cpus_per_trial,
    gpus_per_trial,
    progress,
    keep,
):
    try:
        import ray
    except ImportError as error:
        raise ImportError(
            'engine="ray" needs Ray: pip install -e ".[sweeps]" in the checkout'
        ) from error
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(
            num_cpus=num_cpus,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    try:
        runner = ray.remote(
            num_cpus=cpus_per_trial, num_gpus=gpus_per_trial, max_restarts=0
        )(_Runner)
        shared = ray.put(context)
        slots = max(
            1,
            min(
                len(trials),
                int(ray.cluster_resources().get("CPU", 1) // cpus_per_trial),
            ),
        )
        idle = [runner.remote(function, shared) for _ in range(slots)]
        queue, pending = list(enumerate(trials)), {}
        outcomes: list[TrialOutcome | None] = [None] * len(trials)
        with tqdm(total=len(trials), desc="trials (ray)", disable=not progress) as bar:
            while queue or pending:
                while queue and idle:
                    index, trial = queue.pop(0)
                    actor = idle.pop()
                    pending[actor.run.remote(dict(trial), checkpoints[index])] = (
                        index,
                        actor,
                    )
                done, _ = ray.wait(list(pending), num_returns=1)
                index, actor = pending.pop(done[0])
                try:
                    outcomes[index] = keep(ray.get(done[0]))
                    idle.append(actor)
                except (
                    ray.exceptions.RayError
                ) as error:  # the actor died (e.g. out of memory): report, replace
                    first_line = (str(error).strip().splitlines() or [""])[0]
                    outcomes[index] = TrialOutcome(
                        dict(trials[index]),
                        None,
                        f"{type(error).__name__}: {first_line}",
                    )
                    idle.append(runner.remote(function, shared))
                bar.update()
        return outcomes
    finally:
        if started_here:
            ray.shutdown()


def failures(outcomes: Sequence[TrialOutcome]) -> str:
    """A short Markdown list of the failed trials ("" when every trial succeeded)."""
    return "\n".join(
        f"* trial {outcome.trial}: {outcome.error}"
        for outcome in outcomes
        if not outcome.ok
    )
