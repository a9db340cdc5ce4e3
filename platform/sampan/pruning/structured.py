"""Structured pruning: remove whole filters / neurons by L1 norm and rebuild the layers smaller.

Mirrors PaddleSlim's ``L1NormFilterPruner``; the channel dependencies (BatchNorm, the next
convolution or linear layer, residual additions) come from a ``torch.fx`` trace.
"""
from __future__ import annotations

import copy
from typing import Any, Mapping

import torch
from torch import nn

from sampan.errors import bad_argument
from sampan.pruning._checks import check_ratio
from sampan.pruning._graph import Group, StructureError, analyse


def prunable_groups(model: nn.Module, inputs: tuple, skip_names: set = frozenset(),
                    skip_types: tuple = ()) -> list[Group]:
    """The groups that structured pruning may shrink (each named by its first producer layer)."""
    return [g for g in analyse(model, inputs, set(skip_names), skip_types) if not g.blocked]


def no_prunable_layer(model: nn.Module, all_groups: list[Group]) -> StructureError:
    """The error for a model none of whose layers can lose filters, with each layer's reason."""
    reasons = {g.name: g.blocked[0] for g in all_groups}
    if reasons:
        detail = str(reasons)
    elif isinstance(model, (nn.Conv2d, nn.Linear)):
        detail = "it is a single layer, the model's output, which keeps its size"
    else:
        detail = "it has no Conv2d or Linear layer"
    return StructureError(f"Cannot structurally prune {type(model).__name__}: no layer can lose filters "
                          f"({detail}). HINT: use structured=False (magnitude pruning), which keeps every "
                          "layer's size.")


def _ratios(amount: Any, groups: list[Group], all_groups: list[Group]) -> dict[str, float]:
    if not isinstance(amount, Mapping):
        ratio = check_ratio("amount", amount)
        return {g.name: ratio for g in groups}
    by_layer = {p: g for g in all_groups for p in g.producers}
    ratios: dict[str, float] = {}
    asked_by: dict[str, str] = {}  # group name -> the layer of `amount` that set its ratio
    for layer, value in amount.items():
        check_ratio(f"amount[{layer!r}]", value)
        if layer not in by_layer:
            raise ValueError(bad_argument("amount", {layer: value},
                                          f"layer names among the prunable layers {sorted(by_layer)[:12]}",
                                          "name a Conv2d or Linear layer of the model"))
        group = by_layer[layer]
        if group.blocked:
            raise StructureError(f"Cannot prune `{layer}` structurally: {group.blocked[0]}. "
                                 "HINT: leave it out of `amount`, or use structured=False.")
        if group.name in ratios and ratios[group.name] != float(value):
            other = asked_by[group.name]
            raise ValueError(bad_argument(
                "amount", {other: amount[other], layer: value},
                f"one share for `{other}` and `{layer}`, whose outputs are added together (a residual "
                "connection) and lose the same channels", "give both the same share, or name only one of them"))
        ratios[group.name] = float(value)
        asked_by[group.name] = layer
    return ratios


def _keep(model_modules: dict, group: Group, ratio: float) -> torch.Tensor:
    score = torch.zeros(group.channels)
    for name in group.producers:
        w = model_modules[name].weight.detach()
        norms = w.abs().reshape(w.shape[0], -1).sum(1)
        score += norms / norms.mean().clamp_min(1e-12)
    keep = max(1, int(round(group.channels * (1.0 - ratio))))
    return torch.topk(score, keep).indices.sort().values


def _param(t: torch.Tensor) -> nn.Parameter:
    return nn.Parameter(t.detach().clone().contiguous())


def _shrink_producer(module: nn.Module, keep: torch.Tensor) -> None:
    module.weight = _param(module.weight[keep])
    if module.bias is not None:
        module.bias = _param(module.bias[keep])
    if isinstance(module, nn.Conv2d):
        module.out_channels = len(keep)
    else:
        module.out_features = len(keep)


def _shrink_consumer(module: nn.Module, kind: str, keep: torch.Tensor, factor: int) -> None:
    if kind == "bn":
        module.weight = _param(module.weight[keep]) if module.weight is not None else None
        module.bias = _param(module.bias[keep]) if module.bias is not None else None
        if module.running_mean is not None:  # None with track_running_stats=False
            module.running_mean = module.running_mean[keep].clone()
            module.running_var = module.running_var[keep].clone()
        module.num_features = len(keep)
        return
    index = (keep[:, None] * factor + torch.arange(factor)[None, :]).reshape(-1)
    module.weight = _param(module.weight[:, index])
    if kind == "conv":
        module.in_channels = len(index)
    else:
        module.in_features = len(index)


def prune_structured(model: nn.Module, amount: float | Mapping[str, float], inputs: tuple, *,
                     skip_names: set = frozenset(), skip_types: tuple = (),
                     all_groups: list[Group] | None = None) -> nn.Module:
    """Returns a smaller copy of ``model``; see :func:`sampan.pruning.prune` for the arguments.

    ``all_groups`` (from ``analyse``) saves tracing again when one model is pruned many times.
    """
    if all_groups is None:
        all_groups = analyse(model, inputs, set(skip_names), skip_types)
    groups = [g for g in all_groups if not g.blocked]
    if not groups and not isinstance(amount, Mapping):  # a named layer gets its own reason from _ratios
        raise no_prunable_layer(model, all_groups)
    ratios = _ratios(amount, groups, all_groups)
    pruned = copy.deepcopy(model)
    modules = dict(pruned.named_modules())
    for group in groups:
        if group.name not in ratios:
            continue
        keep = _keep(modules, group, ratios[group.name])
        for name in group.producers:
            _shrink_producer(modules[name], keep)
        for name, kind, factor in group.consumers:
            _shrink_consumer(modules[name], kind, keep, factor)
    return pruned
