"""Splitting a batch into inputs and labels, moving it to the device, explaining a batch's errors."""
from __future__ import annotations

import inspect
from typing import Any, Sequence

import torch

from sampan.errors import first_line
from sampan.spec import InputSpec, dtype_name


def split_batch(batch: Any, n_inputs: int | None, n_labels: int | None, with_labels: bool,
                least_inputs: int = 1) -> tuple[list, list]:
    """``(x, y)`` -> ``([x], [y])``; a bare tensor is one input and no label.

    ``n_inputs`` comes from ``Model(inputs=[...])``, ``n_labels`` from ``labels=[...]``;
    without them the last item of a tuple is the label (when there is more than one item), unless the
    network needs it: ``least_inputs`` (its ``forward``'s required arguments, for ``predict``) are inputs.
    """
    if isinstance(batch, dict):
        raise TypeError(
            "Expected each batch to be a tensor or a tuple/list of tensors (inputs..., labels...). Received a "
            f"dict with keys {sorted(batch)}. HINT: return (inputs, label) tuples from the Dataset's __getitem__."
        )
    items = list(batch) if isinstance(batch, (tuple, list)) else [batch]
    if n_inputs is None:
        n_lab = n_labels if n_labels is not None else (1 if len(items) > 1 else 0)
        n_inputs = min(len(items), max(len(items) - n_lab, least_inputs))
    inputs, labels = items[:n_inputs], items[n_inputs:]
    if with_labels and n_labels is not None and len(labels) != n_labels:
        raise ValueError(
            f"Expected each batch to hold {n_inputs} input(s) and {n_labels} label(s). Received a batch of "
            f"{len(items)} item(s). HINT: make the Dataset return (inputs..., labels...) or fix Model(inputs=, labels=)."
        )
    return inputs, labels


def required_inputs(network: torch.nn.Module) -> int:
    """How many positional arguments ``network.forward`` requires (1 when its signature cannot be read), as
    Paddle reads a network's inputs from ``forward``'s signature when ``Model(inputs=None)``."""
    try:
        parameters = inspect.signature(network.forward).parameters.values()
    except (TypeError, ValueError):
        return 1
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return max(1, sum(1 for p in parameters if p.kind in positional and p.default is inspect.Parameter.empty))


def to_device(items: Sequence[Any], device: torch.device) -> list:
    return [t.to(device, non_blocking=True) if isinstance(t, torch.Tensor) else t for t in items]


def describe(items: Sequence[Any]) -> str:
    parts = []
    for t in items:
        if isinstance(t, torch.Tensor):
            parts.append(f"{list(t.shape)} {dtype_name(t.dtype)}")
        else:
            parts.append(type(t).__name__)
    return "[" + ", ".join(parts) + "]"


def check_specs(specs: list[InputSpec] | None, items: Sequence[Any], what: str) -> None:
    if specs is None:
        return
    if len(specs) != len(items):
        raise ValueError(
            f"Expected {len(specs)} {what} (one per InputSpec: {[s.name for s in specs]}). Received {len(items)}: "
            f"{describe(items)}. HINT: make the Dataset return them in this order, or fix Model({what}=...)."
        )
    for i, (spec, item) in enumerate(zip(specs, items)):
        spec.check(item, where=f"{what}[{i}]")


_ELEMENTWISE = (torch.nn.MSELoss, torch.nn.L1Loss, torch.nn.SmoothL1Loss, torch.nn.HuberLoss)


def check_labels_for_loss(loss_fn: Any, outputs: Any, labels: Sequence[Any]) -> None:
    """Catches the commonest label mistakes before torch's terse message (float class indices) or a silent
    wrong loss (regression labels that broadcast against the outputs)."""
    if not labels:
        return
    out = outputs[0] if isinstance(outputs, (tuple, list)) else outputs
    y = labels[0]
    if isinstance(loss_fn, _ELEMENTWISE):
        _check_same_shape(loss_fn, out, y)
        return
    if not isinstance(loss_fn, (torch.nn.CrossEntropyLoss, torch.nn.NLLLoss)):
        return
    if isinstance(y, torch.Tensor) and isinstance(out, torch.Tensor) and y.is_floating_point() and y.ndim == out.ndim - 1:
        raise ValueError(
            f"Expected `labels` to be int64 class indices for {type(loss_fn).__name__}. Received: labels of dtype "
            f"{dtype_name(y.dtype)} with shape {list(y.shape)}. HINT: return torch.long labels from the Dataset "
            f"(e.g. torch.tensor(label, dtype=torch.long)) or convert with y.long()."
        )
    if (isinstance(y, torch.Tensor) and isinstance(out, torch.Tensor) and not y.is_floating_point()
            and y.ndim == out.ndim >= 2 and y.shape[-1] == 1 and out.shape[-1] > 1):  # Paddle's [N, 1] labels
        raise ValueError(
            f"Expected `labels` of shape [N] (one class index per sample) for torch's {type(loss_fn).__name__}. "
            f"Received: labels of shape {list(y.shape)}, Paddle's [N, 1] layout. HINT: return a scalar label per "
            f"sample from the Dataset (int(label) rather than [label]) or use y.squeeze(-1); see "
            f"docs/MIGRATING_FROM_PADDLE.md (Labels)."
        )


def _check_same_shape(loss_fn: Any, out: Any, y: Any) -> None:
    """Outputs ``[N, 1]`` and labels ``[N]`` broadcast to an ``[N, N]`` loss: it trains, on the wrong number."""
    if not isinstance(y, torch.Tensor) or not isinstance(out, torch.Tensor) or y.shape == out.shape:
        return
    try:
        spread = torch.Size(torch.broadcast_shapes(out.shape, y.shape))
    except RuntimeError:
        return  # torch refuses it itself, and explain_failure words that
    if spread.numel() <= max(out.numel(), y.numel()):
        return
    fix = ("return labels shaped like the outputs from the Dataset (e.g. y.unsqueeze(-1) or "
           "torch.tensor([value])), or reshape the outputs with out.squeeze(-1)")
    raise ValueError(
        f"Expected `labels` of the outputs' shape {list(out.shape)} for {type(loss_fn).__name__}. Received: labels "
        f"of shape {list(y.shape)}, which broadcast against the outputs to {list(spread)}: "
        f"every output would be compared with every label. HINT: {fix}."
    )


def explain_failure(exc: Exception, stage: str, inputs: Sequence[Any], labels: Sequence[Any],
                    step: int = 0) -> ValueError:
    """Wraps an error of a batch's forward pass or loss with the batch's shapes and a hint."""
    hint = ("check that the Dataset's items match what the network expects (shape, channels, dtype), "
            "or pass Model(inputs=[sampan.InputSpec(...)]) to have batches checked up front")
    if stage == "loss":
        hint = ("check that the labels match what the loss expects (class indices as int64 for cross-entropy, "
                "each in [0, number of classes))")
    which = "the first batch" if step == 0 else f"batch {step}"
    return ValueError(
        f"The {stage} failed on {which}: inputs {describe(inputs)}, labels {describe(labels)}. "
        f"torch said: {first_line(exc)}. HINT: {hint}."
    )
