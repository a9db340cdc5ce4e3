"""``ResourceSampler``: a background thread that reads GPU and host figures at a chosen rate."""
from __future__ import annotations

import collections
import csv
import logging
import threading
import time
import weakref
from typing import Any, Callable

from sampan.errors import bad_argument, check_int
from sampan.monitor._readers import GpuReader, HostReader

_log = logging.getLogger("sampan.monitor")
_GPU_FIELDS = ("util", "mem_used", "mem_total", "allocated", "reserved", "peak")


def _flatten(t: float, step: int | None, host: dict, gpus: list[dict]) -> dict:
    row: dict[str, Any] = {"time": t, "step": step, **host}
    for dev in gpus:
        i = dev["index"]
        for key in _GPU_FIELDS:
            if key in dev:
                row[f"gpu{i}_{key}"] = dev[key]
    return row


def _run(ref: "weakref.ref[ResourceSampler]", stop: threading.Event, interval: float) -> None:
    """The thread body holds only a weak reference, so a forgotten sampler is collected and its thread ends."""
    while not stop.wait(interval):
        sampler = ref()
        if sampler is None:
            return
        sampler.sample_now()
        del sampler


class ResourceSampler:
    """Samples GPUs (nvidia-ml-py and ``torch.cuda``) and the host (psutil) every ``interval`` seconds.

    Each sample is a flat dict: ``time`` (seconds since ``start``), ``step`` (the training step the
    monitor callback last saw), host ``rss``, ``sys_used``, ``sys_total`` (bytes), ``cpu``, ``proc_cpu``
    (percent), and per GPU ``gpu{i}_util``, ``gpu{i}_mem_used``, ``gpu{i}_mem_total`` (device view, NVML) and
    ``gpu{i}_allocated``, ``gpu{i}_reserved``, ``gpu{i}_peak`` (this process, torch.cuda). Without a GPU the
    GPU keys are absent and ``note`` says so once.

    Args:
        interval: seconds between samples (> 0).
        gpu: read GPUs at all.
        max_samples: samples kept, at least 1 (oldest dropped first); None keeps all.

    Example:
        >>> import time
        >>> from sampan.monitor import ResourceSampler
        >>> with ResourceSampler(interval=0.05) as s:
        ...     time.sleep(0.2)
        >>> len(s.samples) >= 2 and "rss" in s.samples[-1]
        True
    """

    def __init__(self, interval: float = 0.5, *, gpu: bool = True, max_samples: int | None = 100_000) -> None:
        if not isinstance(interval, (int, float)) or isinstance(interval, bool) or not interval > 0:
            raise ValueError(bad_argument("interval", interval, "a number of seconds > 0", "e.g. interval=0.5"))
        if max_samples is not None:
            check_int("max_samples", max_samples, fix="pass max_samples=100_000, or None to keep every sample")
        self.interval = float(interval)
        self.step: int | None = None
        self._samples: collections.deque[dict] = collections.deque(maxlen=max_samples)
        self._listeners: list[Callable[[dict], None]] = []
        self._lock = threading.Lock()
        # one sample at a time, in time order: the fit's end samples in the training thread while the sampler's
        # thread may be sampling (a listener that samples again, such as a leak warning, may re-enter)
        self._sampling = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = time.monotonic()
        self._gpu = GpuReader(use_nvml=gpu) if gpu else None
        self._host = HostReader()
        self._failed_listeners: set[int] = set()

    # -------------------------------------------------------------- state
    @property
    def note(self) -> str | None:
        """Why GPU figures are missing, or None."""
        return self._gpu.note if self._gpu is not None else "GPU sampling is off (gpu=False)."

    @property
    def has_gpu(self) -> bool:
        return self._gpu is not None and self._gpu.has_gpu

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def samples(self) -> list[dict]:
        with self._lock:
            return list(self._samples)

    @property
    def latest(self) -> dict | None:
        with self._lock:
            return self._samples[-1] if self._samples else None

    # -------------------------------------------------------------- listeners
    def add_listener(self, fn: Callable[[dict], None]) -> None:
        """Calls ``fn(sample)`` after each sample, in the sampler's thread (so ``fn`` must be quick and must
        only set values, e.g. widget traits)."""
        self._listeners.append(fn)

    def remove_listener(self, fn: Callable[[dict], None]) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    # -------------------------------------------------------------- sampling
    def sample_now(self) -> dict:
        """Takes one sample in the calling thread (after any sample another thread is taking), stores it and
        tells the listeners; its time is when its figures were read."""
        with self._sampling:
            gpus = self._gpu.read() if self._gpu is not None else []
            host = self._host.read()
            row = _flatten(round(time.monotonic() - self._t0, 4), self.step, host, gpus)
            with self._lock:
                self._samples.append(row)
            for fn in list(self._listeners):
                try:
                    fn(row)
                except Exception:  # a broken view must not kill sampling; say so once per listener
                    if id(fn) not in self._failed_listeners:
                        self._failed_listeners.add(id(fn))
                        _log.exception("A ResourceSampler listener failed; it stays registered.")
        return row

    def start(self) -> "ResourceSampler":
        """Starts the thread (a first sample is taken at once); starting a running sampler does nothing."""
        if self.running:
            return self
        self._stop = threading.Event()
        self.sample_now()
        self._thread = threading.Thread(target=_run, args=(weakref.ref(self), self._stop, self.interval),
                                        name="sampan-resource-sampler", daemon=True)
        self._thread.start()
        weakref.finalize(self, self._stop.set)
        return self

    def stop(self, timeout: float = 2.0) -> None:
        """Stops the thread and waits for it (at most ``timeout`` seconds)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def close(self) -> None:
        """Stops and releases NVML."""
        self.stop()
        if self._gpu is not None:
            self._gpu.close()

    def clear(self) -> None:
        with self._lock:
            self._samples.clear()

    def __enter__(self) -> "ResourceSampler":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -------------------------------------------------------------- export
    def columns(self) -> list[str]:
        cols: dict[str, None] = {}
        for row in self.samples:
            cols.update(dict.fromkeys(row))
        return list(cols)

    def to_csv(self, path) -> None:
        """Writes the samples as CSV (one row per sample, the union of keys as columns)."""
        rows, cols = self.samples, self.columns()
        with open(path, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=cols)
            writer.writeheader()
            writer.writerows(rows)

    def to_dataframe(self):
        """The samples as a pandas DataFrame (needs pandas)."""
        from sampan.utils.imports import require

        return require("pandas").DataFrame(self.samples, columns=self.columns() or None)

    def __repr__(self) -> str:
        return (f"ResourceSampler(interval={self.interval}, running={self.running}, samples={len(self._samples)}, "
                f"gpu={self.has_gpu})")
