"""``sampan bench widgets``: a fit with and without ``ResourceMonitor`` (default: 1 Hz) and ``LiveCurves``.

The fits run in pairs, one without and one with the widgets, in alternating order (ABBA), so that a change
of load on a shared machine falls on both arms alike. The wall-clock figures are the median over the pairs
of each pair's ratio, with the quartiles as the spread: per step (the steady state, from the first training
step's end to the last one's: the goal's figure) and per whole ``fit`` (the steady state plus the
once-per-fit start and stop of the sampler thread and the final redraw). The accounted figure is the CPU
time spent inside the widgets' per-step hooks and the sampler thread's samples, as a share of the process's
CPU time during the fit (steady even on a loaded machine). The redraw rate is counted while training (the
final redraw at the train end apart: intervals between redraws over the steady time), with the shortest
interval between two redraws. The widgets' comms
serialize every message to JSON as a kernel would, but send nothing. It lives on the widgets side, so that nothing under ``platform/`` imports
``sampan_widgets``; ``sampan bench widgets`` finds it by name (``sampan.bench.SUITE_MODULES``).
"""
from __future__ import annotations

import functools
import json
import statistics
import threading
import time
import warnings
from typing import Any

import numpy as np
import torch

from sampan.bench._timing import print_table
from sampan.callbacks.base import Callback


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


class _StepClock(Callback):
    """Wall and process CPU time of the steady state: from the first training step's end to the last one's."""

    def __init__(self) -> None:
        super().__init__()
        self.first = self.last = (0.0, 0.0)
        self.steps = 0

    def on_train_batch_end(self, step, logs=None):
        self.last = (time.perf_counter(), time.process_time())
        if not self.steps:
            self.first = self.last
        self.steps += 1

    @property
    def per_step(self) -> float:
        return (self.last[0] - self.first[0]) / (self.steps - 1)

    @property
    def cpu_per_step(self) -> float:
        return (self.last[1] - self.first[1]) / (self.steps - 1)


def _record_redraws(live: Any, log: list[tuple[float, bool]]) -> None:
    """Logs ``(time, at_train_end)`` for each redraw of ``live``."""
    redraw, train_end, ending = live.redraw, live.on_train_end, [False]

    def recorded():
        log.append((time.monotonic(), ending[0]))
        redraw()

    def on_train_end(logs=None):
        ending[0] = True
        train_end(logs)

    live.redraw, live.on_train_end = recorded, on_train_end


def _fit(epochs: int, with_widgets: bool, figures: dict, account: bool = False) -> tuple[float, float, float]:
    """One fit; returns its wall time and its steady wall and process CPU time per step, in seconds. With
    ``account``, the widgets' hooks are timed one by one (which costs a little: not in the timed pairs)."""
    from sampan_widgets import LiveCurves, ResourceMonitor  # lazily: importing the suite stays cheap

    model, train = _setup()
    clock, meter, live, monitor, redraws = _StepClock(), _Meter(), None, None, []
    callbacks: list = [clock]
    if with_widgets:
        live, monitor = LiveCurves(), ResourceMonitor()  # the defaults, as a learner uses them
        _record_redraws(live, redraws)  # a few calls a second: no cost to speak of
        if account:
            for hook in ("on_train_batch_end", "on_epoch_end"):
                meter.wrap(live, hook, "live")
            meter.wrap(monitor, "on_train_batch_end", "monitor")
            meter.wrap(monitor.sampler, "sample_now", "sampler", thread="sampan-resource-sampler")
            meter.wrap(live, "on_train_end", "fixed")
            for hook in ("on_train_begin", "on_train_end"):
                meter.wrap(monitor, hook, "fixed")
        callbacks = [live, monitor, clock]
    start, cpu = time.perf_counter(), time.process_time()
    model.fit(train, batch_size=32, epochs=epochs, verbose=0, callbacks=callbacks)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    if account:
        per_step = meter.seconds["live"] + meter.seconds["monitor"] + meter.seconds["sampler"]
        figures.setdefault("accounted", []).append(per_step / cpu)
        for kind in ("live", "monitor", "sampler"):
            figures.setdefault(f"share_{kind}", []).append(meter.seconds[kind] / cpu)
        figures.setdefault("fixed_ms", []).append(1000 * meter.seconds["fixed"])
    if with_widgets:
        figures.setdefault("cpu_per_wall", []).append(cpu / elapsed)
        training = [t for t, at_end in redraws if not at_end]
        span = clock.per_step * (clock.steps - 1)
        figures.setdefault("redraws_per_s", []).append((len(training) - 1) / span)  # intervals over the time
        if len(training) > 1:
            figures.setdefault("min_redraw_interval", []).append(float(np.diff(training).min()))
        figures.setdefault("samples_per_s", []).append(len(monitor.samples) / elapsed)
        figures["steps"] = model.global_step
        monitor.close()
        live.close()
    return elapsed, clock.per_step, clock.cpu_per_step


def _spread(ratios: list[float]) -> tuple[float, float, float]:
    """Median and quartiles of ``ratios - 1``."""
    q1, median, q3 = np.percentile(np.asarray(ratios) - 1, [25, 50, 75])
    return float(median), float(q1), float(q3)


def run(quick: bool = False) -> dict:
    """Measures and prints the table; returns the figures."""
    from sampan.monitor import MemoryLeakWarning

    _json_comms()
    # fits of a few seconds: long enough that once-per-fit costs weigh as little as in a real training
    epochs, pairs, accounting = (4, 4, 1) if quick else (20, 12, 3)
    fits: dict[bool, list[tuple[float, float, float]]] = {False: [], True: []}
    extra: dict = {}
    with warnings.catch_warnings():  # the leak check runs (and costs) as usual; its warnings would only clutter
        warnings.simplefilter("ignore", MemoryLeakWarning)  # the table: the process's RSS settles over the fits
        _fit(1, True, {}, account=True)  # warm-up: imports, allocator, first-batch checks
        for i in range(pairs):
            for with_widgets in ((False, True) if i % 2 == 0 else (True, False)):  # ABBA: drifts hit both arms
                fits[with_widgets].append(_fit(epochs, with_widgets, extra))
        for _ in range(accounting):  # apart from the pairs: timing each hook call costs a little
            _fit(epochs, True, extra, account=True)
    step = _spread([w[1] / p[1] for p, w in zip(fits[False], fits[True])])
    whole = _spread([w[0] / p[0] for p, w in zip(fits[False], fits[True])])
    cpu = _spread([w[2] / p[2] for p, w in zip(fits[False], fits[True])])
    steps = extra["steps"]
    result = {
        "steps": steps,
        "pairs": pairs,
        "step_ms_plain": 1000 * statistics.median(p[1] for p in fits[False]),
        "step_ms_widgets": 1000 * statistics.median(w[1] for w in fits[True]),
        "wall_overhead": step[0],
        "wall_overhead_q1": step[1],
        "wall_overhead_q3": step[2],
        "fit_wall_overhead": whole[0],
        "fit_wall_overhead_q1": whole[1],
        "fit_wall_overhead_q3": whole[2],
        "cpu_overhead": cpu[0],
        "cpu_overhead_q1": cpu[1],
        "cpu_overhead_q3": cpu[2],
        "accounted_overhead": statistics.median(extra["accounted"]),
        "accounting_fits": accounting,
        "fixed_ms": statistics.median(extra["fixed_ms"]),
        "share_live": statistics.median(extra["share_live"]),
        "share_monitor_hooks": statistics.median(extra["share_monitor"]),
        "share_sampler": statistics.median(extra["share_sampler"]),
        "cpu_per_wall": statistics.median(extra["cpu_per_wall"]),
        "pairs_cpu_per_wall": [round(x, 3) for x in extra["cpu_per_wall"][:pairs]],
        "redraws_per_s": max(extra["redraws_per_s"]),
        "min_redraw_interval_s": min(extra.get("min_redraw_interval", [float("nan")])),
        "samples_per_s": statistics.median(extra["samples_per_s"]),
    }
    print_table(f"widgets: fit on digits (small CNN, batch 32, {steps} steps a fit, {pairs} pairs of fits without and "
                f"with the widgets, ABBA order; overhead = median of the pairs' ratios [quartiles])",
                [{"run": "fit", "ms/step": result["step_ms_plain"], "wall per step": "–", "wall per fit": "–",
                  "CPU per step": "–"},
                 {"run": "fit + LiveCurves + ResourceMonitor (1 s)", "ms/step": result["step_ms_widgets"],
                  "wall per step": f"{step[0]:+.2%} [{step[1]:+.2%}, {step[2]:+.2%}]",
                  "wall per fit": f"{whole[0]:+.2%} [{whole[1]:+.2%}, {whole[2]:+.2%}]",
                  "CPU per step": f"{cpu[0]:+.2%} [{cpu[1]:+.2%}, {cpu[2]:+.2%}]"}],
                ["run", "ms/step", "wall per step", "wall per fit", "CPU per step"])
    print(f"\nCPU per step: the process's CPU time (all threads) per steady step, the load-robust figure; the wall "
          f"figures hold only when the machine is idle (process CPU / wall near 1). Accounted CPU: {result['accounted_overhead']:.2%} of the process's CPU time in the fit (LiveCurves hooks "
          f"{result['share_live']:.2%}, ResourceMonitor hooks {result['share_monitor_hooks']:.2%}, sampler thread "
          f"{result['share_sampler']:.2%}; median of {accounting} fits apart from the pairs; process CPU / wall: {result['cpu_per_wall']:.2f}, "
          f"below 1 when the machine is shared). Once per fit (start and stop of the sampler, final redraw): {result['fixed_ms']:.1f} ms CPU. "
          f"LiveCurves redraws while training: at most {result['redraws_per_s']:.1f}/s over a fit, shortest interval "
          f"{1000 * result['min_redraw_interval_s']:.0f} ms (promised: <= 4/s, >= 250 ms). ResourceMonitor samples "
          f"{result['samples_per_s']:.1f}/s. Goal: wall per step <= +1%.")
    return result
