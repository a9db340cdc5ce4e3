"""Benchmark tables; the timing itself lives in :mod:`sampan.utils.timing` (shared with the library)."""
from __future__ import annotations

from sampan.utils.timing import interleaved, median_time

__all__ = ["interleaved", "median_time", "print_table"]


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
