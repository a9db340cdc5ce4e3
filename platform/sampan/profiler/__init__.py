"""Profiling on ``torch.profiler`` (``paddle.profiler``): ``Profiler`` with a schedule, top operators, memory
and chrome traces; ``StepTimer``, the per-step breakdown of ``Model.fit`` (data wait, host-to-device copy,
forward, backward, optimizer, loop bookkeeping, callbacks); ``profile_fit`` / ``profile_steps`` run both.

Example:
    >>> import torch
    >>> from sampan.profiler import Profiler
    >>> with Profiler(scheduler=(1, 3)) as prof:
    ...     for _ in range(3):
    ...         _ = torch.ones(8, 8) @ torch.ones(8, 8)
    ...         prof.step()
    >>> any(r["name"] == "aten::mm" for r in prof.summary(print_table=False, row_limit=0))
    True
"""
from sampan.profiler.breakdown import StepTimer
from sampan.profiler.phases import PHASES, PhaseClock
from sampan.profiler.profiler import Profiler, ProfilerCallback, export_chrome_tracing, make_scheduler
from sampan.profiler.report import ProfileReport, profile_fit, profile_steps

__all__ = [
    "PHASES",
    "PhaseClock",
    "ProfileReport",
    "Profiler",
    "ProfilerCallback",
    "StepTimer",
    "export_chrome_tracing",
    "make_scheduler",
    "profile_fit",
    "profile_steps",
]
