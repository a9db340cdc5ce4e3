"""``StepTimer``: where a ``Model.fit`` step's time goes: data wait, host-to-device copy, forward, backward,
optimizer, the loop's own bookkeeping and callbacks. Headless; ``sampan_widgets.ProfilerView`` draws it.

The training loop cuts the phases itself: ``StepTimer`` is a :class:`~sampan.profiler.phases.PhaseClock`, the
loop's profiling hook (do-nothing by default), and ``fit`` hands it the hook when it is among the callbacks.
Nothing is patched or hooked. On CUDA the timer synchronizes at each cut (``sync``), so GPU work lands in the
phase that queued it.
"""
from __future__ import annotations

import statistics
import time
from typing import Any

import torch

from sampan.callbacks.base import Callback
from sampan.profiler.phases import PHASES, PhaseClock

_COMPUTE = ("forward", "backward", "optimizer")
_INPUT = ("data", "h2d")
_LOOP = ("other", "callbacks")
_DESCRIPTIONS = {
    "data": "waiting for the next batch from the data loader",
    "h2d": "splitting the batch and copying it to the device",
    "forward": "the network's forward pass and the loss",
    "backward": "the backward pass",
    "optimizer": "gradient clipping (AMP: unscaling) and optimizer.step()",
    "other": "zero_grad, loss.item(), metrics and logs",
    "callbacks": "callbacks' on_train_batch_begin/end",
}


class StepTimer(Callback, PhaseClock):
    """Times each training step's phases. Add it to ``fit``'s callbacks, then read :meth:`summary`.

    Args:
        sync: synchronize CUDA at each cut; None means "when the model is on CUDA".
        skip: first steps left out of :meth:`summary` (warm-up, first-batch checks).
        record_functions: mark each phase with ``torch.profiler.record_function("sampan::<phase>")`` when a
            torch profiler is running, so the phases appear in the chrome trace.

    Example:
        >>> from sampan.profiler import StepTimer
        >>> timer = StepTimer()
        >>> # model.fit(train, callbacks=[timer], num_iters=20); timer.summary()["share"]["forward"]
    """

    def __init__(self, *, sync: bool | None = None, skip: int = 1, record_functions: bool = True) -> None:
        super().__init__()
        self.sync, self.skip, self.record_functions = sync, skip, record_functions
        self.records: list[dict] = []
        self._active = False
        self._phase: str | None = None
        self._since = 0.0
        self._current: dict[str, float] = {}
        self._range: Any = None
        self._sync_now = False

    # ---------------------------------------------------------------- the loop's hook (PhaseClock)
    def _now(self) -> float:
        if self._sync_now:
            torch.cuda.synchronize()
        return time.perf_counter()

    def _close(self) -> float:
        now = self._now()
        if self._phase is not None:
            self._current[self._phase] = self._current.get(self._phase, 0.0) + (now - self._since) * 1000.0
        return now

    def cut(self, phase: str) -> None:
        if self._active:
            self._phase, self._since = phase, self._close()
            self._enter(phase)

    def step_end(self) -> None:
        if not self._active:
            return
        now = self._close()
        if self._current:
            rec = {p: self._current.get(p, 0.0) for p in PHASES}
            rec["total"] = sum(rec.values())
            self.records.append(rec)
        self._current = {}
        self._phase, self._since = "data", now
        self._enter("data")

    def pause(self) -> None:
        self._phase, self._current = None, {}
        self._enter(None)

    def _enter(self, phase: str | None) -> None:
        if self._range is not None:
            self._range.__exit__(None, None, None)
            self._range = None
        if phase is not None and self.record_functions and torch.autograd.profiler._is_profiler_enabled:
            self._range = torch.profiler.record_function(f"sampan::{phase}")
            self._range.__enter__()

    # ---------------------------------------------------------------- callback hooks
    def on_train_begin(self, logs=None):
        device = getattr(self.model, "device", None)
        on_cuda = device is not None and torch.device(device).type == "cuda"
        self._sync_now = on_cuda if self.sync is None else bool(self.sync and torch.cuda.is_available())
        self._active = True

    def on_train_end(self, logs=None):
        self.pause()
        self._active = False

    def on_exception(self, exception):
        self.on_train_end()

    # ---------------------------------------------------------------- results
    def summary(self) -> dict:
        """Median milliseconds per phase over the recorded steps (after ``skip``), each phase's share of the
        step, and fit's overhead against the compute it wraps.

        Returns:
            ``{"steps", "ms": {phase: ms, "total": ms}, "share": {phase: fraction}, "compute_ms", "input_ms",
            "loop_ms", "loop_overhead"}`` where ``loop_overhead = loop_ms / compute_ms`` (the loop's own
            bookkeeping and callbacks per unit of forward + backward + optimizer time).
        """
        rows = self.records[self.skip:] or self.records
        if not rows:
            return {"steps": 0, "ms": {}, "share": {}, "compute_ms": 0.0, "input_ms": 0.0, "loop_ms": 0.0,
                    "loop_overhead": float("nan")}
        ms = {p: statistics.median(r[p] for r in rows) for p in PHASES}
        total = sum(ms.values()) or 1e-12
        compute, inputs, loop = (sum(ms[p] for p in group) for group in (_COMPUTE, _INPUT, _LOOP))
        return {"steps": len(rows), "ms": {**ms, "total": total}, "share": {p: ms[p] / total for p in PHASES},
                "compute_ms": compute, "input_ms": inputs, "loop_ms": loop,
                "loop_overhead": loop / compute if compute > 0 else float("nan")}

    def table(self) -> str:
        """The summary as a Markdown table, in the learner's language (:mod:`sampan.utils.i18n`; the phases keep
        their names, which are the keys of :meth:`summary`)."""
        from sampan.utils.i18n import tr

        s = self.summary()
        lines = ["| " + " | ".join(tr(word) for word in ("phase", "median ms", "share", "what")) + " |",
                 "|---|---|---|---|"]
        for p in PHASES:
            lines.append(f"| {p} | {s['ms'].get(p, 0.0):.3f} | {s['share'].get(p, 0.0):.1%} | "
                         f"{tr(_DESCRIPTIONS[p])} |")
        lines.append(f"| **{tr('step')}** | {s['ms'].get('total', 0.0):.3f} | 100% | |")
        lines.append("\n" + tr("fit's loop overhead: {loop} ms per step = {share} of the {compute} ms of compute it "
                               "wraps; input (data + h2d): {input} ms.", loop=f"{s['loop_ms']:.3f}",
                               share=f"{s['loop_overhead']:.1%}", compute=f"{s['compute_ms']:.3f}",
                               input=f"{s['input_ms']:.3f}"))
        return "\n".join(lines)
