"""``MonitorCallback``: samples resources during ``Model.fit`` and checks memory step after step for leaks."""
from __future__ import annotations

import time
from typing import Any

import torch

from sampan.callbacks.base import Callback
from sampan.monitor.leak import LeakDetector
from sampan.monitor.sampler import ResourceSampler


def _memory_probe(device: Any) -> tuple[str, Any, float]:
    """The figure the leak check watches after a step, and the least seconds between two reads:
    torch.cuda allocated on CUDA (a counter, read every step), else process RSS (a /proc read, ~50 us, so
    at most every 50 ms to keep the check under 0.1% of a fit)."""
    dev = torch.device(device) if device is not None else torch.device("cpu")
    if dev.type == "cuda" and torch.cuda.is_available():
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        return "torch.cuda allocated", lambda: torch.cuda.memory_allocated(index), 0.0
    try:
        import os

        import psutil

        proc = psutil.Process(os.getpid())
        return "process RSS", lambda: proc.memory_info().rss, 0.05
    except ImportError:
        return "nothing", None, 0.0


class MonitorCallback(Callback):
    """Starts a :class:`ResourceSampler` for the run, tags samples with the step, and warns through
    :class:`LeakDetector` when memory keeps growing.

    Args:
        sampler: a sampler to drive; a new one at ``interval`` when None.
        interval: seconds between samples for a new sampler.
        leak_check: watch memory after every training step.
        leak_options: keyword arguments for :class:`LeakDetector`.
        probe_interval: least seconds between two memory reads for the leak check; None: every step on
            CUDA, every 50 ms for process RSS.

    Example:
        >>> cb = MonitorCallback(interval=0.5)
        >>> # model.fit(train, callbacks=[cb]); cb.sampler.to_csv("resources.csv")
    """

    def __init__(self, sampler: ResourceSampler | None = None, *, interval: float = 0.5, leak_check: bool = True,
                 leak_options: dict | None = None, probe_interval: float | None = None) -> None:
        super().__init__()
        self.sampler = sampler if sampler is not None else ResourceSampler(interval)
        self.leak_check = leak_check
        self._leak_options = dict(leak_options or {})
        self.detector: LeakDetector | None = None
        self._probe = None
        self._probe_interval = probe_interval
        self._next_probe = 0.0
        self._started_here = False

    def on_train_begin(self, logs=None):
        # a fit that was interrupted (KeyboardInterrupt) never reached on_train_end: keep its claim, so this
        # run's end stops the sampler it started; a sampler the user started stays the user's to stop
        self._started_here = self._started_here or not self.sampler.running
        self.sampler.start()
        if self.leak_check:
            name, self._probe, every = _memory_probe(getattr(self.model, "device", None))
            self._every = every if self._probe_interval is None else self._probe_interval
            self._next_probe = 0.0
            self.detector = LeakDetector(name=name, **self._leak_options)

    def on_train_batch_end(self, step, logs=None):
        if logs and "step" in logs:
            self.sampler.step = logs["step"]
        if self._probe is not None and self.detector is not None:
            now = time.monotonic()
            if now >= self._next_probe:
                self._next_probe = now + self._every
                self.detector.update(self.sampler.step if self.sampler.step is not None else step, self._probe())

    def on_train_end(self, logs=None):
        self.sampler.sample_now()
        if self._started_here:
            self.sampler.stop()
            self._started_here = False
