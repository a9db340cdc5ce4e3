"""The ``Metric`` interface the loop speaks (``paddle.metric.Metric``)."""
from __future__ import annotations

from typing import Any

import torch


class Metric:
    """A streaming metric: ``update`` per batch, ``accumulate`` for the value so far, ``reset`` per run.

    Subclasses return from :meth:`accumulate` one value per name in :meth:`names`.
    Values may be floats (they go in ``logs`` and ``History``) or lists (a
    confusion matrix: it goes in ``evaluate()``'s dict only).

    A metric written for Paddle works as it is: ``name()`` instead of ``names()`` (a string or a
    list), a single number from ``accumulate()``, and a ``compute(outputs, labels)`` whose results
    ``update`` receives, as ``paddle.Model`` calls them.

    Under more than one process (``sampan launch``, ``strategy="ddp"``), ``Model.evaluate`` and the
    evaluation in ``fit`` gather every rank's outputs and labels (the padding of the ranks' shares
    cut) before ``compute`` / ``update``, as ``paddle.Model`` does: a metric of your own sees the
    whole data on every rank, and every rank reports the same value. Training steps feed each rank
    its own batches, as in Paddle. ``sampan.metric``'s metrics set :attr:`syncs_across_ranks`: they
    reduce their counts across ranks when read, so they take their rank's rows alone; set it on a
    metric of your own that reduces its state itself (on torchmetrics, say) to skip the gathering.

    Example:
        >>> import torch
        >>> from sampan.metric import Metric
        >>> class MeanAbsError(Metric):  # Paddle's spelling
        ...     def __init__(self):
        ...         self.reset()
        ...     def name(self):
        ...         return "mae"
        ...     def compute(self, outputs, labels):
        ...         return (outputs.reshape(-1) - labels.reshape(-1)).abs()
        ...     def update(self, errors):
        ...         self.total, self.count = self.total + float(errors.sum()), self.count + errors.numel()
        ...     def accumulate(self):
        ...         return self.total / max(self.count, 1)
        ...     def reset(self):
        ...         self.total, self.count = 0.0, 0
        >>> m = MeanAbsError()
        >>> m.feed(torch.tensor([1.0, 2.0]), torch.tensor([1.5, 2.0]))
        >>> m.results()
        {'mae': 0.25}
    """

    syncs_across_ranks: bool = False
    """True when the metric reduces its state across processes itself: the loop feeds it its rank's rows
    alone. False: an evaluation under more than one process gathers every rank's rows for it first."""

    def names(self) -> list[str]:
        if type(self).name is not Metric.name:  # Paddle's metrics name themselves with name()
            named = self.name()
            return [named] if isinstance(named, str) else list(named)
        raise NotImplementedError(f"{type(self).__name__} must say what it reports: define names() returning a "
                                  f"list of strings (or Paddle's name()), one per value of accumulate().")

    def update(self, outputs: torch.Tensor, labels: torch.Tensor) -> None:
        raise NotImplementedError

    def accumulate(self) -> list[Any]:
        raise NotImplementedError

    def reset(self) -> None:
        raise NotImplementedError

    def to(self, device: torch.device) -> "Metric":
        return self

    def feed(self, outputs: Any, labels: Any) -> Any:
        """Adds one batch, as the training loop does: through ``compute`` first when the metric defines it
        (Paddle's two steps), else straight to ``update``. Returns what ``update`` returns."""
        if type(self).compute is not Metric.compute:
            computed = self.compute(outputs, labels)
            return self.update(*(computed if isinstance(computed, (list, tuple)) else [computed]))
        return self.update(outputs, labels)

    def compute(self, outputs: Any, labels: Any) -> Any:
        """Paddle's optional preprocessing step: its results are ``update``'s arguments."""
        return outputs, labels

    def results(self) -> dict[str, Any]:
        """``{name: value}`` for everything accumulated so far."""
        values = self.accumulate()
        if not isinstance(values, (list, tuple)):  # Paddle's metrics may return one number
            values = [values]
        return dict(zip(self.names(), values))

    # Paddle spelling
    def name(self) -> list[str]:
        return self.names()
