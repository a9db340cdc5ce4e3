"""Classification metrics as thin wrappers of torchmetrics' multiclass / binary metrics.

The number of classes is read from the first batch of logits (``[N, C]``), so
``Accuracy()`` works without being told ``num_classes``. A single logit column
(``[N]`` or ``[N, 1]``) means a binary task scored with a sigmoid.
"""
from __future__ import annotations

from typing import Any, Literal, Sequence

import torch
import torchmetrics.classification as tmc

from sampan.errors import bad_argument
from sampan.metric.base import Metric

Average = Literal["micro", "macro", "weighted"]


def _num_classes(outputs: torch.Tensor) -> int:
    return 1 if outputs.ndim == 1 or outputs.shape[-1] == 1 else int(outputs.shape[-1])


class _TorchMetric(Metric):
    """Builds one torchmetrics object per reported value on the first ``update``."""

    def __init__(self, name: str | None, num_classes: int | None):
        if num_classes is not None and (not isinstance(num_classes, int) or num_classes < 1):
            raise ValueError(bad_argument("num_classes", num_classes, "a positive int or None (read from the logits)"))
        self._name = name
        self.num_classes = num_classes
        self._metrics: list[Any] | None = None
        self._device = torch.device("cpu")

    def _build(self, num_classes: int) -> list[Any]:
        raise NotImplementedError

    def to(self, device: torch.device) -> "Metric":
        self._device = torch.device(device)
        if self._metrics is not None:
            self._metrics = [m.to(self._device) for m in self._metrics]
        return self

    def update(self, outputs: torch.Tensor, labels: torch.Tensor) -> None:
        outputs = outputs.detach()
        if self._metrics is None:
            classes = self.num_classes or _num_classes(outputs)
            self._metrics = [m.to(outputs.device) for m in self._build(classes)]
        labels = labels.detach().reshape(-1).long() if labels.dtype != torch.long or labels.ndim != 1 else labels
        if outputs.ndim > 1 and outputs.shape[-1] == 1:
            outputs = outputs.reshape(-1)
        for m in self._metrics:
            m.update(outputs.float(), labels)

    def accumulate(self) -> list[Any]:
        if self._metrics is None:
            return [0.0 for _ in self.names()]
        return [self._value(m.compute()) for m in self._metrics]

    @staticmethod
    def _value(t: torch.Tensor) -> Any:
        return float(t) if t.numel() == 1 else t.cpu().tolist()

    def reset(self) -> None:
        if self._metrics is not None:
            for m in self._metrics:
                m.reset()


class Accuracy(_TorchMetric):
    """Top-k accuracy (``paddle.metric.Accuracy``) on ``torchmetrics`` ``MulticlassAccuracy(average="micro")``.

    Args:
        topk: one k or several, e.g. ``(1, 5)``.
        name: base name; defaults to ``"acc"`` (``"acc_top1"``, ``"acc_top5"`` when several k).
        num_classes: defaults to the logits' last dimension.

    Example:
        >>> m = Accuracy(topk=(1, 2))
        >>> m.update(torch.tensor([[0.1, 0.9, 0.0], [0.8, 0.1, 0.1]]), torch.tensor([1, 1]))
        >>> m.results()
        {'acc_top1': 0.5, 'acc_top2': 1.0}
    """

    def __init__(self, topk: int | Sequence[int] = (1,), name: str | None = None, num_classes: int | None = None):
        ks = (topk,) if isinstance(topk, int) else tuple(topk)
        if not ks or any(not isinstance(k, int) or isinstance(k, bool) or k < 1 for k in ks):
            raise ValueError(bad_argument("topk", topk, "a positive int or a tuple of them", "write topk=(1, 5)"))
        super().__init__(name, num_classes)
        self.topk = ks

    def names(self) -> list[str]:
        base = self._name or "acc"
        return [base] if self.topk == (1,) else [f"{base}_top{k}" for k in self.topk]

    def _build(self, num_classes: int) -> list[Any]:
        if num_classes == 1:
            if self.topk != (1,):
                raise ValueError(bad_argument("topk", self.topk, "(1,) for a binary (single logit) output"))
            return [tmc.BinaryAccuracy(validate_args=False)]
        too_big = [k for k in self.topk if k > num_classes]
        if too_big:
            raise ValueError(bad_argument("topk", self.topk, f"values at most num_classes={num_classes}"))
        return [tmc.MulticlassAccuracy(num_classes, top_k=k, average="micro", validate_args=False) for k in self.topk]


class _Averaged(_TorchMetric):
    _binary: type
    _multiclass: type
    _default_name: str

    def __init__(self, average: Average = "macro", name: str | None = None, num_classes: int | None = None):
        if average not in ("micro", "macro", "weighted"):
            raise ValueError(bad_argument("average", average, "'micro', 'macro' or 'weighted'"))
        super().__init__(name, num_classes)
        self.average = average

    def names(self) -> list[str]:
        return [self._name or self._default_name]

    def _build(self, num_classes: int) -> list[Any]:
        if num_classes == 1:
            return [self._binary(validate_args=False)]
        return [self._multiclass(num_classes, average=self.average, validate_args=False)]


class Precision(_Averaged):
    """Precision (``paddle.metric.Precision``); binary for one logit column, else averaged over classes.

    Example:
        >>> m = Precision()
        >>> m.update(torch.tensor([[2.0, 0.0], [0.0, 2.0]]), torch.tensor([0, 0]))
        >>> m.results()["precision"]
        0.5
    """

    _binary, _multiclass, _default_name = tmc.BinaryPrecision, tmc.MulticlassPrecision, "precision"


class Recall(_Averaged):
    """Recall (``paddle.metric.Recall``); binary for one logit column, else averaged over classes."""

    _binary, _multiclass, _default_name = tmc.BinaryRecall, tmc.MulticlassRecall, "recall"


class F1(_Averaged):
    """F1 score; binary for one logit column, else averaged over classes."""

    _binary, _multiclass, _default_name = tmc.BinaryF1Score, tmc.MulticlassF1Score, "f1"


class ConfusionMatrix(_TorchMetric):
    """Confusion matrix (rows: true class, columns: predicted), as a nested list in ``evaluate()``'s dict.

    Example:
        >>> m = ConfusionMatrix()
        >>> m.update(torch.tensor([[2.0, 0.0], [0.0, 2.0]]), torch.tensor([0, 0]))
        >>> m.results()["confusion_matrix"]
        [[1, 1], [0, 0]]
    """

    scalar = False

    def __init__(self, name: str | None = None, num_classes: int | None = None, normalize: str | None = None):
        super().__init__(name, num_classes)
        self.normalize = normalize

    def names(self) -> list[str]:
        return [self._name or "confusion_matrix"]

    def _build(self, num_classes: int) -> list[Any]:
        if num_classes == 1:
            return [tmc.BinaryConfusionMatrix(normalize=self.normalize, validate_args=False)]
        return [tmc.MulticlassConfusionMatrix(num_classes, normalize=self.normalize, validate_args=False)]
