"""The ``Metric`` interface the loop speaks (``paddle.metric.Metric``)."""
from __future__ import annotations

from typing import Any

import torch


class Metric:
    """A streaming metric: ``update`` per batch, ``accumulate`` for the value so far, ``reset`` per run.

    Subclasses return from :meth:`accumulate` one value per name in :meth:`names`.
    Values may be floats (they go in ``logs`` and ``History``) or lists (a
    confusion matrix: it goes in ``evaluate()``'s dict only).
    """

    def names(self) -> list[str]:
        raise NotImplementedError

    def update(self, outputs: torch.Tensor, labels: torch.Tensor) -> None:
        raise NotImplementedError

    def accumulate(self) -> list[Any]:
        raise NotImplementedError

    def reset(self) -> None:
        raise NotImplementedError

    def to(self, device: torch.device) -> "Metric":
        return self

    def results(self) -> dict[str, Any]:
        """``{name: value}`` for everything accumulated so far."""
        return dict(zip(self.names(), self.accumulate()))

    # Paddle spelling
    def name(self) -> list[str]:
        return self.names()
