"""``Recorder``: the callback that makes every ``Model.fit`` an MLflow run.

The training thread only collects plain numbers; one writer thread per process
creates the run and writes the metrics in batches (``MlflowClient.log_batch``):
when the fit ends, and every ``WRITE_EVERY`` seconds during a long one, so the
store's work (tens of milliseconds a write) stays off the training path. For a
SQLite store the writer hands each write to the recording service
(:mod:`sampan.experiments.service`, one process per user with MLflow loaded), so
a fitting process never imports MLflow; otherwise, or when the service is gone,
it writes itself. :func:`flush` waits for the writes (``search_runs`` calls it,
and so does the interpreter at exit).
"""
from __future__ import annotations

import atexit
import os
import platform
import queue
import sys
import threading
import time
import warnings
import weakref
from typing import Any, Callable

from sampan.callbacks.base import Callback
from sampan.experiments import store

SWITCH_ENV = "SAMPAN_TRACKING"
PARENT_ENV = "SAMPAN_PARENT_RUN"
WRITE_EVERY = 10.0  # seconds between store writes during a fit: each costs ~40 ms of a writer thread
SAMPLE_EVERY = 2.0  # seconds between system samples (at epoch ends)
_state = {"enabled": True, "service": True}  # service: False once it failed here (writes go in-process)


# ---------------------------------------------------------------- the switch
def disable() -> None:
    """Stops recording ``fit`` runs in this process (``SAMPAN_TRACKING=0`` does it for every process).

    Example:
        >>> import sampan.experiments
        >>> sampan.experiments.disable()
        >>> sampan.experiments.is_enabled()
        False
        >>> sampan.experiments.enable()
    """
    _state["enabled"] = False


def enable() -> None:
    """Records ``fit`` runs again after :func:`disable` (``SAMPAN_TRACKING=0`` still wins)."""
    _state["enabled"] = True


def is_enabled() -> bool:
    """Whether ``Model.fit`` records a run: not after :func:`disable`, nor with ``SAMPAN_TRACKING=0``."""
    return _state["enabled"] and os.environ.get(SWITCH_ENV, "1").strip().lower() not in ("0", "false", "off", "no")


def default_callbacks(log_freq: int) -> list[Callback]:
    """What ``Model`` adds to a fit's callbacks: one :class:`Recorder` when recording is on."""
    return [Recorder(log_freq=log_freq)] if is_enabled() else []


# ---------------------------------------------------------------- the writer thread
class _Writer:
    """One daemon thread that runs store writes in order; failures warn once and never reach training."""

    def __init__(self) -> None:
        self._queue: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._warned = False
        self._pid: int | None = None

    def submit(self, job: Callable[[], Any]) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="sampan-experiments-writer", daemon=True)
                self._thread.start()
                self._pid = os.getpid()
        self._queue.put(job)

    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            try:
                job()
            except Exception as exc:  # the store went away mid-run: say so once, keep training
                if not self._warned:
                    self._warned = True
                    warnings.warn(f"sampan.experiments could not write to the store {store.tracking_uri()}: "
                                  f"{type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=1)
            finally:
                self._queue.task_done()

    def flush(self, timeout: float | None = None) -> bool:
        """Waits until every submitted write is done; False when ``timeout`` ran out first."""
        if self._thread is None:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._queue.unfinished_tasks:
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True


_writer = _Writer()
_open_runs: dict[int, "Recorder"] = {}


def flush(timeout: float | None = None) -> bool:
    """Waits until every run recorded in this process is written to the store.

    Example:
        >>> from sampan.experiments import flush
        >>> flush(timeout=10)
        True
    """
    return _writer.flush(timeout)


@atexit.register
def _close_at_exit() -> None:
    mine = [rec for rec in _open_runs.values() if rec._pid == os.getpid()]  # not a forked worker's copies
    for rec in mine:  # a fit that raised never reached on_train_end
        rec._finish("FAILED")
    if mine or _writer._pid == os.getpid():
        flush(timeout=30)


# ---------------------------------------------------------------- what a run records
def _source() -> str:
    """The notebook or script that is training."""
    for env in (store.NOTEBOOK_ENV, "JPY_SESSION_NAME"):
        if os.environ.get(env):
            return os.environ[env]
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None) or (sys.argv[0] if sys.argv and sys.argv[0] else "")
    return os.path.basename(path) if "ipykernel" in path else path


def _versions() -> dict[str, str]:
    import torch

    from sampan._version import __version__

    return {"version.sampan": __version__, "version.torch": torch.__version__,
            "version.python": platform.python_version()}


def _optimizer_params(opt: Any) -> dict[str, Any]:
    if opt is None:
        return {}
    group = opt.param_groups[0]
    out = {"optimizer": type(opt).__name__}
    for key, value in group.items():
        if key != "params" and value is not False and isinstance(value, (int, float, str, bool, tuple)):
            out[f"optimizer.{key}"] = value
    return out


_flops_cache: "weakref.WeakKeyDictionary[Any, int | None]" = weakref.WeakKeyDictionary()


def _flops(model: Any) -> int | None:
    """FLOPs of one sample's forward pass, when the model declares its inputs (computed once per network)."""
    key = model.network
    if key not in _flops_cache:
        try:
            import torch

            from sampan.spec import example_inputs  # deterministic, leaves the training's random state alone
            from sampan.utils.flops import flops  # the one home of counting, below hapi (sampan/_layers.py)

            device = next((p.device for p in model.network.parameters()), torch.device("cpu"))
            _flops_cache[key] = flops(model.network, *[t.to(device) for t in example_inputs(model.inputs, batch=1)]) \
                if model.inputs else None
        except Exception:  # a network summary cannot trace is still trained and recorded
            _flops_cache[key] = None
    return _flops_cache[key]


def run_params(model: Any, fit_params: dict, log_freq: int) -> dict[str, Any]:
    """The parameters of a fit: prepare and fit arguments, optimizer, model size, seed, device."""
    import torch

    precision = model._precision
    params: dict[str, Any] = {
        "model": type(model.network).__name__,
        "params_total": sum(p.numel() for p in model.network.parameters()),
        "loss": type(model._loss).__name__ if model._loss is not None else None,
        "metrics": ",".join(type(m).__name__ for m in model._metrics) or None,
        "amp": str(precision.dtype).replace("torch.", "") if hasattr(precision, "dtype") else None,
        "amp_level": getattr(getattr(precision, "config", None), "level", None),
        "accumulate_steps": getattr(model, "_accumulate_steps", 1),
        "grad_clip": getattr(model, "_grad_clip", None),
        "device": str(model.device),
        "seed": torch.initial_seed(),
        "log_freq": log_freq,
        **{k: fit_params.get(k) for k in ("epochs", "batch_size", "steps", "eval_steps")},
        **_optimizer_params(model._optimizer),
    }
    flops = _flops(model)
    if flops is not None:
        params["flops"] = flops
    return {k: v for k, v in params.items() if v is not None}


def run_tags(extra: dict | None = None) -> dict[str, str]:
    tags = {"sampan.source": _source(), "mlflow.source.name": _source(), "sampan.kind": "fit", **_versions()}
    if os.environ.get(store.LESSON_ENV):
        tags["sampan.lesson"] = os.environ[store.LESSON_ENV]
    if os.environ.get(PARENT_ENV):
        tags["mlflow.parentRunId"] = os.environ[PARENT_ENV]
    tags.update(extra or {})
    return {k: str(v) for k, v in tags.items() if v}


# ---------------------------------------------------------------- the callback
class Recorder(Callback):
    """Records a ``fit`` as an MLflow run: parameters, per-epoch and per-``log_freq`` metrics, system
    metrics, the best checkpoint. ``Model.fit`` adds one unless recording is off
    (``sampan.experiments.disable()`` or ``SAMPAN_TRACKING=0``).

    Metrics are named as in the fit's logs (``loss``, ``acc``, ``eval_loss``, ...) with the epoch
    (1-based) as step; every ``log_freq`` training steps ``step/loss`` etc. with the global step;
    ``system/...`` figures of the resource sampler once per epoch.

    Args:
        log_freq: training steps between ``step/...`` metrics.
        run_name: the run's name (MLflow picks one when None).
        tags: extra tags, e.g. ``{"lesson": "first_model"}``.
        experiment: experiment name (default ``$SAMPAN_EXPERIMENT`` or ``"sampan"``).
        on_epoch: called ``on_epoch(epoch, logs)`` after each epoch (sweeps report to Optuna here).

    Attributes:
        run_id: the MLflow run id (waits for the writer to create the run).

    Example:
        >>> from sampan.experiments import Recorder
        >>> rec = Recorder(run_name="baseline")
        >>> # model.fit(train, epochs=3, callbacks=[rec]); rec.run_id
    """

    def __init__(self, *, log_freq: int = 10, run_name: str | None = None, tags: dict | None = None,
                 experiment: str | None = None, on_epoch: Callable[[int, dict], None] | None = None) -> None:
        super().__init__()
        from sampan.errors import check_int

        self.log_freq = check_int("log_freq", log_freq, fix="pass log_freq=10 (training steps between step/ metrics)")
        self.run_name = run_name
        self.tags = dict(tags or {})
        self.experiment = experiment
        self.on_epoch = on_epoch
        self._run: _Run | None = None  # the latest fit's; the writer thread holds each fit's own
        self._pending: list[tuple[str, float, int, int]] = []
        self._active = False
        self._start_job: Callable[[], None] | None = None
        self._thread: int | None = None
        self._pid = os.getpid()
        self._last_write = self._last_sample = 0.0

    @property
    def run_id(self) -> str | None:
        flush()
        return self._run.id if self._run is not None else None

    # the loop's hooks: only plain Python on the training thread
    def on_train_begin(self, logs=None):
        strategy = getattr(self.model, "_strategy", None)
        if strategy is not None and not getattr(strategy, "is_main", True):
            return
        uri = store.check_writable()
        _close_stale(threading.get_ident())
        self._active, self._pending = True, []
        self._thread, self._pid = threading.get_ident(), os.getpid()
        from sampan.experiments.sweeps import parent_run

        params = run_params(self.model, self.params, self.log_freq)
        tags = run_tags({**({"mlflow.parentRunId": parent_run()} if parent_run() else {}), **self.tags})
        _open_runs[id(self)] = self
        _last[:] = [self]
        experiment = self.experiment or os.environ.get(store.EXPERIMENT_ENV) or store.DEFAULT_EXPERIMENT
        run = self._run = _Run(uri)  # a new one per fit: the writer may still be ending the previous fit's run
        self._start_job = lambda: run.start(params, tags, experiment, self.run_name)  # settings as they are now
        self._last_write = self._last_sample = time.monotonic()

    def on_train_batch_end(self, step, logs=None):
        if self._active and logs and (step + 1) % self.log_freq == 0:
            now, gstep = int(time.time() * 1000), int(logs.get("step", step))
            for key, value in logs.items():
                if key not in ("step", "batch_size") and isinstance(value, (int, float)):
                    self._pending.append((f"step/{key}", float(value), now, gstep))

    def on_epoch_end(self, epoch, logs=None):
        if not self._active:
            return
        now = int(time.time() * 1000)
        for key, value in (logs or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self._pending.append((key, float(value), now, epoch + 1))
        if time.monotonic() - self._last_sample >= SAMPLE_EVERY or epoch == 0:
            self._last_sample = time.monotonic()
            self._pending.extend((k, v, now, epoch + 1) for k, v in _system_sample().items())
        if time.monotonic() - self._last_write >= WRITE_EVERY:  # a long fit shows up in the store as it goes
            self._last_write = time.monotonic()
            self._submit_pending()
        from sampan.experiments.sweeps import report_epoch

        try:
            report_epoch(epoch, dict(logs or {}))  # a sweep's trial: Optuna's pruner may stop it here
            if self.on_epoch is not None:
                self.on_epoch(epoch, dict(logs or {}))
        except BaseException:
            self._finish("KILLED")
            raise

    def on_train_end(self, logs=None):
        if self._active:
            self._finish("FINISHED")
            if os.environ.get(PARENT_ENV):  # a sweep trial's or a job's kernel may be shut down right after
                flush()

    # handing work to the writer thread
    def _submit_pending(self) -> None:
        run, start, self._start_job = self._run, self._start_job, None
        batch, self._pending = self._pending, []
        _writer.submit(lambda: (start() if start else None, run.write(batch)))

    def _finish(self, status: str) -> None:
        _open_runs.pop(id(self), None)
        self._active = False
        self._submit_pending()
        artifacts = _checkpoints(self.model) if status == "FINISHED" else []
        run = self._run
        _writer.submit(lambda: run.end(artifacts, status))


class _Run:
    """One fit's run on the writer thread's side: its id is set once the writer created it. Writes go through the
    recording service (no MLflow import here), else in this process."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.id: str | None = None

    def start(self, params: dict, tags: dict, experiment: str, run_name: str | None) -> None:
        params = {k: str(v) for k, v in params.items()}  # as MLflow keeps them, before JSON turns tuples to lists
        self.id = _via_service("start", start_run, uri=self.uri, experiment=experiment,
                               run_name=run_name, tags=tags, params=params)

    def write(self, batch: list) -> None:
        if self.id is not None and batch:
            _via_service("write", write_metrics, uri=self.uri, run_id=self.id, batch=batch)

    def end(self, artifacts: list, status: str) -> None:
        if self.id is not None:
            _via_service("end", end_run, uri=self.uri, run_id=self.id,
                         artifacts=[str(p) for p in artifacts], status=status)


def _via_service(op: str, local: Callable[..., Any], **payload: Any) -> Any:
    """One store write: by the recording service (:mod:`sampan.experiments.service`) when it can take it, else by
    ``local`` in this process (which then imports MLflow)."""
    if _state["service"]:
        from sampan.experiments import service

        try:
            return service.call(op, **payload)
        except service.Unavailable:
            _state["service"] = False
    return local(**payload)


# ---------------------------------------------------------------- the store writes (here or in the service)
def start_run(uri: str, experiment: str, run_name: str | None, tags: dict, params: dict) -> str:
    """Creates a run with its tags and parameters; returns its id."""
    from mlflow.entities import Param

    client = store.client(uri)
    run = client.create_run(store.experiment_id(experiment, uri), run_name=run_name, tags=tags)
    client.log_batch(run.info.run_id, params=[Param(k, str(v)[:6000]) for k, v in params.items()])
    return run.info.run_id


def write_metrics(uri: str, run_id: str, batch: list) -> None:
    """Writes ``(key, value, timestamp_ms, step)`` metrics, 1000 at a time (MLflow's limit per batch)."""
    from mlflow.entities import Metric

    metrics = [Metric(k, v, t, s) for k, v, t, s in batch]
    client = store.client(uri)
    for start in range(0, len(metrics), 1000):
        client.log_batch(run_id, metrics=metrics[start:start + 1000])


def end_run(uri: str, run_id: str, artifacts: list, status: str) -> None:
    """Keeps the artifacts (checkpoints) with the run and marks it ended with ``status``."""
    client = store.client(uri)
    for path in artifacts:
        client.log_artifact(run_id, str(path), artifact_path="checkpoints")
    client.set_terminated(run_id, status=status)


def last_run_id() -> str | None:
    """The run of the latest ``fit`` recorded in this process (waits for its writes)."""
    rec = _last[0] if _last else None
    return rec.run_id if rec is not None else None


def log_artifact(path: str | os.PathLike, *, run_id: str | None = None, folder: str = "exports") -> str:
    """Keeps a file (an export, a report) with a run: by default the latest ``fit`` of this process.

    Args:
        path: the file or folder to copy into the run's artifacts.
        run_id: the run (default :func:`last_run_id`).
        folder: the folder inside the run's artifacts.

    Returns:
        The run id.

    Example:
        >>> import torch
        >>> import sampan
        >>> from sampan.experiments import log_artifact
        >>> net = torch.nn.Linear(8, 2)
        >>> model = sampan.Model(net, inputs=[sampan.InputSpec([None, 8], "float32", "x")])
        >>> model.prepare(torch.optim.SGD(net.parameters(), lr=0.1), torch.nn.CrossEntropyLoss())
        Model(Linear, prepared=True, epoch=0)
        >>> data = torch.utils.data.TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,)))
        >>> _ = model.fit(data, epochs=1, batch_size=8, verbose=0)
        >>> model.save("linear", training=False).name
        'linear.pt2'
        >>> run_id = log_artifact("linear.pt2")
        >>> run_id == sampan.experiments.last_run_id()
        True
    """
    from sampan.errors import bad_argument

    run_id = run_id or last_run_id()
    if run_id is None:
        raise ValueError(bad_argument("run_id", run_id, "a run id, or a recorded fit earlier in this process",
                                      "call model.fit first, or pass run_id=..."))
    if not os.path.exists(path):
        raise FileNotFoundError(bad_argument("path", str(path), "an existing file or folder"))
    client = store.client()
    (client.log_artifacts if os.path.isdir(path) else client.log_artifact)(run_id, str(path), folder)
    return run_id


_last: list = []


def _close_stale(thread: int, status: str = "FAILED") -> None:
    """Ends the runs of this thread's fits that never reached ``on_train_end`` (a fit that raised), with the metrics
    they collected: called by :func:`fit_raised` as the exception leaves ``Model.fit``, and by the thread's next fit."""
    for rec in list(_open_runs.values()):
        if getattr(rec, "_thread", None) == thread:
            rec._finish(status)


def fit_raised(exc: BaseException) -> None:
    """``Model.fit`` calls this as ``exc`` leaves it: the fit's run ends ``KILLED`` when interrupted (Ctrl-C, a
    kernel interrupt), else ``FAILED``, not left ``RUNNING``."""
    _close_stale(threading.get_ident(), "KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED")


_sampler: list = []


def _system_sample() -> dict[str, float]:
    """Host and GPU figures from the resource monitor's sampler (one per process; about 0.5 ms a read)."""
    try:
        if not _sampler:
            from sampan.monitor.sampler import ResourceSampler

            _sampler.append(ResourceSampler(gpu=True, max_samples=1))
        row = _sampler[0].sample_now()
    except Exception:  # no psutil figure is worth stopping a fit for
        return {}
    return {f"system/{k}": float(v) for k, v in row.items()
            if k not in ("time", "step") and isinstance(v, (int, float)) and not isinstance(v, bool)}


def _checkpoints(model: Any) -> list:
    """The best checkpoint of each ModelCheckpoint (else its last one), to keep with the run."""
    from sampan.callbacks.model_checkpoint import ModelCheckpoint

    found = []
    for cb in getattr(model, "_callbacks", []):
        if isinstance(cb, ModelCheckpoint) and cb.saved:
            best = [p for p in cb.saved if p.stem == "best"]
            found.append(best[-1] if best else cb.saved[-1])
    return [p.resolve() for p in dict.fromkeys(found) if p.exists()]  # absolute: the writer runs later, maybe elsewhere
