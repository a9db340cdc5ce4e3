"""Parameters and FLOPs of a network, counted in one place (``sampan.summary``, ``sampan.pruning.flops``
and the run recorder all call these, so they agree, quantized models included).

FLOPs come from ``torch.utils.flop_counter.FlopCounterMode`` (a multiply-add counts as two, as torch
counts them); parameters include the int8 weight buffers of quantized layers, which hold what were
parameters before quantization.

Example:
    >>> import torch
    >>> from sampan.utils.flops import count_params, flops
    >>> net = torch.nn.Linear(4, 2)
    >>> count_params(net), flops(net, torch.randn(1, 4))
    (10, 16)
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from sampan.utils.modes import eval_mode


def _check_model(model: Any) -> None:
    """A network instance, or a TypeError naming ``model`` (the class, ``nn.Linear``, is a learner's slip)."""
    if isinstance(model, nn.Module):
        return
    from sampan.errors import bad_argument

    fix = (f"create the network first: {model.__name__}(...), an instance, not the class"
           if isinstance(model, type) else "pass the network, e.g. flops(net, torch.randn(1, 1, 28, 28))")
    raise TypeError(bad_argument("model", model, "a torch.nn.Module", fix))


def _weights(model: nn.Module, recurse: bool = True) -> list[torch.Tensor]:
    return (list(model.parameters(recurse=recurse))
            + [b for b in model.buffers(recurse=recurse) if b.dtype in (torch.int8, torch.qint8)])


def count_params(model: nn.Module, *, nonzero: bool = False, trainable: bool = False,
                 recurse: bool = True) -> int:
    """Number of parameters; int8 weight buffers of quantized layers count too.

    Args:
        model: the network.
        nonzero: count only non-zero entries (what unstructured pruning reduces).
        trainable: count only parameters with ``requires_grad`` (buffers are never trainable).
        recurse: include submodules (False: the module's own parameters, as a per-layer table shows).

    Example:
        >>> import torch
        >>> from sampan.utils.flops import count_params
        >>> count_params(torch.nn.Linear(4, 2))
        10
    """
    _check_model(model)
    tensors = ([p for p in model.parameters(recurse=recurse) if p.requires_grad] if trainable
               else _weights(model, recurse))
    if nonzero:
        return int(sum(int(torch.count_nonzero(t)) for t in tensors))
    return int(sum(t.numel() for t in tensors))


def count_flops(run: Callable[[], Any]) -> tuple[int, dict[str, int]]:
    """FLOPs of whatever ``run()`` computes: ``(total, {module name: flops})``.

    Example:
        >>> import torch
        >>> from sampan.utils.flops import count_flops
        >>> net = torch.nn.Linear(4, 2)
        >>> count_flops(lambda: net(torch.randn(1, 4)))[0]
        16
    """
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        run()
    per_module = {name: int(sum(c.values())) for name, c in counter.get_flop_counts().items()}
    return int(counter.get_total_flops()), per_module


def flops(model: nn.Module, *inputs: Any) -> int:
    """FLOPs of one forward pass of ``model`` (in eval mode) on ``inputs``.

    Example:
        >>> import torch
        >>> from sampan.utils.flops import flops
        >>> flops(torch.nn.Linear(4, 2), torch.randn(1, 4))
        16
    """
    _check_model(model)
    with eval_mode(model):
        return count_flops(lambda: model(*inputs))[0]
