import pytest
import torch
from torch import nn


class SmallMLP(nn.Sequential):
    def __init__(self):
        super().__init__(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 48), nn.ReLU(), nn.Linear(48, 10))


@pytest.fixture
def mlp():
    torch.manual_seed(0)
    return SmallMLP().eval()


@pytest.fixture
def lenet():
    from sampan.vision.models import LeNet
    torch.manual_seed(0)
    return LeNet(num_classes=10).eval()
