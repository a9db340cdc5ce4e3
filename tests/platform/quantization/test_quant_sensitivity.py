import pytest
import torch
from torch import nn

from sampan.quantization import quantize_dynamic, sensitivity


@pytest.fixture
def planted():
    """Layer `2` has one huge weight per row: its per-channel int8 scale flattens the other weights to 0."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8)).eval()
    with torch.no_grad():
        net[2].weight[:, 0] = 200.0
        net[0].weight[0] = 0.0
        net[0].bias[0] = 0.0     # ... and the input that weight reads is always zero
    x = torch.randn(512, 16)
    labels = net(x).argmax(1)

    def accuracy(model):
        with torch.no_grad():
            return float((model(x).argmax(1) == labels).float().mean())
    return net, x, accuracy


def test_dynamic_sensitivity_ranks_the_planted_layer_first_and_skipping_it_helps(planted):
    net, _, accuracy = planted
    table = sensitivity(net, accuracy)
    assert list(table) == ["0", "2", "4"] and table.kind == "quantize"
    assert table.ranked()[0][0] == "2"
    assert table["2"]["int8"] > 0.2 and table["0"]["int8"] < 0.05
    assert accuracy(quantize_dynamic(net)) < 0.8
    assert accuracy(quantize_dynamic(net, skip=["2"])) > 0.95
    assert "| layer | int8 |" in table.to_markdown()
    fig = table.plot()
    assert len(fig.axes[0].patches) == 3


def test_static_sensitivity_on_chosen_layers(lenet):
    x = torch.rand(64, 1, 28, 28)
    labels = lenet(x).argmax(1)

    def accuracy(model):
        with torch.no_grad():
            return float((model(x).argmax(1) == labels).float().mean())
    table = sensitivity(lenet, accuracy, method="static", calib_data=x.split(16), example_inputs=x[:2],
                        layers=["features.0", "fc.2"])
    assert list(table) == ["features.0", "fc.2"]
    assert all(0.0 <= v["int8"] <= 0.2 for v in table.losses.values())


def test_sensitivity_arguments_are_checked(planted, lenet):
    net, _, accuracy = planted
    with pytest.raises(ValueError, match=r"Expected `method` to be 'dynamic' or 'static'"):
        sensitivity(net, accuracy, method="int4")
    with pytest.raises(ValueError, match=r"Expected `layers` to be a layer name of the model.*'9'"):
        sensitivity(net, accuracy, layers=["9"])
    with pytest.raises(ValueError, match=r"Expected `calib_data` to be calibration batches"):
        sensitivity(lenet, lambda m: 1.0, method="static")


def test_static_sensitivity_reads_an_iterator_once_for_every_layer(lenet):
    x = torch.rand(8, 1, 28, 28)
    ref = lenet(x).detach()

    def closeness(model):
        with torch.no_grad():
            return -float((model(x) - ref).abs().max())
    layers = ["features.0", "fc.0"]
    from_list = sensitivity(lenet, closeness, method="static", calib_data=[x, x], example_inputs=x[:2], layers=layers)
    read = []
    batches = (read.append(i) or x for i in range(5))  # a generator: it can be read only once
    from_iter = sensitivity(lenet, closeness, method="static", calib_data=batches, example_inputs=x[:2],
                            layers=layers, calibration_batches=2)
    assert read == [0, 1]
    int8 = {k: v["int8"] for k, v in from_list.losses.items()}
    assert {k: v["int8"] for k, v in from_iter.losses.items()} == pytest.approx(int8)
    assert from_iter["fc.0"]["int8"] < 0.05  # an uncalibrated layer (no batch left) loses far more


def test_static_sensitivity_refuses_empty_calibration_data(lenet):
    for empty in ([], iter([])):
        with pytest.raises(ValueError, match=r"Expected `calib_data` to be at least one calibration batch"):
            sensitivity(lenet, lambda m: 1.0, method="static", calib_data=empty,
                        example_inputs=torch.rand(2, 1, 28, 28))
    with pytest.raises(ValueError, match=r"Expected `calibration_batches` to be an int >= 1"):
        sensitivity(lenet, lambda m: 1.0, method="static", calib_data=[torch.rand(2, 1, 28, 28)],
                    calibration_batches=0)
