"""``eval_mode`` / ``train_mode``: switch a module's mode for a block and restore it afterwards.

The one home of "remember train mode, switch, restore" (``was_training = m.training ... finally:
m.train(was_training)``), which exports, quantization, pruning and FLOP counting all need.

Example:
    >>> from sampan.utils.modes import eval_mode
    >>> import torch
    >>> net = torch.nn.Dropout()
    >>> with eval_mode(net):
    ...     net.training
    False
    >>> net.training
    True
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch


@contextlib.contextmanager
def eval_mode(module: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """``module.eval()`` inside the block; its previous mode (train or eval) afterwards, even on error."""
    was_training = module.training
    module.eval()
    try:
        yield module
    finally:
        module.train(was_training)


@contextlib.contextmanager
def train_mode(module: torch.nn.Module, mode: bool = True) -> Iterator[torch.nn.Module]:
    """``module.train(mode)`` inside the block; its previous mode afterwards, even on error."""
    was_training = module.training
    module.train(mode)
    try:
        yield module
    finally:
        module.train(was_training)
