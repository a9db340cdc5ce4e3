"""``StepTimer``: where a ``Model.fit`` step's time goes: data wait, host-to-device copy, forward, backward,
optimizer, the loop's own bookkeeping and callbacks. Headless; ``sampan_widgets.ProfilerView`` draws it.

The phases are cut by hooks, without changing the loop: ``Callback`` hooks around each batch, forward pre/post
hooks on the network and ``Optimizer.register_step_pre_hook`` / ``register_step_post_hook``. Callback time is
measured by timing ``CallbackList.call`` for the batch hooks during the run. On CUDA the timer synchronizes at
each cut (``sync``), so GPU work lands in the phase that queued it.
"""
from __future__ import annotations

import statistics
import time
from typing import Any

import torch

from sampan.callbacks.base import Callback

PHASES = ("data", "h2d", "forward", "backward", "optimizer", "other", "callbacks")
_COMPUTE = ("forward", "backward", "optimizer")
_INPUT = ("data", "h2d")
_LOOP = ("other", "callbacks")
_DESCRIPTIONS = {
    "data": "waiting for the next batch from the data loader",
    "h2d": "splitting the batch and copying it to the device",
    "forward": "the network's forward pass",
    "backward": "loss and backward pass (and gradient clipping)",
    "optimizer": "optimizer.step()",
    "other": "zero_grad, loss.item(), metrics and logs",
    "callbacks": "callbacks' on_train_batch_begin/end",
}


class StepTimer(Callback):
    """Times each training step's phases. Add it to ``fit``'s callbacks, then read :meth:`summary`.

    Args:
        sync: synchronize CUDA at each cut; None means "when the model is on CUDA".
        skip: first steps left out of :meth:`summary` (warm-up, first-batch checks).
        record_functions: mark each phase with ``torch.profiler.record_function("sampan::<phase>")`` when a
            torch profiler is running, so the phases appear in the chrome trace.

    Example:
        >>> timer = StepTimer()
        >>> # model.fit(train, callbacks=[timer], num_iters=20); timer.summary()["share"]["forward"]
    """

    def __init__(self, *, sync: bool | None = None, skip: int = 1, record_functions: bool = True) -> None:
        super().__init__()
        self.sync, self.skip, self.record_functions = sync, skip, record_functions
        self.records: list[dict] = []
        self._handles: list[Any] = []
        self._restore: tuple[Any, Any] | None = None
        self._marks: dict[str, float] = {}
        self._in_step = False
        self._last_end = 0.0
        self._range: Any = None
        self._sync_now = False

    # ---------------------------------------------------------------- clock
    def _now(self) -> float:
        if self._sync_now:
            torch.cuda.synchronize()
        return time.perf_counter()

    def _mark(self, name: str, phase: str | None = None, first: bool = True) -> None:
        if not self._in_step or (first and name in self._marks):
            return
        self._marks[name] = self._now()
        if phase is not None:
            self._enter(phase)

    def _enter(self, phase: str | None) -> None:
        if self._range is not None:
            self._range.__exit__(None, None, None)
            self._range = None
        if phase is not None and self.record_functions and torch.autograd.profiler._is_profiler_enabled:
            self._range = torch.profiler.record_function(f"sampan::{phase}")
            self._range.__enter__()

    # ---------------------------------------------------------------- hooks
    def on_train_begin(self, logs=None):
        model = self.model
        device = getattr(model, "device", None)
        on_cuda = device is not None and torch.device(device).type == "cuda"
        self._sync_now = on_cuda if self.sync is None else bool(self.sync and torch.cuda.is_available())
        net = getattr(model, "network", None)
        if isinstance(net, torch.nn.Module):
            self._handles.append(net.register_forward_pre_hook(lambda *_: self._mark("fwd0", "forward")))
            self._handles.append(net.register_forward_hook(lambda *_: self._mark("fwd1", "backward", first=False)))
        opt = getattr(model, "_optimizer", None)
        if opt is not None and hasattr(opt, "register_step_pre_hook"):
            self._handles.append(opt.register_step_pre_hook(lambda *_: self._mark("opt0", "optimizer")))
            self._handles.append(opt.register_step_post_hook(lambda *_: self._mark("opt1", "other")))
        self._wrap_callbacks(getattr(model, "_callbacks", None))
        self._last_end = time.perf_counter()

    def _wrap_callbacks(self, cbks: Any) -> None:
        if cbks is None or not hasattr(cbks, "call"):
            return
        original = cbks.call
        timer = self

        def timed_call(hook: str, *args: Any) -> None:
            if hook == "on_train_batch_begin":
                timer._batch_begin_enter()
                original(hook, *args)
                timer._marks["begin_exit"] = timer._now()
                timer._enter("h2d")
            elif hook == "on_train_batch_end":
                timer._marks["end_enter"] = timer._now()
                timer._enter("callbacks")
                original(hook, *args)
                timer._batch_end_exit()
            else:
                original(hook, *args)

        self._restore = (cbks, vars(cbks).get("call"))
        cbks.call = timed_call

    def _batch_begin_enter(self) -> None:
        self._marks = {"begin_enter": self._now()}
        self._in_step = True

    def _batch_end_exit(self) -> None:
        end = self._now()
        self._enter("data")
        self._in_step = False
        self.records.append(self._phases(self._marks, self._last_end, end))
        self._last_end = time.perf_counter()

    def on_epoch_begin(self, epoch, logs=None):
        self._last_end = time.perf_counter()
        self._enter("data")

    def on_train_end(self, logs=None):
        self._enter(None)
        for h in self._handles:
            h.remove()
        self._handles.clear()
        if self._restore is not None:
            cbks, own = self._restore
            if own is None:
                del cbks.call  # back to the class's method
            else:
                cbks.call = own
            self._restore = None

    # ---------------------------------------------------------------- results
    @staticmethod
    def _phases(m: dict, last_end: float, end: float) -> dict:
        b0, b1 = m["begin_enter"], m.get("begin_exit", m["begin_enter"])
        e0 = m.get("end_enter", end)
        f0 = m.get("fwd0", b1)
        f1 = m.get("fwd1", f0)
        o0 = m.get("opt0", e0)
        o1 = m.get("opt1", o0)
        ms = 1000.0
        rec = {"data": (b0 - last_end) * ms, "h2d": (f0 - b1) * ms, "forward": (f1 - f0) * ms,
               "backward": (o0 - f1) * ms, "optimizer": (o1 - o0) * ms, "other": (e0 - o1) * ms,
               "callbacks": ((b1 - b0) + (end - e0)) * ms}
        rec = {k: max(v, 0.0) for k, v in rec.items()}
        rec["total"] = sum(rec.values())
        return rec

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
        """The summary as a Markdown table."""
        s = self.summary()
        lines = ["| phase | median ms | share | what |", "|---|---|---|---|"]
        for p in PHASES:
            lines.append(f"| {p} | {s['ms'].get(p, 0.0):.3f} | {s['share'].get(p, 0.0):.1%} | {_DESCRIPTIONS[p]} |")
        lines.append(f"| **step** | {s['ms'].get('total', 0.0):.3f} | 100% | |")
        lines.append(f"\nfit's loop overhead: {s['loop_ms']:.3f} ms per step = {s['loop_overhead']:.1%} of the "
                     f"{s['compute_ms']:.3f} ms of compute it wraps; input (data + h2d): {s['input_ms']:.3f} ms.")
        return "\n".join(lines)
