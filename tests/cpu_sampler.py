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

The same code's run takes 8.5 minutes on a quiet host and 11 on a busy one (fortieth session): a run's figures
mean something only beside the host's speed then. ``probe`` reads it with both cores working, as the suite has
them: eager torchvision resnet18, batch 1, one thread, the median of 20 calls, in two processes at once::

    python3 tests/cpu_sampler.py probe        # .venv/bin/python of this checkout; or give an interpreter
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
            charged["other: kernel threads of the machine" if _kernel_thread(s["chain"]) else
                    f"other: {commands.get(s['pid'], '?')[:100]}"] += s["cpu"]
            continue
        i = bisect.bisect_right(starts[worker], s["t"]) - 1
        inside = i >= 0 and spans[worker][i][0] <= s["t"] <= spans[worker][i][1] + INTERVAL * 2
        charged[spans[worker][i][2] if inside else f"{worker}:between-tests"] += s["cpu"]
    return dict(charged)


def _kernel_thread(chain: list[int]) -> bool:
    """Whether a process is a thread of the machine's kernel: its parent is ``kthreadd``, pid 2."""
    return len(chain) > 1 and chain[1] == 2


def kind(cmd: str | None, chain: list[int], commands: dict[int, str]) -> str:
    """What sort of process a sample is from: a forked lesson kernel and its fork server, a compiler, a browser, a
    kernel thread of the machine (not the suite's, but it takes the same cores)."""
    cmd = cmd or ""
    if _kernel_thread(chain):
        return "kernel threads of the machine"
    if "forkkernels import serve" in cmd:
        parent = commands.get(chain[1], "") if len(chain) > 1 else ""
        return "forked kernels" if "forkkernels import serve" in parent else "fork servers"
    if "cc1plus" in cmd or cmd.split(" ")[0].endswith(("/as", "/ld", "collect2", "g++", "c++")):
        return "C++ compiler"
    if "chrom" in cmd or cmd.startswith("/proc/self/exe --type="):
        return "Chromium"
    if "ipykernel" in cmd:
        return "kernels started as new interpreters"
    if "xdist" in cmd or "exec(eval(sys.stdin" in cmd:
        return "pytest workers"
    words = cmd.split()
    if len(words) > 1 and "python" in os.path.basename(words[0]):
        flag = next((w for w in words[1:] if not w.startswith("-") or w in ("-c", "-m")), "")
        return "new interpreters: " + (" ".join(words[words.index(flag):words.index(flag) + 2])[:60]
                                       if flag in ("-c", "-m") else os.path.basename(flag)[:60])
    return (os.path.basename(words[0]) if words else "?")[:60]


def by_kind(samples: list[dict]) -> dict[str, tuple[float, int]]:
    """CPU seconds and number of processes for each :func:`kind`."""
    commands = {s["pid"]: s["cmd"] for s in samples if s.get("cmd")}
    cpu: collections.Counter = collections.Counter()
    pids: dict[str, set] = collections.defaultdict(set)
    for s in samples:
        k = kind(commands.get(s["pid"]), s["chain"], commands)
        cpu[k] += s["cpu"]
        pids[k].add(s["pid"])
    return {k: (cpu[k], len(pids[k])) for k in cpu}


def report(timeline_path: str, samples_path: str, top: int = 40) -> None:
    def rows(path: str) -> list[dict]:
        with open(path, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]

    timeline, samples = rows(timeline_path), rows(samples_path)
    commands = {s["pid"]: s["cmd"] for s in samples if s.get("cmd")}
    start, end = min(r["start"] for r in timeline), max(r["end"] for r in timeline)
    samples = [s for s in samples if start <= s["t"] <= end + 2 * INTERVAL]  # the tests' own time, not set-up
    for s in samples:  # a process's command line comes with its first sample, which may be before the tests
        s["cmd"] = commands.get(s["pid"])
    charged = attribute(timeline, samples)
    by_file: collections.Counter = collections.Counter()
    for test, cpu in charged.items():
        by_file[test.split("::")[0]] += cpu
    print(f"CPU seconds sampled while tests ran: {sum(charged.values()):,.0f} in {end - start:,.0f} s")
    print("\nby kind of process (CPU seconds, processes):")
    for name, (cpu, count) in sorted(by_kind(samples).items(), key=lambda kv: -kv[1][0])[:25]:
        print(f"{cpu:8.1f} {count:5d}  {name}")
    for title, table in (("by file", by_file), ("by test", collections.Counter(charged))):
        print(f"\n{title}:")
        for name, cpu in table.most_common(top):
            print(f"{cpu:8.1f}  {name[:150]}")


# one probe process: prints its median milliseconds a call
PROBE = """
import sys, time, torch, torchvision
torch.set_num_threads(1)
net, x = torchvision.models.resnet18().eval(), torch.randn(1, 3, int(sys.argv[2]), int(sys.argv[2]))
with torch.inference_mode():
    for _ in range(5):
        net(x)
    times = []
    for _ in range(int(sys.argv[1])):
        start = time.perf_counter(); net(x); times.append(time.perf_counter() - start)
print(sorted(times)[len(times) // 2] * 1e3)
"""


PROBE_CALLS = 20  # timed calls in each probe process, after 5 to warm up


def probe(python: str, processes: int = 2, calls: int = PROBE_CALLS, size: int = 224) -> list[float]:
    """The median milliseconds of a resnet18 call in each of ``processes`` probes run at once (one per core)."""
    import subprocess

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    running = [subprocess.Popen([python, "-c", PROBE, str(calls), str(size)], stdout=subprocess.PIPE, text=True,
                                env=env) for _ in range(processes)]
    outputs = [p.communicate()[0] for p in running]
    if any(p.returncode for p in running):
        raise SystemExit(f"a probe failed (exit codes {[p.returncode for p in running]}): {python} needs torch and "
                         "torchvision (make setup)")
    return [float(out.split()[-1]) for out in outputs]


if __name__ == "__main__":
    if sys.argv[1:2] == ["probe"] and len(sys.argv) <= 3:
        here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".venv", "bin", "python")
        medians = probe(sys.argv[2] if len(sys.argv) == 3 else here)
        print("resnet18, batch 1, one thread, two processes at once: " + " / ".join(f"{m:.1f}" for m in medians)
              + f" ms (the median of {PROBE_CALLS} calls each)")
    elif len(sys.argv) == 3 and sys.argv[1] == "record":
        record(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "report":
        report(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
