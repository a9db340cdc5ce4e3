"""``sampan bench widgets``: a fit with and without ``ResourceMonitor`` (2 Hz) and ``LiveCurves``.

Two figures per run: the wall-clock overhead (median fit time with the widgets against without, runs
interleaved; noisy on a busy machine) and the accounted per-step cost (CPU time spent inside the widgets'
per-step hooks and the sampler thread's samples, as a share of the process's CPU time during the fit;
steady even on a loaded machine). The once-per-fit cost
(starting and stopping the sampler thread, the final redraw) is reported apart, in milliseconds. The widgets' comms serialize every message to JSON as a
kernel would, but send nothing. It lives on the widgets side, so that nothing under ``platform/`` imports
``sampan_widgets``; ``sampan bench widgets`` finds it by name (``sampan.bench.SUITE_MODULES``).
"""
from __future__ import annotations

import functools
import json
import statistics
import threading
import time
from typing import Any

import torch

from sampan.bench._timing import print_table


def _json_comms() -> None:
    """Widget comms that serialize like a kernel's and send nothing (outside a kernel there is no frontend)."""
    import comm

    class JsonComm(comm.base_comm.BaseComm):
        def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
            json.dumps(data, default=str)

    comm.create_comm = lambda *a, **k: JsonComm(*a, **k)


def _setup(seed: int = 0):
    import sampan
    from sampan.data import load_dataset

    torch.manual_seed(seed)
    train = load_dataset("digits", "train")
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(16 * 8 * 8, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    model = sampan.Model(net)
    model.prepare(torch.optim.Adam(net.parameters(), lr=1e-3), torch.nn.CrossEntropyLoss(),
                  metrics=sampan.metric.Accuracy())
    return model, train


class _Meter:
    """Adds up the CPU time (``time.thread_time``: what the calling thread consumed, not time it spent waiting
    for a core or the GIL) of wrapped callables, by kind; ``thread`` limits a kind to calls made from the thread
    of that name (the sampler's own samples, not those its start/stop take in the training thread)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def wrap(self, obj: Any, name: str, kind: str, thread: str | None = None) -> None:
        fn = getattr(obj, name)
        self.seconds.setdefault(kind, 0.0)

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            if thread is not None and threading.current_thread().name != thread:
                return fn(*args, **kwargs)
            start = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[kind] += time.thread_time() - start

        setattr(obj, name, timed)


def _fit(epochs: int, with_widgets: bool, figures: dict) -> float:
    from sampan_widgets import LiveCurves, ResourceMonitor  # lazily: importing the suite stays cheap

    model, train = _setup()
    callbacks, meter, live, monitor = [], _Meter(), None, None
    if with_widgets:
        live, monitor = LiveCurves(), ResourceMonitor(interval=0.5)
        for hook in ("on_train_batch_end", "on_epoch_end"):
            meter.wrap(live, hook, "live")
        meter.wrap(monitor, "on_train_batch_end", "monitor")
        meter.wrap(monitor.sampler, "sample_now", "sampler", thread="sampan-resource-sampler")
        meter.wrap(live, "on_train_end", "fixed")
        for hook in ("on_train_begin", "on_train_end"):
            meter.wrap(monitor, hook, "fixed")
        callbacks = [live, monitor]
    start, cpu = time.perf_counter(), time.process_time()
    model.fit(train, batch_size=32, epochs=epochs, verbose=0, callbacks=callbacks)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    if with_widgets:
        per_step = meter.seconds["live"] + meter.seconds["monitor"] + meter.seconds["sampler"]
        figures.setdefault("accounted", []).append(per_step / cpu)
        for kind in ("live", "monitor", "sampler"):
            figures.setdefault(f"share_{kind}", []).append(meter.seconds[kind] / cpu)
        figures.setdefault("cpu_per_wall", []).append(cpu / elapsed)
        figures.setdefault("fixed_ms", []).append(1000 * meter.seconds["fixed"])
        figures.setdefault("redraws_per_s", []).append(live.redraws / elapsed)
        figures.setdefault("samples_per_s", []).append(len(monitor.samples) / elapsed)
        figures["steps"] = model.global_step
        monitor.close()
        live.close()
    return elapsed


def run(quick: bool = False) -> dict:
    """Measures and prints the table; returns the figures."""
    _json_comms()
    epochs, repeat = (2, 2) if quick else (6, 5)
    _fit(1, True, {})  # warm-up: imports, allocator, first-batch checks
    times: dict[str, list[float]] = {"plain": [], "widgets": []}
    extra: dict = {}
    for _ in range(repeat):
        times["plain"].append(_fit(epochs, False, extra))
        times["widgets"].append(_fit(epochs, True, extra))
    plain, widgets = statistics.median(times["plain"]), statistics.median(times["widgets"])
    steps = extra["steps"]
    result = {
        "steps": steps,
        "step_ms_plain": 1000 * plain / steps,
        "step_ms_widgets": 1000 * widgets / steps,
        "wall_overhead": widgets / plain - 1,
        "accounted_overhead": statistics.median(extra["accounted"]),
        "fixed_ms": statistics.median(extra["fixed_ms"]),
        "share_live": statistics.median(extra["share_live"]),
        "share_monitor_hooks": statistics.median(extra["share_monitor"]),
        "share_sampler": statistics.median(extra["share_sampler"]),
        "cpu_per_wall": statistics.median(extra["cpu_per_wall"]),
        "redraws_per_s": statistics.median(extra["redraws_per_s"]),
        "samples_per_s": statistics.median(extra["samples_per_s"]),
        "repeat": repeat,
    }
    print_table(f"widgets: fit on digits (small CNN, batch 32, {steps} steps, median of {repeat}, interleaved)",
                [{"run": "fit", "ms/step": result["step_ms_plain"], "overhead": "–"},
                 {"run": "fit + LiveCurves + ResourceMonitor(0.5 s)", "ms/step": result["step_ms_widgets"],
                  "overhead": f"{result['wall_overhead']:+.2%} wall, {result['accounted_overhead']:.2%} accounted"}],
                ["run", "ms/step", "overhead"])
    print(f"\nAccounted: CPU time inside LiveCurves' and ResourceMonitor's per-step hooks plus the sampler thread's "
          f"samples, as a share of the process's CPU time in the fit. Once per fit (start and stop of the sampler, final redraw): "
          f"{result['fixed_ms']:.1f} ms. LiveCurves redraws {result['redraws_per_s']:.1f}/s, ResourceMonitor samples "
          f"{result['samples_per_s']:.1f}/s. Accounted by part: LiveCurves hooks {result['share_live']:.2%}, "
          f"ResourceMonitor hooks {result['share_monitor_hooks']:.2%}, sampler thread {result['share_sampler']:.2%} "
          f"(process CPU / wall during the fit: {result['cpu_per_wall']:.2f}). Target: overhead <= 1% of step time.")
    return result
