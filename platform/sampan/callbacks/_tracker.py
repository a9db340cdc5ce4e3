"""``BestTracker``: the shared logic of callbacks that watch one logged value for its best (EarlyStopping,
ModelCheckpoint). Named apart from :mod:`sampan.monitor`, which samples GPU and host resources."""
from __future__ import annotations

import math
import warnings
from typing import Literal

from sampan.errors import bad_argument

Mode = Literal["auto", "min", "max"]


def resolve_mode(mode: str, monitor: str) -> str:
    if mode not in ("auto", "min", "max"):
        raise ValueError(bad_argument("mode", mode, "'auto', 'min' or 'max'"))
    if mode != "auto":
        return mode
    maximise = any(word in monitor for word in ("acc", "precision", "recall", "f1", "auc"))
    return "max" if maximise else "min"


def _number(name: str, value: object) -> float:
    """``float(value)`` for a number (NumPy scalars and 0-d tensors included); a string or another object is
    refused by name rather than with float()'s "could not convert string to float"."""
    try:
        if isinstance(value, (str, bytes, bool)):
            raise TypeError(type(value).__name__)
        return float(value)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(bad_argument(name, value, "a number", f"write {name}=0.01, without quotes")) from None


class BestTracker:
    """Tracks the best value of ``logs[monitor]`` with a ``min_delta`` margin."""

    def __init__(self, monitor: str, mode: Mode = "auto", min_delta: float = 0.0, baseline: float | None = None):
        if not isinstance(monitor, str) or not monitor:
            raise ValueError(bad_argument("monitor", monitor, "a logged name such as 'eval_loss' or 'eval_acc'"))
        self.monitor = monitor
        self.mode = resolve_mode(mode, monitor)
        self.min_delta = abs(_number("min_delta", min_delta))
        self._initial = (_number("baseline", baseline) if baseline is not None else
                         math.inf if self.mode == "min" else -math.inf)
        self.best = self._initial
        self._warned = False

    def reset(self) -> None:
        """Forgets the best value seen (a new ``fit``; a resumed one loads it from the checkpoint instead)."""
        self.best = self._initial

    def value(self, logs: dict | None, owner: str, params: dict | None = None) -> float | None:
        """``logs[monitor]`` as a float; None (with one warning) when absent. ``params`` are the callback's
        ``fit`` params: an ``eval_`` value missing on an epoch without evaluation (``eval_freq > 1``) is expected."""
        logs = logs or {}
        value = logs.get(self.monitor)
        if value is None:
            skipped_eval = (params or {}).get("has_eval") and self.monitor.startswith("eval_") and not any(
                k.startswith("eval_") for k in logs)
            if not self._warned and not skipped_eval:
                known = sorted(k for k, v in logs.items() if isinstance(v, (int, float)))
                hint = ("monitor one of those names" if any(k.startswith("eval_") for k in logs) else
                        "monitor 'eval_...' values only when fit() gets eval_data")
                warnings.warn(f"{owner}: `monitor`={self.monitor!r} is not in the logs; available: {known}. "
                              f"HINT: {hint}.", stacklevel=3)
                self._warned = True
            return None
        return float(value)

    def improved(self, value: float) -> bool:
        if self.mode == "min":
            return value < self.best - self.min_delta
        return value > self.best + self.min_delta

    def state_dict(self) -> dict:
        return {"best": self.best}

    def load_state_dict(self, state: dict) -> None:
        self.best = state.get("best", self.best)
