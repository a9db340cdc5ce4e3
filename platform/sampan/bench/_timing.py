"""Timing helpers for side-by-side benchmarks: medians of repeated runs, interleaved."""
from __future__ import annotations

import random
import statistics
import time
from typing import Callable


def median_time(fn: Callable[[], object], *, repeat: int = 5, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` in seconds over ``repeat`` runs after ``warmup`` runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved(fns: dict[str, Callable[[], object]], *, repeat: int = 5, warmup: int = 1) -> dict[str, float]:
    """Median times of several candidates, run in turn so machine noise hits all of them alike.

    The order is shuffled every round (seeded), so no candidate always runs right after the same
    other one: a call of tens of microseconds that follows a torch call pays for the caches that
    call left behind, which in a fixed order (or a rotation, which keeps who follows whom) always
    charged the same candidate.
    """
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    items = list(fns.items())
    order = random.Random(0)
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        order.shuffle(items)
        for name, fn in items:
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def print_table(title: str, rows: list[dict], columns: list[str]) -> None:
    """Prints rows as a Markdown table (pasteable into BENCHMARKS.md)."""
    print(f"\n### {title}\n")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        cells = []
        for c in columns:
            v = row.get(c, "")
            cells.append(f"{v:.4g}" if isinstance(v, float) else str(v))
        print("| " + " | ".join(cells) + " |")
