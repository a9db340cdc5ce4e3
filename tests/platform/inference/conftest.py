"""LeNet exported once as pt2 and ONNX (one prefix) for the predictor tests."""
from __future__ import annotations

import pytest
import torch

from sampan import InputSpec

IMAGE = InputSpec([None, 1, 28, 28], "float32", "image")


def lenet():
    from sampan.vision.models import LeNet

    torch.manual_seed(0)
    return LeNet(num_classes=10).eval()


@pytest.fixture(scope="module")
def exported_lenet(tmp_path_factory):
    import sampan

    net = lenet()
    prefix = tmp_path_factory.mktemp("lenet") / "lenet"
    sampan.jit.save(net, prefix, input_spec=[IMAGE], output_names=["logits"])
    sampan.onnx.export(net, prefix, input_spec=[IMAGE], output_names=["logits"])
    return net, prefix
