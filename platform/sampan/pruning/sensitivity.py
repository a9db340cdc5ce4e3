"""Per-layer sensitivity to pruning, and per-layer ratios that reach a FLOPs target with the least loss.

Mirrors PaddleSlim's ``sensitivity`` and ``get_ratios_by_loss`` / ``prune_by_flops``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from torch import nn

from sampan.errors import bad_argument
from sampan.pruning._checks import (as_names, check_eval_fn, check_float_model, check_ratio,
                                    example_inputs as _example_inputs, score, split_skip)
from sampan.pruning.flops import flops
from sampan.pruning._graph import analyse
from sampan.pruning.structured import no_prunable_layer, prune_structured

DEFAULT_RATIOS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


@dataclass
class SensitivityTable:
    """Metric loss per layer and ratio: ``table.losses[layer][ratio] = baseline - metric``.

    Attributes:
        baseline: ``eval_fn`` on the unpruned (or unquantized) model.
        losses: ``{layer: {ratio: loss}}``; for quantization ``{layer: {"int8": loss}}``.
        kind: ``"prune"`` or ``"quantize"``.
    """

    baseline: float
    losses: dict[str, dict[Any, float]] = field(default_factory=dict)
    kind: str = "prune"

    def __getitem__(self, layer: str) -> dict[float, float]:
        return self.losses[layer]

    def __iter__(self):
        return iter(self.losses)

    def __len__(self) -> int:
        return len(self.losses)

    def ranked(self) -> list[tuple[str, float]]:
        """Layers from the most to the least sensitive (by their largest loss)."""
        return sorted(((k, max(v.values())) for k, v in self.losses.items()), key=lambda kv: -kv[1])

    def to_dataframe(self):
        import pandas as pd
        return pd.DataFrame(self.losses).T.rename_axis("layer")

    def to_markdown(self) -> str:
        ratios = list(dict.fromkeys(r for v in self.losses.values() for r in v))
        head = "| layer | " + " | ".join(f"{r:g}" if isinstance(r, float) else str(r) for r in ratios) + " |"
        rows = [head, "|---|" + "---|" * len(ratios)]
        for layer, curve in self.losses.items():
            rows.append(f"| {layer} | " + " | ".join(f"{curve.get(r, float('nan')):.4f}" for r in ratios) + " |")
        return "\n".join(rows)

    def plot(self, ax=None):
        """Loss against ratio, one line per layer (a bar per layer for quantization); returns the figure."""
        from sampan.utils.imports import require
        plt = require("matplotlib.pyplot") if ax is None else None
        fig, ax = (plt.subplots(figsize=(6, 4)) if ax is None else (ax.figure, ax))
        if self.kind == "quantize":
            names = list(self.losses)
            ax.barh(names, [max(v.values()) for v in self.losses.values()])
            ax.set_xlabel("metric loss when only this layer is int8")
        else:
            for layer, curve in self.losses.items():
                ax.plot(list(curve), list(curve.values()), marker="o", label=layer)
            ax.set_xlabel("pruned ratio")
            ax.set_ylabel("metric loss")
            ax.legend(fontsize=7)
        ax.set_title(f"{self.kind} sensitivity (baseline {self.baseline:.4g})")
        return fig


def _check_ratios(ratios: Iterable[Any]) -> tuple[float, ...]:
    if isinstance(ratios, (int, float, str)):
        raise TypeError(bad_argument("ratios", ratios, "a sequence of floats in (0, 1)",
                                     f"pass a tuple even for one ratio, e.g. ratios=({ratios},)"))
    values = tuple(ratios)
    if not values:
        raise ValueError(bad_argument("ratios", values, "a non-empty sequence of floats in (0, 1)"))
    return tuple(sorted(check_ratio("ratios", r) for r in values))


def sensitivity(model: nn.Module, eval_fn: Callable[[nn.Module], float], ratios: Iterable[float] = DEFAULT_RATIOS,
                *, example_inputs: Any = None, input_spec: Any = None, skip: Iterable[Any] = (),
                layers: Iterable[str] | None = None) -> SensitivityTable:
    """Prunes one layer (group) at a time at each ratio and records how much ``eval_fn`` drops.

    Args:
        model: the trained network (not modified).
        eval_fn: ``eval_fn(model) -> float``, higher is better (e.g. accuracy on a validation set).
        ratios: shares of filters to remove, each in (0, 1).
        example_inputs / input_spec: inputs the model accepts (for tracing).
        skip: layer names or types never pruned.
        layers: only these layers (default: every prunable one).

    Returns:
        A :class:`SensitivityTable`; ``.to_markdown()`` and ``.plot()`` show it.

    Raises:
        StructureError: no layer can lose filters (the message gives each layer's reason), as
            :func:`~sampan.pruning.prune` raises it.

    Example:
        >>> table = sensitivity(net, lambda m: accuracy(m, val), ratios=(0.3, 0.6),
        ...                     example_inputs=torch.randn(1, 1, 28, 28))  # doctest: +SKIP
    """
    check_float_model(model)
    check_eval_fn(eval_fn)
    ratios = _check_ratios(ratios)
    names, types = split_skip(skip, model)
    inputs = _example_inputs(model, example_inputs, input_spec, what="sensitivity analysis")
    all_groups = analyse(model, inputs, names, types)
    groups = [g.name for g in all_groups if not g.blocked]
    if not groups:
        raise no_prunable_layer(model, all_groups)
    if layers is not None:
        wanted = list(as_names(layers))
        for layer in wanted:
            if layer not in groups:
                raise ValueError(bad_argument("layers", layer, f"one of the prunable layers {groups}"))
        groups = wanted
    baseline = score(eval_fn, model, baseline=True)
    table = SensitivityTable(baseline)
    for layer in groups:
        table.losses[layer] = {r: baseline - score(eval_fn, prune_structured(model, {layer: r}, inputs,
                                                                             all_groups=all_groups))
                               for r in ratios}
    return table


def _ratio_at(curve: dict[float, float], threshold: float, max_ratio: float, eps: float) -> float:
    """Largest ratio whose loss stays within ``threshold`` on the monotone, interpolated curve.

    ``eps * ratio`` is added so that equal losses still order the ratios (a flat curve grows evenly).
    """
    points, worst = [(0.0, 0.0)], 0.0
    for r in sorted(curve):
        worst = max(worst, curve[r])
        points.append((r, worst + eps * r))
    best = 0.0
    for (r0, l0), (r1, l1) in zip(points, points[1:]):
        if l1 <= threshold:
            best = r1
            continue
        if threshold > l0:
            best = r0 + (r1 - r0) * (threshold - l0) / (l1 - l0)
        break
    return min(best, max_ratio)


def _layer_flops(model: nn.Module, probe: tuple) -> dict[str, int]:
    """FLOPs of each Conv2d / Linear on ``probe`` (2 x multiply-adds, as ``FlopCounterMode`` counts them)."""
    counts: dict[str, int] = {}
    hooks = []
    for name, module in model.named_modules():
        if isinstance(module, (nn.Conv2d, nn.Linear)):
            def hook(mod, _inp, out, name=name):
                per_out = mod.in_features if isinstance(mod, nn.Linear) else \
                    mod.in_channels // mod.groups * mod.kernel_size[0] * mod.kernel_size[1]
                counts[name] = counts.get(name, 0) + 2 * out.numel() * per_out
            hooks.append(module.register_forward_hook(hook))
    try:
        flops(model, *probe)
    finally:
        for h in hooks:
            h.remove()
    return counts


def _estimator(model: nn.Module, probe: tuple, groups: list) -> Callable[[dict], float]:
    """Share of Conv / Linear FLOPs removed by ``{group: ratio}``, computed without pruning a copy."""
    per_layer = _layer_flops(model, probe)
    total = sum(per_layer.values()) or 1
    out_of = {p: g for g in groups for p in g.producers}
    in_of = {c: g for g in groups for c, kind, _ in g.consumers if kind != "bn"}

    def kept(group, ratios) -> float:
        r = ratios.get(group.name, 0.0) if group is not None else 0.0
        return max(1, int(round(group.channels * (1.0 - r)))) / group.channels if r else 1.0

    def removed(ratios: dict) -> float:
        left = sum(f * kept(out_of.get(n), ratios) * kept(in_of.get(n), ratios) for n, f in per_layer.items())
        return 1.0 - left / total

    return removed


def prune_to_flops(model: nn.Module, target_ratio: float, sensitivities: SensitivityTable, *,
                   example_inputs: Any = None, input_spec: Any = None, max_ratio: float = 0.9,
                   return_ratios: bool = False):
    """Prunes each analysed layer as far as a common loss threshold allows, until FLOPs drop by ``target_ratio``.

    The threshold is found by bisection, so the least sensitive layers lose the most filters
    (PaddleSlim's ``get_ratios_by_loss`` searched against a FLOPs target).

    Args:
        model: the network (not modified).
        target_ratio: share of FLOPs to remove, in (0, 1).
        sensitivities: the table from :func:`sensitivity`.
        example_inputs / input_spec: inputs the model accepts.
        max_ratio: no layer loses more than this share of its filters, in (0, 1].
        return_ratios: also return the ``{layer: ratio}`` chosen.

    Returns:
        The pruned copy (and the ratios when ``return_ratios``).

    Example:
        >>> small = prune_to_flops(net, 0.5, table, example_inputs=x)  # doctest: +SKIP
    """
    check_float_model(model)
    target = check_ratio("target_ratio", target_ratio)
    if isinstance(max_ratio, bool) or not isinstance(max_ratio, (int, float)) or not 0.0 < max_ratio <= 1.0:
        raise ValueError(bad_argument("max_ratio", max_ratio, "a share in (0, 1], the most any layer may lose",
                                      "pass e.g. max_ratio=0.9"))
    if not isinstance(sensitivities, SensitivityTable) or sensitivities.kind != "prune" or not len(sensitivities):
        raise TypeError(bad_argument("sensitivities", type(sensitivities).__name__,
                                     "a non-empty SensitivityTable from sampan.pruning.sensitivity(...)"))
    inputs = _example_inputs(model, example_inputs, input_spec, what="FLOPs counting")
    probe = tuple(t[:1] for t in inputs)
    all_groups = analyse(model, inputs, set(), ())
    estimate = _estimator(model, probe, all_groups)

    def attempt(threshold: float):
        ratios = {k: _ratio_at(c, threshold, max_ratio, eps) for k, c in sensitivities.losses.items()}
        ratios = {k: r for k, r in ratios.items() if r > 0.0}
        return ratios, estimate(ratios)

    top = max(max(max(c.values()) for c in sensitivities.losses.values()), 0.0)
    eps = 1e-3 * max(top, 1e-3)
    high = top + eps + 1e-12
    best = attempt(high)
    if best[1] < target:
        raise ValueError(bad_argument("target_ratio", target_ratio,
                                      f"at most {best[1]:.3f}, the FLOPs share removed when every analysed layer "
                                      f"loses {max_ratio:g} of its filters",
                                      "lower target_ratio, raise max_ratio or analyse more layers"))
    low = 0.0
    for _ in range(60):
        if best[1] <= target + 0.005:
            break
        mid = (low + high) / 2
        candidate = attempt(mid)
        if candidate[1] >= target:
            high, best = mid, candidate
        else:
            low = mid
    pruned = prune_structured(model, best[0], inputs, all_groups=all_groups) if best[0] else model
    return (pruned, best[0]) if return_ratios else pruned
