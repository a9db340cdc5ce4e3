"""Networks for the jit tests."""
from __future__ import annotations

import torch
from torch import nn

from sampan import InputSpec


def lenet() -> nn.Module:
    from sampan.vision.models import LeNet

    torch.manual_seed(0)
    return LeNet(num_classes=10).eval()


class DataDependent(nn.Module):
    """Branches on a tensor's value: torch.compile cannot make one graph of it."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        y = self.linear(x)
        if y.sum() > 0:  # data-dependent control flow
            return y * 2
        return y - 1


class ExportsDifferently(nn.Module):
    """Takes another path while being exported: the export checks must catch it."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x):
        y = self.linear(x)
        if torch.compiler.is_exporting():
            return y + 1.0
        return y


IMAGE = InputSpec([None, 1, 28, 28], "float32", "image")
