"""Unstructured magnitude pruning (``torch.nn.utils.prune.l1_unstructured``, made permanent)."""
from __future__ import annotations

import copy

from torch import nn
from torch.nn.utils import prune as torch_prune

from sampan.pruning._checks import is_skipped

PRUNABLE = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)


def prune_unstructured(model: nn.Module, amount: float, *, skip_names: set = frozenset(),
                       skip_types: tuple = ()) -> nn.Module:
    """Zeroes the ``amount`` share of smallest-magnitude weights in every Conv / Linear layer of a copy."""
    pruned = copy.deepcopy(model)
    for name, module in pruned.named_modules():
        if isinstance(module, PRUNABLE) and not is_skipped(name, module, set(skip_names), skip_types):
            torch_prune.l1_unstructured(module, "weight", amount=amount)
            torch_prune.remove(module, "weight")
    return pruned
