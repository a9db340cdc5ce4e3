"""``PhaseClock``: the training loop's profiling hook, doing nothing by default.

The loop in :mod:`sampan.hapi.loop` calls :meth:`PhaseClock.cut` where one phase of a step ends
and the next begins (``callbacks`` → ``h2d`` → ``forward`` → ``backward`` → ``optimizer`` →
``other`` → ``callbacks``), :meth:`PhaseClock.step_end` when a step is over (the ``data`` phase,
waiting for the next batch, begins) and :meth:`PhaseClock.pause` when the epoch's steps are
over. The base class does nothing, so a fit without a profiler pays a few empty method calls per
step; :class:`sampan.profiler.StepTimer` overrides the hooks to time each phase exactly.

Example:
    >>> from sampan.profiler import PhaseClock
    >>> clock = PhaseClock()
    >>> clock.cut("forward"); clock.step_end(); clock.pause()
"""
from __future__ import annotations

PHASES = ("data", "h2d", "forward", "backward", "optimizer", "other", "callbacks")


class PhaseClock:
    """The do-nothing profiling hook of the training loop."""

    def cut(self, phase: str) -> None:
        """The phase ``phase`` (one of :data:`PHASES`) starts now; the current one ends."""

    def step_end(self) -> None:
        """A training step is over; waiting for the next batch (``data``) starts now."""

    def pause(self) -> None:
        """No step is running (the epoch's batches are over); nothing is timed until the next ``cut``."""


NO_CLOCK = PhaseClock()
