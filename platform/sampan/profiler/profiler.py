"""``Profiler`` on ``torch.profiler`` (``paddle.profiler.Profiler``): a schedule, shapes, memory, top operators,
a per-step memory timeline and chrome trace export."""
from __future__ import annotations

import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Literal, Sequence

import torch
from torch.profiler import ProfilerActivity

from sampan.callbacks.base import Callback
from sampan.errors import bad_argument, check_int

SortKey = Literal["cpu_total", "self_cpu_total", "device_total", "self_device_total", "count", "cpu_memory",
                  "device_memory"]
_SORT_ATTRS = {"cpu_total": "cpu_time_total", "self_cpu_total": "self_cpu_time_total",
               "device_total": "device_time_total", "self_device_total": "self_device_time_total",
               "count": "count", "cpu_memory": "self_cpu_memory_usage", "device_memory": "self_device_memory_usage"}


def make_scheduler(*, closed: int = 0, ready: int = 1, record: int = 1, repeat: int = 0, skip_first: int = 0):
    """``paddle.profiler.make_scheduler`` on ``torch.profiler.schedule(wait, warmup, active, repeat, skip_first)``.

    After ``skip_first`` steps, each cycle is ``closed`` steps off, ``ready`` steps warming up and ``record``
    steps recorded (``on_trace_ready`` runs after the last). As in Paddle, ``repeat=0`` (the default; any
    ``repeat <= 0``) repeats the cycle until the profiler stops, and ``repeat=n`` records ``n`` windows.

    Example:
        >>> from sampan.profiler import make_scheduler
        >>> sched = make_scheduler(closed=1, ready=1, record=3, repeat=1)   # one window: steps 2 to 4
    """
    for name, value, least in (("closed", closed, 0), ("ready", ready, 0), ("record", record, 1),
                               ("skip_first", skip_first, 0)):
        check_int(name, value, minimum=least)
    if isinstance(repeat, bool) or not isinstance(repeat, int):
        raise ValueError(bad_argument("repeat", repeat, "an int (0: repeat until the profiler stops)"))
    return torch.profiler.schedule(wait=closed, warmup=ready, active=record, repeat=max(repeat, 0),
                                   skip_first=skip_first)


def export_chrome_tracing(dir_name: str | os.PathLike, worker_name: str | None = None) -> Callable[[Any], None]:
    """``paddle.profiler.export_chrome_tracing``: an ``on_trace_ready`` handler writing
    ``<dir_name>/<worker>.<time>.pt.trace.json`` (open it in chrome://tracing or Perfetto)."""
    def handler(prof: Any) -> None:
        Path(dir_name).mkdir(parents=True, exist_ok=True)
        name = worker_name or f"host_{os.getpid()}"
        prof.export_chrome_trace(str(Path(dir_name) / f"{name}.{time.time_ns()}.pt.trace.json"))
    return handler


def _schedule(scheduler: Any) -> Callable | None:
    if scheduler is None or callable(scheduler):
        return scheduler
    if (isinstance(scheduler, (tuple, list)) and len(scheduler) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in scheduler)
            and 0 <= scheduler[0] < scheduler[1]):
        start, end = scheduler
        warmup = 1 if start > 0 else 0
        with warnings.catch_warnings():  # "won't be using warmup" is what recording from step 0 means
            warnings.simplefilter("ignore", UserWarning)
            return torch.profiler.schedule(wait=max(start - warmup, 0), warmup=warmup, active=end - start, repeat=1)
    raise ValueError(bad_argument("scheduler", scheduler, "None, a (start, end) pair of steps with "
                                  "0 <= start < end, or make_scheduler(...)", "e.g. scheduler=(2, 5)"))


def _activities(targets: str | Sequence[str] | None) -> list:
    if targets is None:
        targets = ["cpu", "gpu"] if torch.cuda.is_available() else ["cpu"]
    chosen = [targets] if isinstance(targets, str) else list(targets)
    known = {"cpu": ProfilerActivity.CPU, "gpu": ProfilerActivity.CUDA, "cuda": ProfilerActivity.CUDA}
    if not chosen or any(t not in known for t in chosen):
        raise ValueError(bad_argument("targets", targets, '"cpu", "gpu" or a list of them', 'e.g. targets=["cpu"]'))
    if any(known[t] == ProfilerActivity.CUDA for t in chosen) and not torch.cuda.is_available():
        raise ValueError(bad_argument("targets", targets, '"cpu" only: this machine has no CUDA device',
                                      'pass targets=["cpu"], or leave targets out to profile what there is'))
    return sorted({known[t] for t in chosen}, key=str)


def _memory_now() -> dict:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return {"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved(),
                "peak": torch.cuda.max_memory_allocated()}
    from sampan.utils.host import process_rss

    return {"rss": process_rss()}


class Profiler:
    """Profiles steps with ``torch.profiler.profile``; mirrors ``paddle.profiler.Profiler``.

    Args:
        targets: ``"cpu"``, ``["cpu", "gpu"]`` (``"gpu"`` needs CUDA); default: every available one.
        scheduler: None (record every step between start and stop), ``(start, end)`` steps to record, or
            :func:`make_scheduler` / ``torch.profiler.schedule``.
        on_trace_ready: called with the torch profile after each recorded window (e.g.
            :func:`export_chrome_tracing`).
        record_shapes, profile_memory, with_stack: passed to ``torch.profiler.profile``.
        timer_only: only time the steps (no operator recording).

    Example:
        >>> import torch
        >>> from sampan.profiler import Profiler
        >>> prof = Profiler(scheduler=(1, 3), record_shapes=True)
        >>> with prof:
        ...     for _ in range(4):
        ...         _ = torch.randn(64, 64) @ torch.randn(64, 64)
        ...         prof.step()
        >>> rows = prof.summary(print_table=False, prefix="aten::mm")
        >>> rows[0]["name"], rows[0]["count"]  # steps 1 and 2 were recorded
        ('aten::mm', 2)
    """

    def __init__(self, *, targets: str | Sequence[str] | None = None, scheduler: Any = None,
                 on_trace_ready: Callable[[Any], None] | None = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, timer_only: bool = False) -> None:
        if on_trace_ready is not None and not callable(on_trace_ready):
            raise TypeError(bad_argument("on_trace_ready", on_trace_ready, "a function called with the profile",
                                         "pass on_trace_ready=export_chrome_tracing(\"traces\"), or call "
                                         "export(path) after the run"))
        self._activities = _activities(targets)
        self._schedule = _schedule(scheduler)
        self._user_ready = on_trace_ready
        self.record_shapes, self.profile_memory, self.with_stack = record_shapes, profile_memory, with_stack
        self.timer_only = timer_only
        self._prof: Any = None
        self._averages: Any = None
        self._trace: bytes | None = None  # the recorded window's chrome trace, made once (torch saves it once)
        self.step_num = 0
        self.step_times: list[float] = []
        self.memory: list[dict] = []
        self._t0 = self._last = 0.0

    # ---------------------------------------------------------------- running
    def _ready(self, prof: Any) -> None:
        self._averages = prof.key_averages(group_by_input_shape=self.record_shapes)
        if self._user_ready is not None:
            self._user_ready(prof)

    def start(self) -> "Profiler":
        self._trace = None
        if not self.timer_only:
            self._prof = torch.profiler.profile(
                activities=self._activities, schedule=self._schedule, on_trace_ready=self._ready,
                record_shapes=self.record_shapes, profile_memory=self.profile_memory, with_stack=self.with_stack)
            self._prof.start()
        self._t0 = self._last = time.perf_counter()
        self.memory.append({"step": self.step_num, "time": 0.0, **_memory_now()})
        return self

    def step(self) -> None:
        """Marks the end of one step (``paddle.profiler.Profiler.step``)."""
        now = time.perf_counter()
        self.step_times.append(now - self._last)
        self._last = now
        self.step_num += 1
        self.memory.append({"step": self.step_num, "time": now - self._t0, **_memory_now()})
        if self._prof is not None:
            self._prof.step()

    def stop(self) -> None:
        if self._prof is not None:
            self._prof.stop()
            if self._averages is None and self._schedule is None:
                self._averages = self._prof.key_averages(group_by_input_shape=self.record_shapes)

    def __enter__(self) -> "Profiler":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def callback(self) -> "ProfilerCallback":
        """A ``fit`` callback that starts this profiler, steps it after every training batch and stops it."""
        return ProfilerCallback(self)

    # ---------------------------------------------------------------- results
    @property
    def recorded(self) -> bool:
        return self._averages is not None

    def key_averages(self) -> Any:
        """torch's ``EventList`` of per-operator averages from the last recorded window."""
        if self._averages is None:
            raise RuntimeError("The profiler has recorded nothing yet. HINT: call step() at least up to the "
                               "scheduler's end step, then stop(); with timer_only=True only step times exist.")
        return self._averages

    def summary(self, *, sorted_by: SortKey = "cpu_total", row_limit: int = 15, print_table: bool = True,
                prefix: str | None = None) -> list[dict]:
        """The top operators (``paddle.profiler.Profiler.summary``), times in milliseconds, memory in bytes.

        Args:
            sorted_by: one of ``cpu_total``, ``self_cpu_total``, ``device_total``, ``self_device_total``,
                ``count``, ``cpu_memory``, ``device_memory``.
            row_limit: rows returned (0: all); an int >= 0.
            print_table: also print a Markdown table.
            prefix: keep only operators whose name starts with it (``"aten::"``, ``"sampan::"``).
        """
        if sorted_by not in _SORT_ATTRS:
            raise ValueError(bad_argument("sorted_by", sorted_by, f"one of {sorted(_SORT_ATTRS)}"))
        check_int("row_limit", row_limit, minimum=0, fix="pass row_limit=0 for every row, or a positive count")
        rows = [self._row(e) for e in self.key_averages() if prefix is None or e.key.startswith(prefix)]
        rows.sort(key=lambda r: r[sorted_by], reverse=True)
        rows = rows[:row_limit] if row_limit else rows
        if print_table:
            print(_markdown(rows))
        return rows

    def _row(self, e: Any) -> dict:
        get = lambda name: getattr(e, name, 0) or 0  # noqa: E731 - device fields differ across torch versions
        return {"name": e.key, "count": int(e.count), "cpu_total": get("cpu_time_total") / 1000.0,
                "self_cpu_total": get("self_cpu_time_total") / 1000.0,
                "device_total": get("device_time_total") / 1000.0,
                "self_device_total": get("self_device_time_total") / 1000.0,
                "cpu_memory": int(get("self_cpu_memory_usage")), "device_memory": int(get("self_device_memory_usage")),
                "input_shapes": str(e.input_shapes) if self.record_shapes and e.input_shapes else ""}

    def export(self, path: str | os.PathLike, format: Literal["json"] = "json", *, overwrite: bool = True) -> Path:
        """Writes the last recorded window as a chrome trace (``chrome://tracing``, Perfetto), as often as asked.

        torch can save a profile's trace only once, so the first export keeps it and every export copies it.

        Args:
            path: the file to write (its folder is created).
            overwrite: replace an existing file (atomically); with ``False`` an existing ``path`` (or a link
                there) raises ``FileExistsError`` and is left as it was.
        """
        from sampan.utils.io import atomic_write

        if format != "json":
            raise ValueError(bad_argument("format", format, '"json" (a chrome trace)',
                                          "pass format=\"json\"; for a table use summary()"))
        path = Path(path)
        if path.is_dir():
            raise ValueError(bad_argument("path", str(path), "a file name, not a folder",
                                          f"pass e.g. path=\"{path / 'trace.json'}\""))
        data = self._trace_bytes()
        path.parent.mkdir(parents=True, exist_ok=True)
        if overwrite:
            return atomic_write(path, lambda tmp: tmp.write_bytes(data))
        try:
            fh = open(path, "xb")  # O_EXCL: never an existing file, never through a symlink
        except FileExistsError:
            raise FileExistsError(f"{path} already exists; the trace was not written. HINT: choose a new file "
                                  "name, or pass overwrite=True to replace it.") from None
        try:
            with fh:
                fh.write(data)
        except BaseException:
            path.unlink(missing_ok=True)  # the file this call created, half written
            raise
        return path

    def _trace_bytes(self) -> bytes:
        if self._prof is None or self._averages is None:
            raise RuntimeError("No trace to export yet. HINT: run the profiler over its recorded steps first "
                               "(and not with timer_only=True).")
        if self._trace is None:
            with tempfile.TemporaryDirectory(prefix="sampan-trace-") as tmp:
                trace = Path(tmp) / "trace.json"
                self._prof.export_chrome_trace(str(trace))
                self._trace = trace.read_bytes()
        return self._trace

    export_chrome_trace = export

    def memory_timeline(self) -> list[dict]:
        """Memory after each step: ``allocated`` / ``reserved`` / ``peak`` bytes on CUDA, else process ``rss``."""
        return list(self.memory)


def _markdown(rows: list[dict]) -> str:
    cols = ["name", "count", "cpu_total", "self_cpu_total", "device_total", "cpu_memory"]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        out.append("| " + " | ".join(f"{r[c]:.3f}" if isinstance(r[c], float) else str(r[c]) for c in cols) + " |")
    return "\n".join(out)


class ProfilerCallback(Callback):
    """Drives a :class:`Profiler` from ``Model.fit``: start at train begin, ``step()`` after every training
    batch, stop at train end."""

    def __init__(self, profiler: Profiler) -> None:
        super().__init__()
        self.profiler = profiler
        self._running = False

    def on_train_begin(self, logs=None):
        self.profiler.start()
        self._running = True

    def on_train_batch_end(self, step, logs=None):
        self.profiler.step()

    def on_train_end(self, logs=None):
        if self._running:
            self._running = False
            self.profiler.stop()

    def on_exception(self, exception):
        self.on_train_end()  # a profiler left running would make the next one fail to start
