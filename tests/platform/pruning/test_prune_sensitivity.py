import pytest
import torch
from torch import nn

from sampan.pruning import SensitivityTable, flops, prune_to_flops, sensitivity


@pytest.fixture
def planted():
    """A teacher MLP where half of layer `0`'s neurons are dead: pruning up to half of them costs nothing."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3)).eval()
    with torch.no_grad():
        net[0].weight[8:] = 0
        net[0].bias[8:] = -1.0  # dead after ReLU
    x = torch.randn(256, 8)
    labels = net(x).argmax(1)
    return net, x, labels


def _accuracy(x, labels):
    def eval_fn(model):
        with torch.no_grad():
            return float((model(x).argmax(1) == labels).float().mean())
    return eval_fn


def test_sensitivity_table_finds_the_free_half(planted):
    net, x, labels = planted
    table = sensitivity(net, _accuracy(x, labels), ratios=(0.5, 0.9), example_inputs=x[:1])
    assert table.baseline == 1.0
    assert list(table) == ["0", "2"]
    assert table["0"][0.5] == 0.0           # the dead neurons go first
    assert table["0"][0.9] > 0.0
    assert set(table["2"]) == {0.5, 0.9}
    md = table.to_markdown()
    assert md.splitlines()[0] == "| layer | 0.5 | 0.9 |" and "| 0 | 0.0000 |" in md
    fig = table.plot()
    assert len(fig.axes[0].lines) == 2
    assert list(table.to_dataframe().columns) == [0.5, 0.9]


def test_prune_to_flops_uses_the_table_and_keeps_accuracy(planted):
    net, x, labels = planted
    eval_fn = _accuracy(x, labels)
    table = sensitivity(net, eval_fn, ratios=(0.25, 0.5, 0.75), example_inputs=x[:1])
    assert table["2"][0.25] > 0.05   # layer 2 has no dead neurons
    small, ratios = prune_to_flops(net, 0.4, table, example_inputs=x[:1], return_ratios=True)
    assert ratios["0"] >= 0.45 and ratios.get("2", 0.0) < 0.05  # the free layer pays for the FLOPs
    assert 1 - flops(small, x[:1]) / flops(net, x[:1]) >= 0.4
    assert eval_fn(small) == 1.0


@pytest.mark.parametrize("ratios", [(0.0, 0.5), (0.5, 1.0), ()])
def test_bad_ratios_are_refused(planted, ratios):
    net, x, labels = planted
    with pytest.raises(ValueError, match=r"ratios"):
        sensitivity(net, _accuracy(x, labels), ratios=ratios, example_inputs=x[:1])


def test_prune_to_flops_checks_its_arguments(planted):
    net, x, _ = planted
    table = SensitivityTable(1.0, {"0": {0.5: 0.0}})
    with pytest.raises(ValueError, match=r"Expected `target_ratio` to be a float strictly between 0 and 1"):
        prune_to_flops(net, 1.2, table, example_inputs=x[:1])
    with pytest.raises(ValueError, match=r"Expected `target_ratio` to be at most 0\.\d+"):
        prune_to_flops(net, 0.95, table, example_inputs=x[:1])
    with pytest.raises(TypeError, match=r"sensitivities"):
        prune_to_flops(net, 0.5, {"0": {0.5: 0.0}}, example_inputs=x[:1])
    with pytest.raises(ValueError, match=r"Expected `layers` to be one of the prunable layers"):
        sensitivity(net, lambda m: 1.0, ratios=(0.5,), example_inputs=x[:1], layers=["4"])


def test_sensitivity_with_nothing_prunable_raises_like_prune():
    from sampan.pruning import StructureError, prune
    net, x = nn.Sequential(nn.Flatten(), nn.Linear(64, 10)), torch.randn(2, 1, 8, 8)
    expected = r"no layer can lose filters \({'1': \"it is \(part of\) the model's output\"}\)"
    with pytest.raises(StructureError, match=expected):
        sensitivity(net, lambda m: 1.0, example_inputs=x)
    with pytest.raises(StructureError, match=expected):
        prune(net, 0.5, structured=True, example_inputs=x)


def test_sensitivity_covers_the_layers_before_a_log_softmax_output():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(16, 8), nn.Linear(8, 3)

        def forward(self, x):
            return nn.functional.log_softmax(self.fc2(torch.relu(self.fc1(x))), dim=1)

    table = sensitivity(Net(), lambda m: 1.0, ratios=(0.5,), example_inputs=torch.randn(2, 16), skip=["fc2"])
    assert table.losses == {"fc1": {0.5: 0.0}}


@pytest.mark.parametrize("max_ratio", [0, 0.0, -0.5, 1.5, 2.0, True, "0.5"])
def test_prune_to_flops_refuses_a_max_ratio_outside_zero_one(planted, max_ratio):
    net, x, _ = planted
    table = SensitivityTable(1.0, {"0": {0.5: 0.0}})
    with pytest.raises(ValueError, match=r"Expected `max_ratio` to be a share in \(0, 1\]"):
        prune_to_flops(net, 0.1, table, example_inputs=x[:1], max_ratio=max_ratio)
