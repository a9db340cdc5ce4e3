import pytest
import torch
from torch import nn


class Tagger(nn.Module):
    """Linear -> LSTM -> GRU -> Linear: every layer type quantize_dynamic handles."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(16, 64)
        self.lstm = nn.LSTM(64, 96, batch_first=True)
        self.gru = nn.GRU(96, 64, batch_first=True, bidirectional=True)
        self.head = nn.Linear(128, 5)

    def forward(self, x):
        h, _ = self.lstm(self.embed(x))
        h, _ = self.gru(h)
        return self.head(h[:, -1])


@pytest.fixture
def tagger():
    torch.manual_seed(0)
    return Tagger().eval()


@pytest.fixture
def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).eval()


@pytest.fixture
def lenet():
    from sampan.vision.models import LeNet
    torch.manual_seed(0)
    return LeNet(num_classes=10).eval()
