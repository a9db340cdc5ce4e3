"""LeNet and a model that exports differently, for the ONNX tests."""
from __future__ import annotations

import torch
from torch import nn


def lenet() -> nn.Module:
    from sampan.vision.models import LeNet

    torch.manual_seed(0)
    return LeNet(num_classes=10).eval()


class ExportsDifferently(nn.Module):
    """Takes another path while being exported: the ONNX Runtime check must catch it."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x):
        y = self.linear(x)
        if torch.compiler.is_exporting():
            return y + 1.0
        return y
