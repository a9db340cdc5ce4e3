"""sampan.utils.timing (shared by the library and `sampan bench`) and the bench tables."""
from __future__ import annotations

import sys
import time

from sampan.bench._timing import print_table
from sampan.utils.timing import interleaved


def test_interleaved_shuffles_the_order_and_times_each_candidate():
    calls: list[str] = []

    def make(name: str, seconds: float):
        def fn():
            calls.append(name)
            time.sleep(seconds)
        return fn

    times = interleaved({"a": make("a", 0.0), "b": make("b", 0.004), "c": make("c", 0.0)}, repeat=12, warmup=1)
    assert calls[:3] == ["a", "b", "c"]  # warm-up
    rounds = [calls[3 + 3 * i: 6 + 3 * i] for i in range(12)]
    assert all(sorted(r) == ["a", "b", "c"] for r in rounds)  # every candidate once per round
    # nobody always follows the same one: "b" is preceded by different candidates across rounds
    predecessors = {r[r.index("b") - 1] for r in rounds if r.index("b") > 0}
    assert predecessors == {"a", "c"}, rounds
    assert times["b"] >= 0.004 > times["a"] and times["b"] >= 0.004 > times["c"]


def test_print_table_writes_markdown(capsys):
    print_table("demo", [{"model": "lenet", "ms": 0.123456}], ["model", "ms"])
    out = capsys.readouterr().out
    assert "### demo" in out and "| model | ms |" in out and "| lenet | 0.1235 |" in out


def test_once_cuda_is_in_use_each_timed_call_is_bracketed_by_a_synchronize(monkeypatch):
    """CUDA calls return when their kernels are queued: without a synchronize a GPU candidate is timed by its launch."""
    import types

    from sampan.utils import timing

    events = []
    cuda = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: True,
                                 synchronize=lambda: events.append("sync"))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    timing.interleaved({"a": lambda: events.append("a")}, repeat=2, warmup=0)
    timing.median_time(lambda: events.append("m"), repeat=1, warmup=0)
    assert events == ["sync", "a", "sync", "sync", "a", "sync", "sync", "m", "sync"]
    cuda.is_initialized = lambda: False  # CUDA never started here: nothing to wait for
    events.clear()
    timing.interleaved({"a": lambda: events.append("a")}, repeat=1, warmup=0)
    assert events == ["a"]
