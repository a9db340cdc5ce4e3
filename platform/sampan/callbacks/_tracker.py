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


class BestTracker:
    """Tracks the best value of ``logs[monitor]`` with a ``min_delta`` margin."""

    def __init__(self, monitor: str, mode: Mode = "auto", min_delta: float = 0.0):
        if not isinstance(monitor, str) or not monitor:
            raise ValueError(bad_argument("monitor", monitor, "a logged name such as 'eval_loss' or 'eval_acc'"))
        self.monitor = monitor
        self.mode = resolve_mode(mode, monitor)
        self.min_delta = abs(float(min_delta))
        self.best = math.inf if self.mode == "min" else -math.inf
        self._warned = False

    def value(self, logs: dict | None, owner: str) -> float | None:
        logs = logs or {}
        value = logs.get(self.monitor)
        if value is None:
            if not self._warned:
                known = sorted(k for k, v in logs.items() if isinstance(v, (int, float)))
                warnings.warn(
                    f"{owner}: `monitor`={self.monitor!r} is not in the logs; available: {known}. HINT: monitor "
                    f"'eval_...' values only when fit() gets eval_data.", stacklevel=3)
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
