"""A set of metrics updated in chunks: batches are buffered and fed to torchmetrics at log steps.

torchmetrics' per-call overhead dominates small batches; feeding it every
``log_freq`` batches at once keeps ``fit`` close to a hand-written loop.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch

from sampan.errors import bad_argument
from sampan.metric.base import Metric


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
    def __init__(self, metrics: Sequence[Metric]):
        self.metrics = list(metrics)
        self._outputs: list[torch.Tensor] = []
        self._labels: list[torch.Tensor] = []

    def __bool__(self) -> bool:
        return bool(self.metrics)

    def names(self) -> list[str]:
        return [n for m in self.metrics for n in m.names()]

    def reset(self) -> None:
        self._outputs.clear()
        self._labels.clear()
        for m in self.metrics:
            m.reset()

    def add(self, outputs: Any, labels: Sequence[Any]) -> None:
        if self.metrics and labels:
            out = outputs[0] if isinstance(outputs, (tuple, list)) else outputs
            self._outputs.append(out.detach())
            self._labels.append(labels[0].detach())

    def _flush(self) -> None:
        if self._outputs:
            out, lab = torch.cat(self._outputs), torch.cat(self._labels)
            self._outputs.clear()
            self._labels.clear()
            for m in self.metrics:
                m.update(out, lab)

    def results(self, scalars_only: bool = True) -> dict[str, Any]:
        self._flush()
        values: dict[str, Any] = {}
        for m in self.metrics:
            for name, value in m.results().items():
                if not scalars_only or isinstance(value, (int, float)):
                    values[name] = value
        return values
