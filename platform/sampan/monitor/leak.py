"""``LeakDetector``: warns when memory grows step after step ("GPU memory keeps growing")."""
from __future__ import annotations

import collections
import logging
import warnings

from sampan.errors import bad_argument, is_number

_log = logging.getLogger("sampan.monitor")
_MiB = 1024 * 1024


class MemoryLeakWarning(UserWarning):
    """Memory grew over many consecutive training steps."""


class LeakDetector:
    """Watches one memory figure per step and warns once when it keeps growing.

    After ``warmup`` steps (allocator caches fill up first), it looks at the last ``window`` values: it warns
    when they grew by at least ``min_growth`` bytes in all, rose on at least half of the steps and fell on at
    most ``tolerance`` of them. A steady loop allocates and frees the same amount each step, so its figure is
    flat; a loop that keeps tensors alive (``losses.append(loss)`` instead of ``loss.item()``) climbs.

    Args:
        window: steps looked at together (>= 4).
        warmup: steps ignored at the start.
        min_growth: bytes of growth over the window that count as a leak.
        tolerance: fraction of steps in the window allowed to go down.
        name: what is measured, for the message ("torch.cuda allocated", "process RSS").

    Example:
        >>> import warnings
        >>> from sampan.monitor import LeakDetector
        >>> d = LeakDetector(window=5, warmup=0, min_growth=10)
        >>> with warnings.catch_warnings(record=True) as w:
        ...     warnings.simplefilter("always")
        ...     for step in range(6):
        ...         _ = d.update(step, 100 * step)
        >>> d.warned, len(w)
        (True, 1)
    """

    def __init__(self, *, window: int = 20, warmup: int = 5, min_growth: int = 4 * _MiB, tolerance: float = 0.1,
                 name: str = "memory") -> None:
        if not isinstance(window, int) or window < 4:
            raise ValueError(bad_argument("window", window, "an int >= 4 (steps looked at together)"))
        if not is_number(tolerance) or not 0 <= tolerance < 0.5:
            raise ValueError(bad_argument("tolerance", tolerance, "a fraction in [0, 0.5)", "pass e.g. tolerance=0.1"))
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
            raise ValueError(bad_argument("warmup", warmup, "an int >= 0 (steps ignored at the start)",
                                          "pass e.g. warmup=5"))
        if not is_number(min_growth) or min_growth < 0:
            raise ValueError(bad_argument("min_growth", min_growth, "a number of bytes >= 0",
                                          "pass e.g. min_growth=4 * 1024 ** 2 for 4 MiB"))
        self.window, self.warmup, self.min_growth, self.tolerance, self.name = window, warmup, min_growth, tolerance, name
        self._values: collections.deque[tuple[int, int]] = collections.deque(maxlen=window)
        self._seen = 0
        self._pending = 0
        self._every = max(1, window // 5)
        self.warned = False
        self.report: dict | None = None
        self.message: str | None = None  # the warning in the learner's language (sampan.utils.i18n)
        self.messages: dict[str, str] | None = None   # the warning in each language, {"en": ..., "zh": ...}

    def reset(self) -> None:
        self._values.clear()
        self._seen = self._pending = 0

    def update(self, step: int, value: int) -> bool:
        """Adds the figure after ``step``; returns True when this call raised the warning."""
        self._seen += 1
        if self._seen <= self.warmup or self.warned:
            return False
        self._values.append((int(step), int(value)))
        self._pending += 1
        # look every window/5 steps: a leak shows over many steps, and the check stays ~1 us a step
        if len(self._values) < self.window or self._pending < self._every:
            return False
        self._pending = 0
        vals = [v for _, v in self._values]
        deltas = [b - a for a, b in zip(vals, vals[1:])]
        ups, downs, growth = sum(d > 0 for d in deltas), sum(d < 0 for d in deltas), vals[-1] - vals[0]
        if growth < self.min_growth or ups < len(deltas) / 2 or downs > self.tolerance * len(deltas):
            return False
        first, last = self._values[0][0], self._values[-1][0]
        self.report = {"name": self.name, "first_step": first, "last_step": last, "growth": growth,
                       "per_step": growth / max(last - first, 1), "rising_steps": ups, "window": len(vals)}
        figures = {"name": self.name, "growth": growth / _MiB, "first": first, "last": last, "ups": ups,
                   "steps": len(deltas), "per_step": self.report["per_step"] / 1024}
        self.messages = {lang: text.format(**{**figures, "name": _NAMES[lang].get(self.name, self.name)})
                         for lang, text in _LEAK_TEXT.items()}
        message = self.messages["en"]  # the log and the warning stay English; a view shows messages[its language]
        from sampan.utils.i18n import language

        self.warned, self.message = True, self.messages.get(language(), message)  # what a lesson prints
        _log.warning(message)
        warnings.warn(MemoryLeakWarning(message), stacklevel=3)
        return True


_LEAK_TEXT = {
    "en": ("{name} grew by {growth:.1f} MiB from step {first} to step {last} (up on {ups} of {steps} steps, about "
           "{per_step:.0f} KiB a step). HINT: keep `loss.item()` rather than the loss tensor, detach outputs you "
           "store (`out.detach().cpu()`), and look for lists that grow every step."),
    "zh": ("{name} 从第 {first} 步到第 {last} 步增长了 {growth:.1f} MiB（{steps} 步中有 {ups} 步上升，每步约 "
           "{per_step:.0f} KiB）。提示：保存 `loss.item()` 而不是损失张量，保存输出前先 detach "
           "（`out.detach().cpu()`），并检查每一步都在变长的列表。"),
}
_NAMES = {"en": {}, "zh": {"memory": "内存", "process RSS": "进程常驻内存（RSS）",
                           "torch.cuda allocated": "torch.cuda 已分配内存"}}
