"""``sampan.experiments.sweep``: Optuna sweeps over a function or a notebook, every trial a recorded run.

A notebook trial executes the notebook with papermill, its ``parameters`` cell set to the trial's
values; the fits inside it are recorded as child runs of the trial's run, and each epoch reports the
chosen metric to Optuna, whose pruner may stop a hopeless trial. The Optuna study lives in an RDB
store beside the MLflow database (``optuna.db``; ``SAMPAN_SWEEP_STORAGE`` points elsewhere), so
several worker processes, or machines sharing a database, work on one study.
"""
from __future__ import annotations

import contextvars
import datetime as _dt
import json
import os
import re
import subprocess
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Literal

from sampan.errors import SampanError, bad_argument, check_int
from sampan.experiments import store
from sampan.experiments.space import parse_space, suggest
from sampan.utils.imports import python_command

STORAGE_ENV = "SAMPAN_SWEEP_STORAGE"
TRIAL_ENV = "SAMPAN_SWEEP_TRIAL"
METRIC_ATTR = "sampan.metric"    # the metric a study optimises, kept in the study (its direction is Optuna's)
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")  # a folder under sweeps_dir(), a tag value in filters
_reporter: contextvars.ContextVar = contextvars.ContextVar("sampan_sweep_reporter", default=None)


class TrialFailed(SampanError):
    """A trial's function or notebook raised; the trial is recorded as failed and the sweep goes on."""


# ---------------------------------------------------------------- where studies live
def sweep_storage() -> str:
    """``$SAMPAN_SWEEP_STORAGE`` or ``sqlite:///<tracking folder>/optuna.db`` (beside the MLflow database)."""
    if os.environ.get(STORAGE_ENV):
        return os.environ[STORAGE_ENV]
    db = store.sqlite_path(store.tracking_uri())
    folder = db.parent if db is not None else store.tracking_dir()
    return f"sqlite:///{(folder / 'optuna.db').as_posix()}"


def _storage(url: str):
    import optuna

    kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}
    return optuna.storages.RDBStorage(url, engine_kwargs=kwargs)


def sweeps_dir() -> Path:
    """Executed trial notebooks: ``$SAMPAN_DATA/sweeps/<study>/``."""
    from sampan.utils.io import data_home

    return data_home() / "sweeps"


# ---------------------------------------------------------------- pruning from a fit's epochs
def report_epoch(epoch: int, logs: dict) -> None:
    """Called by the recorder after each epoch: reports the sweep's metric to the running trial and
    raises ``optuna.TrialPruned`` when the pruner says so."""
    reporter = _reporter.get()
    if reporter is None and os.environ.get(TRIAL_ENV):
        reporter = _EnvReporter.get()
    if reporter is not None:
        reporter(epoch, logs)


class _EnvReporter:
    """In a notebook trial's kernel: the trial named by ``$SAMPAN_SWEEP_TRIAL``."""

    _cached: tuple[str, Callable] | None = None

    @classmethod
    def get(cls) -> Callable:
        spec = os.environ[TRIAL_ENV]
        if cls._cached is None or cls._cached[0] != spec:
            import optuna

            info = json.loads(spec)
            study = optuna.load_study(study_name=info["study"], storage=_storage(info["storage"]))
            cls._cached = (spec, _make_reporter(optuna.trial.Trial(study, info["trial_id"]), info["metric"]))
        return cls._cached[1]


def _make_reporter(trial: Any, metric: str) -> Callable:
    def report(epoch: int, logs: dict) -> None:
        import optuna

        if isinstance(logs.get(metric), (int, float)):
            trial.report(float(logs[metric]), epoch)
            if trial.should_prune():
                raise optuna.TrialPruned(f"trial {trial.number} pruned at epoch {epoch + 1}: "
                                         f"{metric}={logs[metric]:.4g}")
    return report


# ---------------------------------------------------------------- one trial
def _trial_run(study_name: str, trial: Any, params: dict, target: str, experiment: str | None):
    from mlflow.entities import Param

    client = store.client()
    run = client.create_run(store.experiment_id(experiment), run_name=f"{study_name}-trial-{trial.number}",
                            tags={"sampan.kind": "trial", "sampan.sweep": study_name, "sampan.trial": str(trial.number),
                                  "sampan.source": target, "mlflow.source.name": target})
    client.log_batch(run.info.run_id, params=[Param(k, str(v)) for k, v in params.items()])
    return client, run.info.run_id


def _finish(client, run_id: str, *, status: str, metric: str, value: float | None, error: dict | None = None) -> None:
    from mlflow.entities import Metric

    if value is not None:
        client.log_batch(run_id, metrics=[Metric(metric, float(value), int(_dt.datetime.now().timestamp() * 1000), 0)])
    for key, text in (error or {}).items():
        client.set_tag(run_id, f"sampan.{key}", str(text)[:4000])
    client.set_terminated(run_id, status=status)


def _objective(cfg: dict) -> Callable:
    """The Optuna objective of a sweep: runs the function or notebook, records the trial's run."""
    import optuna

    space = parse_space(cfg["space"])

    def objective(trial: "optuna.Trial") -> float:
        params = suggest(trial, space)
        client, run_id = _trial_run(cfg["study"], trial, params, cfg["target"], cfg.get("experiment"))
        status, value, error = "FAILED", None, None
        try:
            if cfg.get("fn") is not None:
                value = _run_function(cfg["fn"], params, trial, cfg["metric"], run_id)
            else:
                value = _run_notebook(cfg, params, trial, run_id)
            status = "FINISHED"
            return value
        except optuna.TrialPruned:
            status = "KILLED"
            error = {"state": "pruned"}
            raise
        except TrialFailed as exc:
            error = exc.args[1] if len(exc.args) > 1 else {"error": str(exc)}
            raise
        finally:
            _finish(client, run_id, status=status, metric=cfg["metric"], value=value, error=error)
    return objective


def _run_function(fn: Callable, params: dict, trial: Any, metric: str, run_id: str) -> float:
    from sampan.experiments.recorder import flush

    token = _reporter.set(_make_reporter(trial, metric))
    parent = _parent_run.set(run_id)
    try:
        value = fn(**params)
    except Exception as exc:
        import optuna

        if isinstance(exc, optuna.TrialPruned):
            raise
        raise TrialFailed(f"trial {trial.number}: {type(exc).__name__}: {exc}",
                          {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}) from exc
    finally:
        _reporter.reset(token)
        _parent_run.reset(parent)
        flush()
    return _as_value(value, metric, trial.number)


_parent_run: contextvars.ContextVar = contextvars.ContextVar("sampan_parent_run", default=None)


def parent_run() -> str | None:
    """The sweep trial's run that a fit in this thread belongs to (its MLflow parent), if any."""
    return _parent_run.get()


def _as_value(value: Any, metric: str, number: int) -> float:
    if isinstance(value, dict):
        value = value.get(metric)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TrialFailed(f"trial {number} gave no value for the metric",
                          {"error": f"the trial returned {value!r}; expected a number or a dict holding {metric!r}"})
    return float(value)


def _run_notebook(cfg: dict, params: dict, trial: Any, run_id: str) -> float:
    from papermill.exceptions import PapermillExecutionError

    from sampan.utils.notebooks import execute_notebook

    out = Path(cfg["out_dir"]) / f"trial-{trial.number}.ipynb"
    env = {store.NOTEBOOK_ENV: cfg["target"], "SAMPAN_PARENT_RUN": run_id,
           TRIAL_ENV: json.dumps({"storage": cfg["storage"], "study": cfg["study"], "trial_id": trial._trial_id,
                                  "metric": cfg["metric"]})}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits them; a worker process runs one trial at a time
    try:
        execute_notebook(cfg["target"], str(out), parameters=params, progress_bar=False, cwd=cfg.get("cwd"),
                         kernel_name=cfg.get("kernel"), start_timeout=120, fork=cfg.get("fork", True))
    except PapermillExecutionError as exc:
        if exc.ename == "TrialPruned":
            import optuna

            raise optuna.TrialPruned(exc.evalue) from None
        raise TrialFailed(f"trial {trial.number}: {exc.ename} in cell {exc.cell_index}: {exc.evalue}",
                          {"error": f"{exc.ename}: {exc.evalue}", "failed_cell": exc.cell_index,
                           "failed_source": exc.source, "notebook": str(out)}) from None
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
    return _notebook_value(out, cfg["metric"], run_id, trial.number)


def _notebook_value(out: Path, metric: str, run_id: str, number: int) -> float:
    """The metric as the notebook recorded it (``sampan.record``), else the last value of its last fit."""
    from sampan.utils.record import collect_records

    records = collect_records(out)
    if isinstance(records.get(metric), (int, float)):
        return float(records[metric])
    children = store.search_runs(f"tags.mlflow.parentRunId = {store.quoted(run_id)}", max_results=1,
                                 experiment=os.environ.get(store.EXPERIMENT_ENV), missing_ok=True)
    if children and metric in children[0].data.metrics:
        return float(children[0].data.metrics[metric])
    raise TrialFailed(f"trial {number}: no value of {metric!r}",
                      {"error": f"the notebook neither recorded {metric!r} with sampan.record nor logged it in a fit"})


# ---------------------------------------------------------------- checks before anything runs
_USES = {"sweep": ("a sweep", "sweep parameter", "sweep one of those names"),
         "job": ("a job", "job parameter (-p)", "set one of those names")}


def check_notebook_space(notebook: str | os.PathLike, space: dict, use: Literal["sweep", "job"] = "sweep") -> dict:
    """Refuses parameters the notebook's ``parameters`` cell does not define, naming the defined ones.

    ``use`` words the message for the caller: ``"sweep"`` (swept parameters) or ``"job"`` (a job's ``-p`` values).
    """
    import papermill as pm

    who, noun, fix = _USES[use]
    path = check_notebook_file(notebook)
    defined = pm.inspect_notebook(str(path))
    if not defined:
        raise ValueError(f"The notebook {path} has no cell tagged `parameters`, so {who} cannot set {sorted(space)}. "
                         f"HINT: tag the cell that assigns them with `parameters` (JupyterLab: property inspector).")
    unknown = [name for name in space if name not in defined]
    if unknown:
        raise ValueError(f"Expected every {noun} to be defined in the `parameters` cell of {path.name}. "
                         f"Received: {', '.join(map(repr, unknown))}, which it does not define; it defines: "
                         f"{', '.join(defined)}. HINT: {fix}, or add yours to the parameters cell.")
    return defined


def check_notebook_file(notebook: Any) -> Path:
    """``notebook`` as a Path when it is an existing Jupyter notebook (a JSON file with ``cells``); else an error
    naming it (a missing file, a folder, a ``.py`` script or a file that is not a notebook).

    Example:
        >>> from sampan.experiments.sweeps import check_notebook_file
        >>> check_notebook_file("no_such.ipynb")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        FileNotFoundError: Expected `notebook` to be an existing .ipynb file. Received: notebook='no_such.ipynb'. ...
    """
    if not isinstance(notebook, (str, os.PathLike)):
        raise ValueError(bad_argument("notebook", notebook, "the path of a .ipynb file (a str or a Path)",
                                      "pass e.g. \"train.ipynb\"; to sweep a function, pass the function itself"))
    path = Path(notebook)
    if not path.is_file():
        raise FileNotFoundError(bad_argument("notebook", str(notebook), "an existing .ipynb file",
                                             "check the path (relative to the current folder)"))
    try:
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        cells = None
    if not isinstance(cells, list):
        fix = ("a Python script runs with `python` or `sampan launch`; give a notebook saved by Jupyter"
               if path.suffix != ".ipynb" else "the file is not a Jupyter notebook (JSON with cells); open and "
               "save it in JupyterLab, or give another one")
        raise ValueError(bad_argument("notebook", str(notebook), "a Jupyter notebook (.ipynb)", fix))
    return path


def check_kernel(notebook: str | os.PathLike, kernel: str | None) -> None:
    """Refuses, before any worker starts, a kernel that is not installed (every trial or the job would die on it).

    Raises:
        sampan.path.KernelNotFoundError: naming the installed kernels and how to get the missing one.
    """
    from sampan.utils.notebooks import check_kernels

    check_kernels([(f"The notebook {notebook}", notebook)], kernel, argument="kernel",
                  fix="pass --kernel with one of those, or leave it out to use the notebook's own kernel")


# ---------------------------------------------------------------- the sweep
class Sweep:
    """A running or finished sweep: its Optuna study, its trials' runs, ``wait()``.

    Attributes:
        name: the study name.
        storage: the Optuna storage URL.
        metric, direction: what the trials optimise.
        best_params, best_value: those of the best completed trial.
    """

    def __init__(self, name: str, storage: str, metric: str, direction: str, workers: list,
                 experiment: str | None = None) -> None:
        self.name, self.storage, self.metric, self.direction = name, storage, metric, direction
        self.experiment = experiment
        self._workers = workers

    @property
    def study(self):
        """The ``optuna.Study`` (loaded from the storage: it shows the workers' progress)."""
        import optuna

        return optuna.load_study(study_name=self.name, storage=_storage(self.storage))

    @property
    def done(self) -> bool:
        return all((w.poll() is not None) if hasattr(w, "poll") else not w.is_alive() for w in self._workers)

    def wait(self, timeout: float | None = None) -> "Sweep":
        """Waits for every worker; raises ``TimeoutError`` when they are not all done ``timeout`` seconds from now."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for w in self._workers:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if hasattr(w, "poll"):
                try:
                    w.wait(left)
                except subprocess.TimeoutExpired:
                    pass
            else:
                w.join(left)
            if (w.poll() is None) if hasattr(w, "poll") else w.is_alive():
                raise TimeoutError(f"sweep {self.name} still running after {timeout} s; its workers go on. "
                                   f"HINT: call wait() again, or wait(timeout=None) to wait until it ends")
        return self

    def trials(self) -> list:
        """The study's trials (``optuna.trial.FrozenTrial``), in order."""
        return self.study.trials

    def runs(self) -> list:
        """The trials' MLflow runs."""
        where = f"tags.`sampan.sweep` = {store.quoted(self.name)} and tags.`sampan.kind` = 'trial'"
        return store.search_runs(where, experiment=self.experiment, missing_ok=True)

    @property
    def best_params(self) -> dict:
        """The parameters of the best completed trial; a :class:`SampanError` when none completed."""
        return self._best_trial().params

    @property
    def best_value(self) -> float:
        """The metric of the best completed trial; a :class:`SampanError` when none completed."""
        return self._best_trial().value

    def _best_trial(self):
        study = self.study
        if any(t.state.name == "COMPLETE" for t in study.trials):
            return study.best_trial
        from collections import Counter

        states = ", ".join(f"{n} {s.lower()}" for s, n in Counter(t.state.name for t in study.trials).items())
        raise SampanError(f"Sweep {self.name!r} has no completed trial, so no best one ({states or 'no trials yet'}). "
                          f"HINT: a failed trial's run says why in its `sampan.error` tag "
                          f"(sweep.runs()[i].data.tags['sampan.error']), and the workers' output is in "
                          f"{sweeps_dir() / self.name}/worker-*.log; a running sweep needs sweep.wait() first.")

    def __repr__(self) -> str:
        return f"Sweep({self.name!r}, metric={self.metric!r}, done={self.done})"


def sweep(target: Callable | str | os.PathLike, space: dict[str, Any], *, trials: int = 20, jobs: int = 1,
          metric: str = "eval_acc", direction: Literal["maximize", "minimize", "auto"] = "auto",
          pruner: Literal["median", "none"] = "median", name: str | None = None, wait: bool = False,
          kernel: str | None = None, seed: int | None = None) -> Sweep:
    """Runs an Optuna sweep in the background and returns at once.

    Args:
        target: a function ``fn(**params) -> float`` (or a dict holding ``metric``), run in a thread of
            this process; or a notebook path, run by papermill in ``jobs`` worker processes.
        space: parameter -> range: ``"1e-4:1e-1:log"``, ``"0:0.5"``, ``"1:4"``, ``"32,64"`` or a list.
        trials: trials in all.
        jobs: worker processes for a notebook (a function runs in one thread).
        metric: the value optimised: what the function returns, what the notebook records with
            ``sampan.record``, or the fits' logged metric; pruning reads it after each epoch.
        direction: ``"maximize"``, ``"minimize"`` or ``"auto"`` (maximise accuracies, minimise losses).
        pruner: ``"median"`` (``optuna.pruners.MedianPruner``) or ``"none"``.
        name: the study name (default ``sweep-<time>``): letters, digits, ``.``, ``_``, ``-``, at most 100; an
            existing study with that name is continued.
        wait: block until the sweep ends.
        kernel: the Jupyter kernel for notebooks (default: the notebook's own).
        seed: seeds Optuna's sampler (TPE), so the same sweep proposes the same parameters again (worker
            ``i`` of a notebook sweep uses ``seed + i``); default: a different draw every time.

    Returns:
        A :class:`Sweep` handle.

    Example:
        >>> s = sweep("train.ipynb", {"lr": "1e-4:1e-1:log", "batch_size": "32,64"}, trials=8, jobs=2)  # doctest: +SKIP
        >>> s.wait().best_params  # doctest: +SKIP
    """
    import optuna

    check_int("trials", trials)
    check_int("jobs", jobs)
    if direction not in ("maximize", "minimize", "auto"):
        raise ValueError(bad_argument("direction", direction, "'maximize', 'minimize' or 'auto'"))
    if pruner not in ("median", "none"):
        raise ValueError(bad_argument("pruner", pruner, "'median' or 'none'"))
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(bad_argument("seed", seed, "an int, or None for a fresh draw", "seed=0"))
    if name is not None:
        check_name(name)
    if not isinstance(metric, str) or not metric:
        raise ValueError(bad_argument("metric", metric, "the name of the metric to optimise",
                                      "pass metric=\"eval_acc\" or metric=\"eval_loss\""))
    parse_space(space)
    is_fn = callable(target)
    if not is_fn and not isinstance(target, (str, os.PathLike)):
        raise ValueError(bad_argument("target", target, "a function fn(**params) -> float, or a notebook's path",
                                      "pass e.g. sweep(\"train.ipynb\", space) or sweep(train_fn, space)"))
    if not is_fn:
        check_notebook_space(target, space)
        check_kernel(target, kernel)
        target = str(Path(target).resolve())
    if direction == "auto":
        from sampan.callbacks._tracker import resolve_mode

        direction = "maximize" if resolve_mode("auto", metric) == "max" else "minimize"
    store.check_writable()
    name = name or f"sweep-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S-%f')}"
    storage = sweep_storage()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name=name, storage=_storage(storage), direction=direction,
                                load_if_exists=True, pruner=_pruner(pruner))
    _check_same_objective(study, metric, direction)
    cfg = {"study": name, "storage": storage, "space": space, "metric": metric, "pruner": pruner, "seed": seed,
           "experiment": os.environ.get(store.EXPERIMENT_ENV) or store.DEFAULT_EXPERIMENT,
           "target": getattr(target, "__qualname__", str(target)), "kernel": kernel,
           "out_dir": str(sweeps_dir() / name), "cwd": str(Path(target).parent) if not is_fn else None}
    Path(cfg["out_dir"]).mkdir(parents=True, exist_ok=True)
    if is_fn:
        workers = [threading.Thread(target=_work, args=({**cfg, "fn": target}, trials), daemon=True,
                                    name=f"sampan-sweep-{name}")]
        workers[0].start()
    else:
        workers = [_spawn_worker({**cfg, "seed": None if seed is None else seed + i}, share, i)
                   for i, share in enumerate(_shares(trials, jobs))]
    handle = Sweep(name, storage, metric, direction, workers, cfg["experiment"])
    return handle.wait() if wait else handle


def check_name(name: Any) -> str:
    """A study name that is one plain folder name (it names ``sweeps_dir()/<name>``) and needs no quoting."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ValueError(bad_argument("name", name, "a study name of letters, digits, '.', '_' or '-' (at most 100), "
                                      "starting with a letter or digit",
                                      "e.g. name='lr-search-2' (--name lr-search-2)"))
    return name


def _check_same_objective(study: Any, metric: str, direction: str) -> None:
    """Refuses to continue a study under another metric or direction (its trials would mix two objectives and
    its best would be the wrong one); a new study keeps its metric as a user attribute (the direction is Optuna's).
    """
    stored = study.user_attrs.get(METRIC_ATTR)
    had = study.direction.name.lower()
    if had != direction or (stored is not None and stored != metric):
        name, value = ("direction", direction) if had != direction else ("metric", metric)
        same = stored or metric
        raise ValueError(bad_argument(
            name, value, f"the {name} of the existing study {study.study_name!r}, which optimises {same} ({had}) "
            f"over {len(study.trials)} trial(s); another {name} would mix two objectives and report the wrong best",
            f"give another name (--name) to start a new study, or continue this one with metric={same!r}, "
            f"direction={had!r} (--metric {same} --direction {had})"))
    if stored is None:
        study.set_user_attr(METRIC_ATTR, metric)


def _pruner(kind: str):
    import optuna

    return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=1) if kind == "median" \
        else optuna.pruners.NopPruner()


def _shares(trials: int, jobs: int) -> list[int]:
    jobs = min(jobs, trials)
    return [trials // jobs + (1 if i < trials % jobs else 0) for i in range(jobs)]


def _work(cfg: dict, trials: int) -> None:
    """One worker: ``trials`` trials of the study, failures recorded and skipped."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(seed=cfg.get("seed"))
    study = optuna.load_study(study_name=cfg["study"], storage=_storage(cfg["storage"]), pruner=_pruner(cfg["pruner"]),
                              sampler=sampler)
    # a worker with one trial runs one notebook: a fork server would cost more than it saves (execute_notebook)
    study.optimize(_objective({**cfg, "fork": trials > 1}), n_trials=trials, catch=(TrialFailed,))


_WORKER = ("import json, sys; from sampan.experiments.sweeps import _work; "
           "_work(json.loads(sys.argv[1]), int(sys.argv[2]))")


def _spawn_worker(cfg: dict, trials: int, index: int) -> subprocess.Popen:
    """A worker process (its output in ``worker-<i>.log`` of the sweep's folder)."""
    env = {**os.environ, store.TRACKING_ENV: store.tracking_uri()}
    with open(Path(cfg["out_dir"]) / f"worker-{index}.log", "ab") as log:
        return subprocess.Popen(python_command("-c", _WORKER, json.dumps(cfg), str(trials)),
                                stdout=log, stderr=subprocess.STDOUT, env=env)
