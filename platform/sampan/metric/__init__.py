"""Metrics on torchmetrics with Paddle's names: ``Accuracy(topk=...)``, ``Precision``, ``Recall``, ``F1``."""
from sampan.metric.base import Metric
from sampan.metric.classification import F1, Accuracy, ConfusionMatrix, Precision, Recall

__all__ = ["Accuracy", "ConfusionMatrix", "F1", "Metric", "Precision", "Recall"]
