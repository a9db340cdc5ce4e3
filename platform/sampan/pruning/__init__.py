"""Pruning: magnitude or structured (filters / neurons), sensitivity analysis, FLOPs targets.

Mirrors PaddleSlim (``sensitivity``, ``sensitive_prune``, ``L1NormFilterPruner``) on
``torch.nn.utils.prune`` and ``torch.fx``. Structured pruning rebuilds the layers smaller, so the
pruned model has fewer parameters and FLOPs and exports like any other ``nn.Module``.

Example:
    >>> import torch, sampan
    >>> net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    >>> small = sampan.pruning.prune(net, 0.5, structured=True, example_inputs=torch.randn(1, 8))
    >>> sampan.pruning.count_params(small) < sampan.pruning.count_params(net)
    True
"""
from __future__ import annotations

from sampan.pruning._graph import StructureError
from sampan.pruning.api import prune
from sampan.pruning.flops import count_params, flops
from sampan.pruning.report import CompressionReport, compression_report
from sampan.pruning.sensitivity import SensitivityTable, prune_to_flops, sensitivity

__all__ = [
    "CompressionReport",
    "SensitivityTable",
    "StructureError",
    "compression_report",
    "count_params",
    "flops",
    "prune",
    "prune_to_flops",
    "sensitivity",
]
