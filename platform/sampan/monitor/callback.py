"""``MonitorCallback``: samples resources during ``Model.fit`` and checks memory step after step for leaks."""
from __future__ import annotations

import os
import time
from typing import Any, Callable

import torch

from sampan.callbacks.base import Callback
from sampan.errors import bad_argument
from sampan.monitor.leak import LeakDetector
from sampan.monitor.sampler import ResourceSampler


_STATM: dict[str, int] = {}


def _statm_rss() -> Callable[[], int] | None:
    """Process RSS from ``/proc/self/statm`` through one descriptor opened once per process (~5 us a read,
    a tenth of ``psutil.Process.memory_info``); None off Linux."""
    if _STATM.get("pid") != os.getpid():  # first use, or a forked child (the fd would read the parent)
        try:
            _STATM.update(fd=os.open("/proc/self/statm", os.O_RDONLY), pid=os.getpid())
        except OSError:
            return None
    fd, page = _STATM["fd"], os.sysconf("SC_PAGE_SIZE")
    return lambda: int(os.pread(fd, 128, 0).split()[1]) * page


def _memory_probe(device: Any) -> tuple[str, Any]:
    """The figure the leak check watches: torch.cuda allocated on CUDA (a counter), else process RSS from
    /proc/self/statm on Linux, else psutil's."""
    dev = torch.device(device) if device is not None else torch.device("cpu")
    if dev.type == "cuda" and torch.cuda.is_available():
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        return "torch.cuda allocated", lambda: torch.cuda.memory_allocated(index)
    statm = _statm_rss()
    if statm is not None:
        return "process RSS", statm
    from sampan.utils.host import process_rss

    return "process RSS", process_rss


_LEAK_KEYS = ("window", "warmup", "min_growth", "tolerance")


def _check_leak_options(leak_options: Any) -> dict:
    """The leak-check settings, checked now rather than when ``fit`` starts the detector."""
    if leak_options is None:
        return {}
    if not isinstance(leak_options, dict):
        raise TypeError(bad_argument("leak_options", leak_options, "a dict of leak-check settings, or None",
                                     'pass e.g. leak_options={"window": 5}, or leave it out'))
    unknown = [k for k in leak_options if k not in _LEAK_KEYS]
    if unknown:
        raise ValueError(bad_argument("leak_options", leak_options, f"a dict with keys among {list(_LEAK_KEYS)}",
                                      f"check the spelling of {unknown}"))
    LeakDetector(**leak_options)  # its own checks name a bad value
    return dict(leak_options)


class MonitorCallback(Callback):
    """Starts a :class:`ResourceSampler` for the run, tags samples with the step, and warns through
    :class:`LeakDetector` when memory keeps growing.

    Args:
        sampler: a sampler to drive; a new one at ``interval`` when None.
        interval: seconds between samples for a new sampler.
        leak_check: watch memory after every training step.
        leak_options: keyword arguments for :class:`LeakDetector`.
        probe_interval: least seconds between two memory reads for the leak check (default 0.1: a leak
            shows over many steps, and a fit's step pays ~1 us instead of a read).
        on_leak: called with the warning's text when the leak check fires (views use it).

    Example:
        >>> from sampan.monitor import MonitorCallback
        >>> cb = MonitorCallback(interval=0.5)
        >>> # model.fit(train, callbacks=[cb]); cb.sampler.to_csv("resources.csv")
    """

    def __init__(self, sampler: ResourceSampler | None = None, *, interval: float = 0.5, leak_check: bool = True,
                 leak_options: dict | None = None, probe_interval: float = 0.1,
                 on_leak: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.sampler = sampler if sampler is not None else ResourceSampler(interval)
        self.leak_check = leak_check
        self._leak_options = _check_leak_options(leak_options)
        if isinstance(probe_interval, bool) or not isinstance(probe_interval, (int, float)) or probe_interval < 0:
            raise ValueError(bad_argument("probe_interval", probe_interval, "a number of seconds >= 0",
                                          "pass probe_interval=0.1 (the default)"))
        self.detector: LeakDetector | None = None
        self._probe = None
        self._every = probe_interval
        self._next_probe = 0.0
        self._on_leak = on_leak
        self._started_here = False

    def on_train_begin(self, logs=None):
        # a fit that was interrupted (KeyboardInterrupt) never reached on_train_end: keep its claim, so this
        # run's end stops the sampler it started; a sampler the user started stays the user's to stop
        self._started_here = self._started_here or not self.sampler.running
        self.sampler.start()
        if self.leak_check:
            name, self._probe = _memory_probe(getattr(self.model, "device", None))
            self._next_probe = 0.0
            self.detector = LeakDetector(name=name, **self._leak_options)

    def on_train_batch_end(self, step, logs=None):
        self.sampler.step = step = logs.get("step", step) if logs else step
        if self._probe is not None and time.monotonic() >= self._next_probe:
            self._next_probe = time.monotonic() + self._every
            if self.detector.update(step, self._probe()) and self._on_leak is not None:
                self._on_leak(self.detector.message)

    def on_train_end(self, logs=None):
        self.sampler.sample_now()
        if self._started_here:
            self.sampler.stop()
            self._started_here = False

    def on_exception(self, exception):
        self.on_train_end()  # the sampler this fit started stops; its samples up to the error stay
