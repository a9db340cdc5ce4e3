"""A set of metrics updated in chunks: batches are buffered and fed to torchmetrics at log steps.

torchmetrics' per-call overhead dominates small batches; feeding it every
``log_freq`` batches at once keeps ``fit`` close to a hand-written loop. The buffer
holds at most :data:`MAX_BUFFERED` batches (an evaluation set never sits whole in
device memory) and is fed early when a batch's shape differs from the buffered ones
(variable-length sequences, ``[N, T, C]``).

Under more than one process an evaluation gathers every rank's rows, batch by batch, for the metrics
that do not reduce their state across ranks themselves (a metric of your own), as ``paddle.Model``
does; ``sampan.metric``'s metrics (``Metric.syncs_across_ranks``) take their rank's rows alone.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch

from sampan.distributed.base import Strategy
from sampan.errors import bad_argument
from sampan.metric.base import Metric

MAX_BUFFERED = 16
"""Batches buffered before the metrics are fed, whatever ``log_freq``."""


def as_metrics(metrics: Any) -> list[Metric]:
    if metrics is None:
        return []
    items = metrics if isinstance(metrics, (list, tuple)) else [metrics]
    for m in items:
        if not isinstance(m, Metric):
            raise TypeError(bad_argument("metrics", metrics, "a sampan.metric.Metric or a list of them",
                                         "write metrics=sampan.metric.Accuracy()"))
    return list(items)


class _Chunks:
    """Batches buffered for some metrics, fed to them together: at :data:`MAX_BUFFERED` batches, when a batch's
    shape differs from the buffered ones (``torch.cat`` needs equal shapes beyond the batch dimension), or when
    read."""

    def __init__(self, metrics: Sequence[Metric] = ()):
        self.metrics = list(metrics)
        self.outputs: list[torch.Tensor] = []
        self.labels: list[torch.Tensor] = []
        self.fed = False  # rows went to the metrics in this run

    def add(self, out: torch.Tensor, lab: torch.Tensor) -> None:
        if not self.metrics:
            return
        if self.outputs and (out.shape[1:] != self.outputs[-1].shape[1:]
                             or lab.shape[1:] != self.labels[-1].shape[1:]):
            self.flush()
        self.outputs.append(out.detach())
        self.labels.append(lab.detach())
        if len(self.outputs) >= MAX_BUFFERED:
            self.flush()

    def flush(self) -> None:
        if self.outputs:
            out, lab = torch.cat(self.outputs), torch.cat(self.labels)
            self.outputs.clear()
            self.labels.clear()
            self.fed = True
            for m in self.metrics:
                m.feed(out, lab)


class MetricSet:
    """The metrics of one run (an epoch, an evaluation), fed in chunks.

    A batch without rows (the padding that ends a rank's share of a distributed evaluation, cut) is not fed,
    unless the run had no other: then the metrics receive it empty when read, so that a rank whose share was
    padding alone takes part in the reduction of the counts across ranks (``Accuracy``, torchmetrics).

    An evaluation under more than one process (:meth:`reset` given the strategy) gathers each batch's rows from
    every rank for the metrics whose ``syncs_across_ranks`` is False, so they see the whole data on every rank;
    every rank adds the same batches, so the ranks meet in the same ``all_gather`` calls.
    """

    def __init__(self, metrics: Sequence[Metric]):
        self.metrics = list(metrics)
        self._own = _Chunks(self.metrics)  # fed this process's rows
        self._everyone = _Chunks()  # fed every rank's rows
        self._strategy: Strategy | None = None
        self._empty: tuple[torch.Tensor, torch.Tensor] | None = None

    def __bool__(self) -> bool:
        return bool(self.metrics)

    def names(self) -> list[str]:
        return [n for m in self.metrics for n in m.names()]

    def reset(self, strategy: Strategy | None = None) -> None:
        """Starts a run. ``strategy``: an evaluation's; under more than one process its ``gather_rows`` brings
        every rank's rows to the metrics that do not sync across ranks themselves (as ``paddle.Model`` gathers
        them, and as those metrics sum every rank's counts, whatever the loader). None (training): each rank
        feeds its own rows."""
        gather = strategy is not None and strategy.world_size > 1
        self._own = _Chunks([m for m in self.metrics if not gather or m.syncs_across_ranks])
        self._everyone = _Chunks([m for m in self.metrics if gather and not m.syncs_across_ranks])
        self._strategy = strategy if self._everyone.metrics else None
        self._empty = None
        for m in self.metrics:
            m.reset()

    def add(self, outputs: Any, labels: Sequence[Any]) -> None:
        if self.metrics and labels:
            out, lab = outputs[0] if isinstance(outputs, (tuple, list)) else outputs, labels[0]
            if self._strategy is not None:  # every rank gets here once per batch, rows or not
                for everyones in self._strategy.gather_rows([out, lab]):
                    self._everyone.add(*everyones)
            if isinstance(lab, torch.Tensor) and lab.ndim and not len(lab):
                self._empty = (out.detach(), lab.detach())
                return
            self._own.add(out, lab)

    def results(self, scalars_only: bool = True) -> dict[str, Any]:
        self._own.flush()
        self._everyone.flush()
        if not self._own.fed and self._empty is not None:
            self._own.fed = True
            for m in self._own.metrics:
                m.feed(*self._empty)
        values: dict[str, Any] = {}
        for m in self.metrics:
            for name, value in m.results().items():
                if not scalars_only or isinstance(value, (int, float)):
                    values[name] = value
        return values
