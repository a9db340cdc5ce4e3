"""A compression report: size on disk, parameters, FLOPs, CPU latency and a metric, before and after."""
from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import torch
from torch import nn

from sampan.utils.timing import interleaved
from sampan.errors import bad_argument
from sampan.pruning.flops import count_params, flops

COLUMNS = ["model", "size_mb", "size_x", "params", "flops", "flops_x", "latency_ms", "latency_x", "metric"]


def size_on_disk(model: Any) -> int:
    """Bytes of ``torch.save(model.state_dict())`` (or ``model.size_bytes()`` for an exported artefact)."""
    if hasattr(model, "size_bytes"):
        return int(model.size_bytes())
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.tell()


@dataclass
class CompressionReport:
    """Rows of figures, one per model; ``*_x`` columns are ratios to the first (reference) model."""

    rows: list[dict] = field(default_factory=list)

    def __getitem__(self, name: str) -> dict:
        for row in self.rows:
            if row["model"] == name:
                return row
        raise KeyError(name)

    def to_markdown(self) -> str:
        lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        for row in self.rows:
            cells = [f"{row[c]:.4g}" if isinstance(row.get(c), float) else str(row.get(c, "")) for c in COLUMNS]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def to_dataframe(self):
        import pandas as pd
        return pd.DataFrame(self.rows).set_index("model")

    def plot(self):
        """Bars of size, latency and FLOPs relative to the reference model; returns the figure."""
        from sampan.utils.imports import require
        plt = require("matplotlib.pyplot")
        fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
        names = [r["model"] for r in self.rows]
        for ax, key, title in zip(axes, ["size_x", "latency_x", "flops_x"], ["size", "CPU latency", "FLOPs"]):
            ax.bar(names, [r.get(key) or 0.0 for r in self.rows])
            ax.axhline(1.0, color="grey", lw=0.8)
            ax.set_title(f"{title} (x reference)")
            ax.tick_params(axis="x", rotation=30)
        fig.tight_layout()
        return fig


def compression_report(models: Mapping[str, Any], example_inputs: Any, eval_fn: Callable | None = None, *,
                       repeat: int = 20, warmup: int = 2) -> CompressionReport:
    """Measures every model side by side; the first one is the reference for the ratio columns.

    Args:
        models: ``{"fp32": net, "int8": qnet, "pruned": small}``; values are ``nn.Module`` or callables
            with ``size_bytes()`` (e.g. an ONNX Runtime artefact).
        example_inputs: a tensor or tuple used for FLOPs and latency.
        eval_fn: ``eval_fn(model) -> float`` (e.g. accuracy), recorded as ``metric``.
        repeat / warmup: timing repetitions (interleaved medians, see ``sampan.utils.timing``).

    Example:
        >>> report = compression_report({"fp32": net, "int8": qnet}, torch.randn(1, 64))  # doctest: +SKIP
        >>> print(report.to_markdown())  # doctest: +SKIP
    """
    if not models:
        raise ValueError(bad_argument("models", models, "a non-empty dict of name -> model"))
    inputs = (example_inputs,) if isinstance(example_inputs, torch.Tensor) else tuple(example_inputs)
    for m in models.values():
        if isinstance(m, nn.Module):
            m.eval()
    with torch.inference_mode():
        times = interleaved({k: (lambda m=m: m(*inputs)) for k, m in models.items()}, repeat=repeat, warmup=warmup)
    rows = []
    for name, m in models.items():
        row = {"model": name, "size_mb": size_on_disk(m) / 1e6, "latency_ms": times[name] * 1e3}
        if isinstance(m, nn.Module):
            row["params"] = count_params(m)
            row["flops"] = flops(m, *inputs)
        if eval_fn is not None:
            row["metric"] = float(eval_fn(m))
        rows.append(row)
    ref = rows[0]
    for row in rows:
        for key, base in (("size_x", "size_mb"), ("latency_x", "latency_ms"), ("flops_x", "flops")):
            if row.get(base) is not None and ref.get(base):
                row[key] = float(row[base]) / float(ref[base])
    return CompressionReport(rows)
