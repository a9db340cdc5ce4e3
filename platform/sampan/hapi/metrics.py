"""A set of metrics updated in chunks: batches are buffered and fed to torchmetrics at log steps.

torchmetrics' per-call overhead dominates small batches; feeding it every
``log_freq`` batches at once keeps ``fit`` close to a hand-written loop. The buffer
holds at most :data:`MAX_BUFFERED` batches (an evaluation set never sits whole in
device memory) and is fed early when a batch's shape differs from the buffered ones
(variable-length sequences, ``[N, T, C]``).
"""
from __future__ import annotations

from typing import Any, Sequence

import torch

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


class MetricSet:
    """The metrics of one run (an epoch, an evaluation), fed in chunks.

    A batch without rows (the padding that ends a rank's share of a distributed evaluation, cut) is not fed,
    unless the run had no other: then the metrics receive it empty when read, so that a rank whose share was
    padding alone takes part in the reduction of the counts across ranks (``Accuracy``, torchmetrics).
    """

    def __init__(self, metrics: Sequence[Metric]):
        self.metrics = list(metrics)
        self._outputs: list[torch.Tensor] = []
        self._labels: list[torch.Tensor] = []
        self._fed = False  # rows went to the metrics in this run
        self._empty: tuple[torch.Tensor, torch.Tensor] | None = None

    def __bool__(self) -> bool:
        return bool(self.metrics)

    def names(self) -> list[str]:
        return [n for m in self.metrics for n in m.names()]

    def reset(self) -> None:
        self._outputs.clear()
        self._labels.clear()
        self._fed, self._empty = False, None
        for m in self.metrics:
            m.reset()

    def add(self, outputs: Any, labels: Sequence[Any]) -> None:
        if self.metrics and labels:
            out, lab = outputs[0] if isinstance(outputs, (tuple, list)) else outputs, labels[0]
            if isinstance(lab, torch.Tensor) and lab.ndim and not len(lab):
                self._empty = (out.detach(), lab.detach())
                return
            if self._outputs and (out.shape[1:] != self._outputs[-1].shape[1:]
                                  or lab.shape[1:] != self._labels[-1].shape[1:]):
                self._flush()  # torch.cat needs equal shapes beyond the batch dimension
            self._outputs.append(out.detach())
            self._labels.append(lab.detach())
            if len(self._outputs) >= MAX_BUFFERED:
                self._flush()

    def _flush(self) -> None:
        if self._outputs:
            out, lab = torch.cat(self._outputs), torch.cat(self._labels)
            self._outputs.clear()
            self._labels.clear()
            self._fed = True
            for m in self.metrics:
                m.feed(out, lab)

    def results(self, scalars_only: bool = True) -> dict[str, Any]:
        self._flush()
        if not self._fed and self._empty is not None:
            self._fed = True
            for m in self.metrics:
                m.feed(*self._empty)
        values: dict[str, Any] = {}
        for m in self.metrics:
            for name, value in m.results().items():
                if not scalars_only or isinstance(value, (int, float)):
                    values[name] = value
        return values
