"""Timing candidates side by side: medians of repeated runs, interleaved in a shuffled order.

One home for the timing that both ``sampan bench`` and the library use (the inference
``Predictor`` picks its fastest backend with :func:`interleaved`). Once CUDA is in use, every timed call is
bracketed by ``torch.cuda.synchronize()``: CUDA calls return when their kernels are queued, so without it a
GPU candidate would be timed by its launch cost alone.
"""
from __future__ import annotations

import random
import statistics
import sys
import time
from typing import Callable


def _cuda_sync() -> Callable[[], None]:
    """``torch.cuda.synchronize`` once this process has started CUDA, else a no-op (never imports torch)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.synchronize
    return lambda: None


def median_time(fn: Callable[[], object], *, repeat: int = 5, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` in seconds over ``repeat`` runs after ``warmup`` runs.

    Example:
        >>> from sampan.utils.timing import median_time
        >>> median_time(lambda: sum(range(100)), repeat=3) >= 0
        True
    """
    for _ in range(warmup):
        fn()
    sync = _cuda_sync()
    times = []
    for _ in range(repeat):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved_for(fns: dict[str, Callable[[], object]], seconds: float, *, rounds: tuple[int, int] = (3, 25),
                    warmup: int = 1) -> dict[str, float]:
    """:func:`interleaved` with as many rounds as fit in about ``seconds``, at least ``rounds[0]`` and at most
    ``rounds[1]``: one timed round after the warm-up sizes the rest (a choice made at run time, such as
    ``to_static``'s faster path, should cost about the same whatever the model).

    Example:
        >>> from sampan.utils.timing import interleaved_for
        >>> times = interleaved_for({"a": lambda: sum(range(10)), "b": lambda: sum(range(1000))}, 0.01)
        >>> times["a"] < times["b"]
        True
    """
    probe = interleaved(fns, repeat=1, warmup=warmup)
    repeat = int(min(rounds[1], max(rounds[0], seconds / max(sum(probe.values()), 1e-9))))
    return interleaved(fns, repeat=repeat, warmup=0)


def interleaved(fns: dict[str, Callable[[], object]], *, repeat: int = 5, warmup: int = 1) -> dict[str, float]:
    """Median times of several candidates, run in turn so machine noise hits all of them alike.

    The order is shuffled every round (seeded), so no candidate always runs right after the same
    other one: a call of tens of microseconds that follows a torch call pays for the caches that
    call left behind, which in a fixed order (or a rotation, which keeps who follows whom) always
    charged the same candidate.

    Example:
        >>> from sampan.utils.timing import interleaved
        >>> times = interleaved({"a": lambda: sum(range(10)), "b": lambda: sum(range(1000))}, repeat=3)
        >>> sorted(times)
        ['a', 'b']
    """
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    items = list(fns.items())
    order = random.Random(0)
    sync = _cuda_sync()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        order.shuffle(items)
        for name, fn in items:
            sync()
            start = time.perf_counter()
            fn()
            sync()
            times[name].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}
