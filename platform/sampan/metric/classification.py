"""Classification metrics as thin wrappers of torchmetrics' multiclass / binary metrics.

The number of classes is read from the first batch of logits (``[N, C]``, or
``[N, T, C]`` with the classes last as Paddle has them), so ``Accuracy()`` works
without being told ``num_classes``. Labels may be class indices (``[N]``,
``[N, 1]``, ``[N, T, 1]``) or one-hot rows shaped like the outputs. A single
column (``[N]`` or ``[N, 1]``) means a binary task: probabilities, or logits (a
sigmoid is applied). ``from_logits=None`` guesses once per run, on the first batch
(values outside [0, 1] are logits), and reads every later batch the same way;
``from_logits=True``/``False`` says it. A probability of exactly 0.5 counts as
positive, as in Paddle (torchmetrics alone would count it negative).
Like Paddle's, ``update`` also takes NumPy arrays.
"""
from __future__ import annotations

import warnings
from typing import Any, Literal, Sequence

import torch

from sampan.errors import bad_argument
from sampan.metric.base import Metric

Average = Literal["micro", "macro", "weighted"]


def _tmc():
    """``torchmetrics.classification``, imported when a metric is first built: importing torchmetrics takes
    ~2.7 s of CPU (it imports torchvision and scipy.signal), which a process that trains or serves without
    metrics (a torchrun rank, a lesson kernel) should not pay."""
    import torchmetrics.classification as tmc

    return tmc


def _distributed() -> bool:
    dist = torch.distributed
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _check_num_classes(num_classes: Any) -> None:
    if num_classes is not None and (not isinstance(num_classes, int) or num_classes < 1):
        raise ValueError(bad_argument("num_classes", num_classes, "a positive int or None (read from the logits)"))


def _num_classes(outputs: torch.Tensor) -> int:
    return 1 if outputs.ndim == 1 or outputs.shape[-1] == 1 else int(outputs.shape[-1])


def _as_tensor(value: Any, argument: str) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.detach()
    try:
        return torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise TypeError(bad_argument(argument, value, "a tensor or a NumPy array")) from exc


def flatten_pair(outputs: Any, labels: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Paddle's layouts -> torchmetrics': classes last flattened to ``[M, C]``, labels to ``[M]`` indices.

    One-hot labels (the outputs' shape, more than one class) become indices with ``argmax``.

    Example:
        >>> import torch
        >>> from sampan.metric.classification import flatten_pair
        >>> out, lab = flatten_pair(torch.zeros(2, 3, 4), torch.zeros(2, 3, 1, dtype=torch.long))
        >>> list(out.shape), list(lab.shape)
        ([6, 4], [6])
    """
    outputs, labels = _as_tensor(outputs, "outputs"), _as_tensor(labels, "labels")
    classes = _num_classes(outputs)
    if classes > 1 and labels.shape == outputs.shape:
        labels = labels.argmax(-1)
    if classes > 1 and outputs.ndim > 2:
        outputs = outputs.reshape(-1, classes)
    elif classes == 1:
        outputs = outputs.reshape(-1)
    labels = labels.reshape(-1)
    if labels.numel() != outputs.shape[0]:
        raise ValueError(f"Expected one label per prediction: outputs of shape {list(outputs.shape)} (after "
                         f"flattening) but {labels.numel()} labels. HINT: labels must be class indices shaped "
                         f"[N], [N, 1] or [..., 1], or one-hot shaped like the outputs.")
    return outputs.float(), labels.long()


def looks_like_logits(outputs: torch.Tensor) -> bool:
    """Values outside [0, 1] cannot be probabilities."""
    return bool(outputs.numel() and (outputs.min() < 0 or outputs.max() > 1))


def _check_from_logits(from_logits: Any) -> None:
    if from_logits is not None and not isinstance(from_logits, bool):
        raise ValueError(bad_argument("from_logits", from_logits, "True, False or None (guess on the first batch)"))


class _BinaryScores:
    """Reads single-column outputs as probabilities or logits, decided once per run: a guess made batch by batch
    would read the same network's outputs two ways (a batch of small logits looks like probabilities)."""

    from_logits: bool | None = None
    _logits: bool | None = None
    _contradicted = False

    def _probabilities(self, outputs: torch.Tensor) -> torch.Tensor:
        if self._logits is None:
            self._logits = self.from_logits if self.from_logits is not None else looks_like_logits(outputs)
        elif not self._logits and self.from_logits is None and not self._contradicted and looks_like_logits(outputs):
            self._contradicted = True
            warnings.warn(f"{type(self).__name__}: the first batch's outputs were all in [0, 1] and were read as "
                          f"probabilities, but this batch holds values outside [0, 1] (logits?). HINT: pass "
                          f"{type(self).__name__}(from_logits=True) for logits, or apply a sigmoid in the network.",
                          UserWarning, stacklevel=3)
        return outputs.sigmoid() if self._logits else outputs

    def _forget_scores(self) -> None:
        self._logits, self._contradicted = None, False


def _check_labels(labels: torch.Tensor, classes: int, owner: str) -> None:
    """Class indices in ``[0, classes)``; torch would fail later with a message about shapes, or count nothing."""
    if not labels.numel():
        return
    low, high = torch.stack(torch.aminmax(labels)).tolist()  # one transfer from the device
    if low < 0 or high >= max(classes, 2):
        raise ValueError(f"{owner}: expected class labels in [0, {max(classes, 2) - 1}] for outputs with "
                         f"{classes} {'column' if classes == 1 else 'columns'}. Received labels from "
                         f"{low} to {high}. HINT: number the classes from 0 "
                         f"(subtract 1 from 1-based labels), or give the network one output per class.")


def _check_columns(outputs: torch.Tensor, num_classes: int | None, owner: str) -> None:
    if num_classes is not None and _num_classes(outputs) not in (num_classes, 1):
        raise ValueError(bad_argument("num_classes", num_classes, f"the outputs' last dimension "
                                      f"({_num_classes(outputs)}) for {owner}",
                                      "leave num_classes=None to read it from the outputs"))


class _TorchMetric(_BinaryScores, Metric):
    """Builds one torchmetrics object per reported value on the first ``update``."""

    syncs_across_ranks = True  # torchmetrics' compute() reduces every rank's state

    def __init__(self, name: str | None, num_classes: int | None, from_logits: bool | None = None):
        _check_num_classes(num_classes)
        _check_from_logits(from_logits)
        self._name = name
        self.num_classes = num_classes
        self.from_logits = from_logits
        self._metrics: list[Any] | None = None
        self._device = torch.device("cpu")
        self._seen = 0

    def _build(self, num_classes: int) -> list[Any]:
        raise NotImplementedError

    def to(self, device: torch.device) -> "Metric":
        self._device = torch.device(device)
        if self._metrics is not None:
            self._metrics = [m.to(self._device) for m in self._metrics]
        return self

    def update(self, outputs: Any, labels: Any) -> None:
        outputs, labels = flatten_pair(outputs, labels)
        _check_columns(outputs, self.num_classes, type(self).__name__)
        _check_labels(labels, _num_classes(outputs), type(self).__name__)
        if self._metrics is None:
            classes = self.num_classes or _num_classes(outputs)
            self._metrics = [m.to(outputs.device) for m in self._build(classes)]
        if not labels.numel():  # built, so that it takes part in the ranks' reduction, but torchmetrics takes no
            return               # empty batch
        if outputs.ndim == 1:  # binary: 0.5 is positive, as in Paddle (np.floor(p + 0.5))
            outputs = (self._probabilities(outputs) >= 0.5).long()
        for m in self._metrics:
            m.update(outputs, labels.to(outputs.device))
        self._seen += labels.numel()

    def accumulate(self) -> list[Any]:
        # under torch.distributed compute() reduces every rank's counts: a rank that counted nothing (its share of an
        # evaluation was padding alone) must still compute, or the others wait for it
        if self._metrics is None or not (self._seen or _distributed()):
            return [0.0 for _ in self.names()]
        return [self._value(m.compute()) for m in self._metrics]

    @staticmethod
    def _value(t: torch.Tensor) -> Any:
        return float(t) if t.numel() == 1 else t.cpu().tolist()

    def reset(self) -> None:
        self._seen = 0
        self._forget_scores()
        if self._metrics is not None:
            for m in self._metrics:
                m.reset()


class Accuracy(_BinaryScores, Metric):
    """Top-k accuracy (``paddle.metric.Accuracy``): the share of rows whose label is among the k highest scores.

    Counted here rather than through torchmetrics (whose ``MulticlassAccuracy(average="micro", top_k=k)`` it
    matches, ``tests/platform/metric/test_metrics.py``): importing torchmetrics costs ~2.7 s of CPU per process,
    and nearly every fit uses this metric. Under ``torch.distributed`` the counts of every rank are summed when
    the value is read, as torchmetrics syncs. Binary output (one logit column): positive from 0.5 on
    (probabilities; anything outside [0, 1] is a logit and goes through a sigmoid), as in Paddle.

    Args:
        topk: one k or several, e.g. ``(1, 5)``.
        name: base name; defaults to ``"acc"`` (``"acc_top1"``, ``"acc_top5"`` when several k).
        num_classes: defaults to the logits' last dimension.
        from_logits: for one output column: True (logits), False (probabilities), None (guessed on the
            first batch of a run).

    Example:
        >>> import torch
        >>> from sampan.metric import Accuracy
        >>> m = Accuracy(topk=(1, 2))
        >>> m.update(torch.tensor([[0.1, 0.9, 0.0], [0.8, 0.1, 0.1]]), torch.tensor([1, 1]))
        >>> m.results()
        {'acc_top1': 0.5, 'acc_top2': 1.0}
    """

    syncs_across_ranks = True  # accumulate() sums every rank's counts

    def __init__(self, topk: int | Sequence[int] = (1,), name: str | None = None, num_classes: int | None = None,
                 from_logits: bool | None = None):
        ks = (topk,) if isinstance(topk, int) else tuple(topk)
        if not ks or any(not isinstance(k, int) or isinstance(k, bool) or k < 1 for k in ks):
            raise ValueError(bad_argument("topk", topk, "a positive int or a tuple of them", "write topk=(1, 5)"))
        _check_num_classes(num_classes)
        _check_from_logits(from_logits)
        self.topk, self._name, self.num_classes, self.from_logits = ks, name, num_classes, from_logits
        self._counts: torch.Tensor | None = None  # hits per k, then rows seen

    def names(self) -> list[str]:
        base = self._name or "acc"
        return [base] if self.topk == (1,) else [f"{base}_top{k}" for k in self.topk]

    def update(self, outputs: Any, labels: Any) -> None:
        outputs, labels = flatten_pair(outputs, labels)
        labels = labels.to(outputs.device)
        _check_columns(outputs, self.num_classes, "Accuracy")
        _check_labels(labels, _num_classes(outputs), "Accuracy")
        if outputs.ndim == 1:
            if self.topk != (1,):
                raise ValueError(bad_argument("topk", self.topk, "(1,) for a binary (single logit) output"))
            hits = [((self._probabilities(outputs) >= 0.5).long() == labels).sum()]
        else:
            classes = self.num_classes or int(outputs.shape[-1])
            if any(k > classes for k in self.topk):
                raise ValueError(bad_argument("topk", self.topk, f"values at most num_classes={classes}"))
            hits = []
            for k in self.topk:
                if k == 1:  # argmax, as torchmetrics: among tied scores the first class wins
                    hits.append((outputs.argmax(-1) == labels).sum())
                else:
                    hits.append((outputs.topk(k, dim=-1).indices == labels[:, None]).any(-1).sum())
        counts = torch.stack([*hits, torch.tensor(labels.numel(), device=outputs.device)]).to(torch.float64)
        self._counts = counts if self._counts is None else self._counts + counts

    def accumulate(self) -> list[float]:
        counts = self._counts
        if counts is not None and _distributed():
            counts = counts.clone()
            torch.distributed.all_reduce(counts)
        if counts is None or not counts[-1]:
            return [0.0 for _ in self.topk]
        return [float(c / counts[-1]) for c in counts[:-1]]

    def reset(self) -> None:
        self._counts = None
        self._forget_scores()


class _Averaged(_TorchMetric):
    _binary: str  # torchmetrics.classification class names
    _multiclass: str
    _default_name: str

    def __init__(self, average: Average = "macro", name: str | None = None, num_classes: int | None = None,
                 from_logits: bool | None = None):
        if average not in ("micro", "macro", "weighted"):
            raise ValueError(bad_argument("average", average, "'micro', 'macro' or 'weighted'"))
        super().__init__(name, num_classes, from_logits)
        self.average = average

    def names(self) -> list[str]:
        return [self._name or self._default_name]

    def _build(self, num_classes: int) -> list[Any]:
        if num_classes == 1:
            return [getattr(_tmc(), self._binary)(validate_args=False)]
        return [getattr(_tmc(), self._multiclass)(num_classes, average=self.average, validate_args=False)]


class Precision(_Averaged):
    """Precision (``paddle.metric.Precision``); binary for one logit column, else averaged over classes.

    Example:
        >>> import torch
        >>> from sampan.metric import Precision
        >>> m = Precision()
        >>> m.update(torch.tensor([[2.0, 0.0], [0.0, 2.0]]), torch.tensor([0, 0]))
        >>> m.results()["precision"]
        0.5
    """

    _binary, _multiclass, _default_name = "BinaryPrecision", "MulticlassPrecision", "precision"


class Recall(_Averaged):
    """Recall (``paddle.metric.Recall``); binary for one logit column, else averaged over classes."""

    _binary, _multiclass, _default_name = "BinaryRecall", "MulticlassRecall", "recall"


class F1(_Averaged):
    """F1 score; binary for one logit column, else averaged over classes."""

    _binary, _multiclass, _default_name = "BinaryF1Score", "MulticlassF1Score", "f1"


class ConfusionMatrix(_TorchMetric):
    """Confusion matrix (rows: true class, columns: predicted), as a nested list in ``evaluate()``'s dict.

    Example:
        >>> import torch
        >>> from sampan.metric import ConfusionMatrix
        >>> m = ConfusionMatrix()
        >>> m.update(torch.tensor([[2.0, 0.0], [0.0, 2.0]]), torch.tensor([0, 0]))
        >>> m.results()["confusion_matrix"]
        [[1, 1], [0, 0]]
    """

    scalar = False

    def __init__(self, name: str | None = None, num_classes: int | None = None, normalize: str | None = None,
                 from_logits: bool | None = None):
        if normalize not in (None, "true", "pred", "all", "none"):
            raise ValueError(bad_argument("normalize", normalize, "None, 'true' (rows), 'pred' (columns) or 'all'",
                                          "write normalize='true' for each true class's shares"))
        super().__init__(name, num_classes, from_logits)
        self.normalize = normalize

    def names(self) -> list[str]:
        return [self._name or "confusion_matrix"]

    def _build(self, num_classes: int) -> list[Any]:
        if num_classes == 1:
            return [_tmc().BinaryConfusionMatrix(normalize=self.normalize, validate_args=False)]
        return [_tmc().MulticlassConfusionMatrix(num_classes, normalize=self.normalize, validate_args=False)]


class Auc(_TorchMetric):
    """Area under the ROC (or precision-recall) curve (``paddle.metric.Auc``) on torchmetrics.

    Takes Paddle's layout, ``[N, 2]`` class probabilities (or logits: a softmax is applied) with
    labels ``[N]`` or ``[N, 1]``, and also one positive-class column ``[N]`` / ``[N, 1]`` of
    probabilities or logits. ``curve="ROC"`` uses ``BinaryAUROC``; ``"PR"`` uses
    ``BinaryAveragePrecision`` (the step-wise area, where Paddle interpolates linearly).

    Args:
        curve: ``"ROC"`` or ``"PR"``.
        num_thresholds: bins of the streaming computation (constant memory, like Paddle's 4095);
            ``None`` computes the exact area over every score kept in memory.
        name: defaults to ``"auc"``.

    Example:
        >>> import torch
        >>> from sampan.metric import Auc
        >>> m = Auc()
        >>> m.update(torch.tensor([[0.8, 0.2], [0.3, 0.7], [0.6, 0.4]]), torch.tensor([0, 1, 1]))
        >>> round(m.accumulate()[0], 3)
        1.0
    """

    def __init__(self, curve: Literal["ROC", "PR"] = "ROC", num_thresholds: int | None = 4095, name: str | None = None,
                 from_logits: bool | None = None):
        if curve not in ("ROC", "PR"):
            raise ValueError(bad_argument("curve", curve, "'ROC' or 'PR'"))
        if num_thresholds is not None and (not isinstance(num_thresholds, int) or num_thresholds < 2):
            raise ValueError(bad_argument("num_thresholds", num_thresholds, "an int >= 2, or None for the exact area"))
        super().__init__(name, None, from_logits)
        self.curve, self.num_thresholds = curve, num_thresholds

    def names(self) -> list[str]:
        return [self._name or "auc"]

    def _build(self, num_classes: int) -> list[Any]:
        kind = _tmc().BinaryAUROC if self.curve == "ROC" else _tmc().BinaryAveragePrecision
        return [kind(thresholds=self.num_thresholds, validate_args=False)]

    def update(self, outputs: Any, labels: Any) -> None:
        outputs, labels = _as_tensor(outputs, "outputs").float(), _as_tensor(labels, "labels").reshape(-1).long()
        if outputs.ndim == 2 and outputs.shape[-1] == 2:
            rows_are_probabilities = bool(((outputs >= 0) & (outputs <= 1)).all()) and torch.allclose(
                outputs.sum(-1), torch.ones(len(outputs), device=outputs.device), atol=1e-3)
            scores = outputs[:, 1] if rows_are_probabilities else outputs.softmax(-1)[:, 1]
        elif outputs.ndim == 1 or (outputs.ndim == 2 and outputs.shape[-1] == 1):
            scores = self._probabilities(outputs.reshape(-1))
        else:
            raise ValueError(f"Auc is binary: expected outputs of shape [N, 2] (Paddle's layout) or [N] / [N, 1]. "
                             f"Received outputs of shape {list(outputs.shape)}. HINT: for several classes use "
                             f"torchmetrics.classification.MulticlassAUROC directly.")
        if self._metrics is None:
            self._metrics = [m.to(scores.device) for m in self._build(1)]
        if labels.numel():
            self._metrics[0].update(scores, labels.to(scores.device))
        self._seen += labels.numel()
