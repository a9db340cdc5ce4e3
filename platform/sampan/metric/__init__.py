"""Metrics on torchmetrics with Paddle's names: ``Accuracy(topk=...)``, ``Precision``, ``Recall``, ``F1``, ``Auc``."""
from sampan.metric.base import Metric
from sampan.metric.classification import F1, Accuracy, Auc, ConfusionMatrix, Precision, Recall

__all__ = ["Accuracy", "Auc", "ConfusionMatrix", "F1", "Metric", "Precision", "Recall"]
