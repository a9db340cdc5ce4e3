"""Parameters and FLOPs of a network (FLOPs from ``torch.utils.flop_counter.FlopCounterMode``)."""
from __future__ import annotations

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode


def count_params(model: nn.Module, *, nonzero: bool = False) -> int:
    """Number of parameters; int8 weight buffers of quantized layers count too.

    Args:
        model: the network.
        nonzero: count only non-zero entries (what unstructured pruning reduces).

    Example:
        >>> count_params(torch.nn.Linear(4, 2))
        10
    """
    tensors = list(model.parameters()) + [b for b in model.buffers() if b.dtype == torch.int8]
    if nonzero:
        return int(sum(int(torch.count_nonzero(t)) for t in tensors))
    return int(sum(t.numel() for t in tensors))


def flops(model: nn.Module, *inputs: torch.Tensor) -> int:
    """FLOPs of one forward pass on ``inputs`` (a multiply-add counts as two, as torch counts them).

    Example:
        >>> flops(torch.nn.Linear(4, 2), torch.randn(1, 4))
        16
    """
    counter = FlopCounterMode(display=False)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), counter:
            model(*inputs)
    finally:
        model.train(was_training)
    return int(counter.get_total_flops())
