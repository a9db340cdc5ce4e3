"""Where a `make test` run's CPU goes, per test, including the processes no test waits for (forked lesson kernels,
servers, browsers).

``SAMPAN_TEST_TIMELINE`` (tests/conftest.py) records each test's worker pid, start and end; this script samples
every process's CPU twice a second while the suite runs and charges it to the test that the process's pytest-xdist
worker (found through its parents) was running then::

    out=$(mktemp -d)  # outside the checkout: a test run that adds files to it fails
    python3 tests/cpu_sampler.py record "$out/samples.jsonl" &
    SAMPAN_TEST_TIMELINE="$out/timeline.jsonl" make test
    kill %1
    python3 tests/cpu_sampler.py report "$out/timeline.jsonl" "$out/samples.jsonl"

Linux only (``/proc``); a process that lives less than a sample's interval may be missed. Twenty-eighth session:
1,368 CPU-seconds sampled in a 12-minute run, a third of it the lessons (BENCHMARKS.md, "make test").
"""
from __future__ import annotations

import bisect
import collections
import json
import os
import sys
import time

INTERVAL = 0.5  # seconds between samples


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds so far) of a process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip()[:200]
    except OSError:
        return "?"


def record(out_path: str) -> None:
    """Writes one JSON line per process and sample that used CPU: time, pid, CPU seconds, ancestors, command."""
    last: dict[int, float] = {}
    parents: dict[int, int] = {}
    named: set[int] = set()
    with open(out_path, "w", encoding="utf-8") as out:
        while True:
            now, seen = time.time(), {}
            for entry in os.listdir("/proc"):
                if entry.isdigit() and (stat := _stat(int(entry))) is not None:
                    parents[int(entry)], seen[int(entry)] = stat
            for pid, cpu in seen.items():
                used = cpu - last.get(pid, cpu if not last else 0.0)  # the first sample only sets the baseline
                if used <= 0:
                    continue
                chain, p = [], pid
                while p in parents and len(chain) < 32:
                    chain.append(p)
                    p = parents[p]
                out.write(json.dumps({"t": now, "pid": pid, "cpu": used, "chain": chain,
                                      "cmd": None if pid in named else _command(pid)}) + "\n")
                named.add(pid)
            last = seen
            out.flush()
            time.sleep(INTERVAL)


def attribute(timeline: list[dict], samples: list[dict]) -> dict[str, float]:
    """CPU seconds per test id (``<worker>:between-tests`` for collection and the gaps; ``other: <command>`` for
    processes outside every worker)."""
    worker_of = {row["pid"]: row["worker"] for row in timeline if "pid" in row}
    spans: dict[str, list[tuple[float, float, str]]] = collections.defaultdict(list)
    for row in timeline:
        spans[row["worker"]].append((row["start"], row["end"], row["test"]))
    starts = {w: [s for s, _, _ in sorted(v)] for w, v in spans.items()}
    for v in spans.values():
        v.sort()
    commands = {s["pid"]: s["cmd"] for s in samples if s.get("cmd")}
    charged: collections.Counter = collections.Counter()
    for s in samples:
        worker = next((worker_of[p] for p in s["chain"] if p in worker_of), None)
        if worker is None:
            charged[f"other: {commands.get(s['pid'], '?')[:100]}"] += s["cpu"]
            continue
        i = bisect.bisect_right(starts[worker], s["t"]) - 1
        inside = i >= 0 and spans[worker][i][0] <= s["t"] <= spans[worker][i][1] + INTERVAL * 2
        charged[spans[worker][i][2] if inside else f"{worker}:between-tests"] += s["cpu"]
    return dict(charged)


def report(timeline_path: str, samples_path: str, top: int = 40) -> None:
    def rows(path: str) -> list[dict]:
        with open(path, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]

    charged = attribute(rows(timeline_path), rows(samples_path))
    by_file: collections.Counter = collections.Counter()
    for test, cpu in charged.items():
        by_file[test.split("::")[0]] += cpu
    print(f"CPU seconds sampled: {sum(charged.values()):,.0f}")
    for title, table in (("by file", by_file), ("by test", collections.Counter(charged))):
        print(f"\n{title}:")
        for name, cpu in table.most_common(top):
            print(f"{cpu:8.1f}  {name[:150]}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "record":
        record(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "report":
        report(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
