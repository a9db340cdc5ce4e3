"""``profile_fit`` and ``profile_steps``: run a profiler and a step timer over N steps, get one report."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from sampan.errors import bad_argument
from sampan.profiler.breakdown import StepTimer
from sampan.profiler.profiler import Profiler


@dataclass
class ProfileReport:
    """What one profiling run found: ``profiler`` (top operators, memory, trace), ``timer`` (the per-step
    phase breakdown of a ``fit``; None for a code block) and ``steps``, the number of steps recorded (warm-up
    steps not counted)."""

    profiler: Profiler
    timer: StepTimer | None = None
    steps: int = 0
    extra: dict = field(default_factory=dict)

    def top_ops(self, sorted_by: str = "cpu_total", row_limit: int = 15) -> list[dict]:
        return self.profiler.summary(sorted_by=sorted_by, row_limit=row_limit, print_table=False)  # type: ignore[arg-type]

    def breakdown(self) -> dict:
        return self.timer.summary() if self.timer is not None else {}

    def memory_timeline(self) -> list[dict]:
        return self.profiler.memory_timeline()

    def export_chrome_trace(self, path: str | os.PathLike) -> Path:
        return self.profiler.export(path)


def _check_steps(steps: Any, warmup: Any) -> None:
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(bad_argument("steps", steps, "an int >= 1 (steps to record)"))
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(bad_argument("warmup", warmup, "an int >= 0 (steps run before recording)"))


def profile_fit(model: Any, train_data: Any, *, steps: int = 10, warmup: int = 2, record_shapes: bool = True,
                profile_memory: bool = True, callbacks: list | None = None, **fit_kwargs: Any) -> ProfileReport:
    """Runs ``model.fit`` for ``warmup + steps`` steps (``num_iters``: into further epochs when one is shorter)
    under a :class:`Profiler` and a :class:`StepTimer`; the profiler records the last ``steps``.

    Example:
        >>> import torch
        >>> import sampan
        >>> from sampan.profiler import profile_fit
        >>> net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
        >>> model = sampan.Model(net)
        >>> model.prepare(torch.optim.SGD(net.parameters(), lr=0.1), torch.nn.CrossEntropyLoss())
        Model(Sequential, prepared=True, epoch=0)
        >>> data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
        >>> report = profile_fit(model, data, steps=3, batch_size=8)
        >>> report.steps, sorted(report.breakdown()["share"])
        (3, ['backward', 'callbacks', 'data', 'forward', 'h2d', 'optimizer', 'other'])
    """
    _check_steps(steps, warmup)
    prof = Profiler(scheduler=(warmup, warmup + steps), record_shapes=record_shapes, profile_memory=profile_memory)
    timer = StepTimer(skip=warmup)
    fit_kwargs.setdefault("verbose", 0)
    fit_kwargs.setdefault("epochs", getattr(model, "epoch", 0) + 1)
    model.fit(train_data, callbacks=[*(callbacks or []), timer, prof.callback()], num_iters=warmup + steps,
              **fit_kwargs)
    return ProfileReport(prof, timer, steps=max(len(timer.records) - warmup, 0))


def profile_steps(fn: Callable[[], Any], *, steps: int = 10, warmup: int = 2, record_shapes: bool = True,
                  profile_memory: bool = True) -> ProfileReport:
    """Profiles a code block: calls ``fn()`` ``warmup + steps`` times, one profiler step each.

    Example:
        >>> import torch
        >>> from sampan.profiler import profile_steps
        >>> report = profile_steps(lambda: torch.randn(128, 128) @ torch.randn(128, 128), steps=3)
    """
    _check_steps(steps, warmup)
    prof = Profiler(scheduler=(warmup, warmup + steps), record_shapes=record_shapes, profile_memory=profile_memory)
    with prof:
        for _ in range(warmup + steps):
            fn()
            prof.step()
    return ProfileReport(prof, None, steps=steps)
