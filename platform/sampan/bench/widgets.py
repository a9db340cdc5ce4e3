"""``sampan bench widgets``: a fit with and without ``ResourceMonitor`` (2 Hz) and ``LiveCurves``.

Two figures per run: the wall-clock overhead (median fit time with the widgets against without, runs
interleaved; noisy on a busy machine) and the accounted cost (time spent inside the widgets' hooks and the
sampler's samples, as a share of the fit; steady). The widgets' comms serialize every message to JSON as a
kernel would, but send nothing. This suite imports ``sampan_widgets`` (ipywidgets) inside ``run`` only;
``import sampan`` stays free of Jupyter.
"""
from __future__ import annotations

import functools
import json
import statistics
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
    """Adds up the time spent in wrapped callables."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, obj: Any, name: str) -> None:
        fn = getattr(obj, name)

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        setattr(obj, name, timed)


def _fit(epochs: int, with_widgets: bool, figures: dict) -> float:
    from sampan_widgets import LiveCurves, ResourceMonitor

    model, train = _setup()
    callbacks, meter, live, monitor = [], _Meter(), None, None
    if with_widgets:
        live, monitor = LiveCurves(), ResourceMonitor(interval=0.5)
        for hook in ("on_train_batch_end", "on_epoch_end", "on_train_end"):
            meter.wrap(live, hook)
        for hook in ("on_train_begin", "on_train_batch_end", "on_train_end"):
            meter.wrap(monitor, hook)
        meter.wrap(monitor.sampler, "sample_now")
        callbacks = [live, monitor]
    start = time.perf_counter()
    model.fit(train, batch_size=32, epochs=epochs, verbose=0, callbacks=callbacks)
    elapsed = time.perf_counter() - start
    if with_widgets:
        figures.setdefault("accounted", []).append(meter.seconds / elapsed)
        figures.setdefault("redraws_per_s", []).append(live.redraws / elapsed)
        figures.setdefault("samples_per_s", []).append(len(monitor.samples) / elapsed)
        figures["steps"] = model.global_step
        monitor.close()
        live.close()
    return elapsed


def run(quick: bool = False) -> dict:
    """Measures and prints the table; returns the figures."""
    _json_comms()
    epochs, repeat = (2, 2) if quick else (4, 5)
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
        "redraws_per_s": statistics.median(extra["redraws_per_s"]),
        "samples_per_s": statistics.median(extra["samples_per_s"]),
        "repeat": repeat,
    }
    print_table(f"widgets: fit on digits (small CNN, batch 32, {steps} steps, median of {repeat}, interleaved)",
                [{"run": "fit", "ms/step": result["step_ms_plain"], "overhead": "–"},
                 {"run": "fit + LiveCurves + ResourceMonitor(0.5 s)", "ms/step": result["step_ms_widgets"],
                  "overhead": f"{result['wall_overhead']:+.2%} wall, {result['accounted_overhead']:.2%} accounted"}],
                ["run", "ms/step", "overhead"])
    print(f"\nLiveCurves redraws {result['redraws_per_s']:.1f}/s, ResourceMonitor samples "
          f"{result['samples_per_s']:.1f}/s. Target: overhead <= 1% of step time.")
    return result
