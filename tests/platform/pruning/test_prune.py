import pytest
import torch
from torch import nn

from sampan.pruning import SensitivityTable, StructureError, count_params, flops, prune, prune_to_flops


def test_mlp_structured_halves_hidden_neurons_and_keeps_the_output(mlp):
    x = torch.randn(4, 32)
    small = prune(mlp, 0.5, structured=True, example_inputs=x)
    widths = [small[0].out_features, small[2].in_features, small[2].out_features, small[4].in_features]
    assert widths == [32, 32, 24, 24]
    assert small[4].out_features == 10 and small(x).shape == (4, 10)
    assert count_params(small) == 32 * 32 + 32 + 32 * 24 + 24 + 24 * 10 + 10
    assert flops(small, x) == 2 * 4 * (32 * 32 + 32 * 24 + 24 * 10)
    assert mlp[0].out_features == 64  # the original is untouched


def test_structured_keeps_the_filters_with_the_largest_l1_norm(mlp):
    with torch.no_grad():
        mlp[0].weight[::2] *= 0.01  # even neurons are nearly zero
    small = prune(mlp, 0.5, structured=True, example_inputs=torch.randn(1, 32), skip=["2"])
    torch.testing.assert_close(small[0].weight, mlp[0].weight[1::2])
    torch.testing.assert_close(small[2].weight, mlp[2].weight[:, 1::2])
    assert small[2].out_features == 48  # skipped layer keeps its neurons


def test_lenet_structured_rebuilds_conv_and_the_flattened_linear(lenet):
    x = torch.randn(2, 1, 28, 28)
    small = prune(lenet, 0.5, structured=True, example_inputs=x)
    f = small.features
    assert (f[0].out_channels, f[3].in_channels, f[3].out_channels) == (3, 3, 8)
    assert small.fc[0].in_features == 8 * 5 * 5 and small.fc[0].out_features == 60
    assert small.fc[2].out_features == 10 and small(x).shape == (2, 10)
    assert count_params(small) < 0.3 * count_params(lenet)


def test_resnet_residual_channels_are_pruned_together():
    from sampan.vision.models import resnet18
    torch.manual_seed(0)
    net = resnet18(num_classes=10).eval()
    x = torch.randn(1, 3, 32, 32)
    small = prune(net, 0.5, structured=True, example_inputs=x)
    assert small.conv1.out_channels == small.layer1[0].conv2.out_channels == small.layer1[1].conv2.out_channels == 32
    assert small.bn1.num_features == 32 and small.layer1[0].conv1.in_channels == 32
    assert small.layer2[0].downsample[0].out_channels == small.layer2[0].conv2.out_channels == 64
    assert small.fc.in_features == 256 and small.fc.out_features == 10
    assert small(x).shape == (1, 10)
    assert 1 - count_params(small) / count_params(net) > 0.7
    assert 1 - flops(small, x) / flops(net, x) > 0.7


def _flat_table(net, x):
    from sampan.pruning._graph import analyse
    names = [g.name for g in analyse(net, (x,), set(), ()) if not g.blocked]
    return SensitivityTable(1.0, {n: {0.5: 0.0, 0.9: 0.0} for n in names})


@pytest.mark.parametrize("target", [0.3, 0.5])
def test_prune_to_flops_reaches_the_requested_share_on_mlp_lenet_resnet(mlp, lenet, target):
    from sampan.vision.models import resnet18
    torch.manual_seed(0)
    cases = [(mlp, torch.randn(1, 32)), (lenet, torch.randn(1, 1, 28, 28)),
             (resnet18(num_classes=10).eval(), torch.randn(1, 3, 32, 32))]
    for net, x in cases[: 3 if target == 0.5 else 2]:
        small = prune_to_flops(net, target, _flat_table(net, x), example_inputs=x)
        removed_flops = 1 - flops(small, x) / flops(net, x)
        removed_params = 1 - count_params(small) / count_params(net)
        assert target <= removed_flops <= target + 0.06, (type(net).__name__, removed_flops)
        assert removed_params >= 0.8 * target, (type(net).__name__, removed_params)
        assert small(x).shape == net(x).shape


def test_prune_to_flops_prunes_the_least_sensitive_layer_most(mlp):
    x = torch.randn(1, 32)
    table = SensitivityTable(0.9, {"0": {0.3: 0.30, 0.6: 0.50}, "2": {0.3: 0.0, 0.6: 0.01}})
    _, ratios = prune_to_flops(mlp, 0.3, table, example_inputs=x, return_ratios=True)
    assert ratios["2"] > ratios.get("0", 0.0)


def test_unstructured_zeroes_the_share_in_every_layer_but_the_skipped(mlp):
    sparse = prune(mlp, 0.75, skip=["4"])
    for i in (0, 2):
        zeros = float((sparse[i].weight == 0).float().mean())
        assert zeros == pytest.approx(0.75, abs=0.01)
        assert sparse[i].weight.shape == mlp[i].weight.shape
    assert int((sparse[4].weight == 0).sum()) == 0
    assert count_params(sparse, nonzero=True) < 0.4 * count_params(mlp)


@pytest.mark.parametrize("amount", [0, 1, 1.5, -0.1, "half", True])
def test_ratio_outside_zero_one_is_refused(mlp, amount):
    with pytest.raises(ValueError, match=r"Expected `amount` to be a float strictly between 0 and 1"):
        prune(mlp, amount, structured=True, example_inputs=torch.randn(1, 32))
    with pytest.raises(ValueError, match=r"amount"):
        prune(mlp, amount)


def test_unknown_layer_names_are_refused(mlp):
    with pytest.raises(ValueError, match=r"Expected `skip` to be a layer name.*Received: skip='fc9'"):
        prune(mlp, 0.5, skip=["fc9"])
    with pytest.raises(ValueError, match=r"Expected `amount` to be layer names among the prunable layers"):
        prune(mlp, {"fc9": 0.5}, structured=True, example_inputs=torch.randn(1, 32))
    with pytest.raises(StructureError, match=r"Cannot prune `4` structurally: it is \(part of\) the model's output"):
        prune(mlp, {"4": 0.5}, structured=True, example_inputs=torch.randn(1, 32))


def test_structured_needs_example_inputs(mlp):
    with pytest.raises(ValueError, match=r"example_inputs.*HINT: pass example_inputs="):
        prune(mlp, 0.5, structured=True)


class _Concat(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.head = nn.Conv2d(3, 8, 3), nn.Conv2d(3, 8, 3), nn.Conv2d(16, 4, 1)

    def forward(self, x):
        return self.head(torch.cat([self.a(x), self.b(x)], 1))


class _Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x) if x.sum() > 0 else -self.fc(x)


def test_models_it_cannot_prune_get_an_error_naming_what():
    x = torch.randn(1, 3, 8, 8)
    with pytest.raises(StructureError, match=r"no layer can lose filters \(\{'a': '`cat` \(fx node `cat`\) reads "
                                             r"its output channels.*HINT: use structured=False"):
        prune(_Concat(), 0.5, structured=True, example_inputs=x)
    with pytest.raises(StructureError, match=r"Cannot prune `b` structurally: `cat`.*HINT: leave it out of `amount`"):
        prune(_Concat(), {"b": 0.5}, structured=True, example_inputs=x)
    depthwise = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Conv2d(8, 8, 3, groups=8), nn.Conv2d(8, 2, 1))
    with pytest.raises(StructureError, match=r"`1` is a grouped or depthwise convolution \(groups=8\)"):
        prune(depthwise, 0.5, structured=True, example_inputs=x)
    with pytest.raises(StructureError, match=r"torch.fx could not trace it.*HINT: use structured=False"):
        prune(_Branchy(), 0.5, structured=True, example_inputs=torch.randn(1, 4))
    with pytest.raises(StructureError, match=r"no layer can lose filters \(it is a single layer, the model's output"):
        prune(nn.Linear(4, 2), 0.5, structured=True, example_inputs=torch.randn(1, 4))


def test_pruned_lenet_exports_and_runs_in_the_predictor(lenet, tmp_path):
    import sampan
    small = prune(lenet, 0.5, structured=True, example_inputs=torch.randn(1, 1, 28, 28))
    spec = [sampan.InputSpec([None, 1, 28, 28], name="image")]
    sampan.jit.save(small, tmp_path / "lenet", input_spec=spec)
    predictor = sampan.inference.create_predictor(sampan.inference.Config(tmp_path / "lenet"))
    x = torch.randn(3, 1, 28, 28)
    out = predictor.run([x.numpy()])[0]
    torch.testing.assert_close(torch.from_numpy(out), small(x).detach(), rtol=1e-4, atol=1e-4)


def test_skip_by_type_keeps_every_layer_of_that_type(lenet):
    sparse = prune(lenet, 0.5, skip=[nn.Linear])
    assert all(int((m.weight == 0).sum()) == 0 for m in sparse.fc)
    assert float((sparse.features[3].weight == 0).float().mean()) == pytest.approx(0.5, abs=0.01)


class _ViewNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn, self.fc = nn.Conv2d(1, 8, 3), nn.BatchNorm2d(8), nn.Linear(8 * 6 * 6, 4)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc(x.view(x.shape[0], -1))


def test_batchnorm_and_a_view_flatten_are_rebuilt_with_the_conv():
    torch.manual_seed(0)
    net = _ViewNet().eval()
    x = torch.randn(2, 1, 8, 8)
    small = prune(net, 0.5, structured=True, example_inputs=x)
    assert (small.conv.out_channels, small.bn.num_features, small.fc.in_features) == (4, 4, 4 * 36)
    keep = torch.topk(net.conv.weight.abs().sum((1, 2, 3)), 4).indices.sort().values
    torch.testing.assert_close(small.bn.running_var, net.bn.running_var[keep])
    # the kept channels compute exactly what they computed before
    full = torch.relu(net.bn(net.conv(x)))[:, keep]
    torch.testing.assert_close(torch.relu(small.bn(small.conv(x))), full)


class _LogSoftmaxMLP(nn.Module):
    """The classic MNIST example: the output layer goes through log_softmax."""

    def __init__(self, tail: str = "log_softmax"):
        super().__init__()
        self.tail = tail
        self.fc1, self.fc2, self.fc3 = nn.Linear(16, 12), nn.Linear(12, 8), nn.Linear(8, 4)

    def forward(self, x):
        out = self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x.flatten(1))))))
        if self.tail == "log_softmax":
            return nn.functional.log_softmax(out, dim=1)
        return out.mean(1) if self.tail == "mean" else out * 2


@pytest.mark.parametrize("tail", ["log_softmax", "mean", "times_two"])
def test_an_op_after_the_output_layer_blocks_only_that_layer(tail):
    torch.manual_seed(0)
    net, x = _LogSoftmaxMLP(tail).eval(), torch.randn(2, 1, 4, 4)
    for skip in ([], ["fc3"]):
        small = prune(net, 0.5, structured=True, example_inputs=x, skip=skip)
        assert (small.fc1.out_features, small.fc2.in_features, small.fc2.out_features) == (6, 6, 4)
        assert (small.fc3.in_features, small.fc3.out_features) == (4, 4)
        assert small(x).shape == net(x).shape
    with pytest.raises(StructureError, match=r"Cannot prune `fc3` structurally: .*\(fx node `\w+`\) reads its output"):
        prune(net, {"fc3": 0.5}, structured=True, example_inputs=x)


def test_an_op_in_the_middle_blocks_its_producer_and_prunes_the_rest():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.head = nn.Conv2d(3, 8, 1), nn.Conv2d(8, 8, 1), nn.Conv2d(8, 2, 1)

        def forward(self, x):
            return self.head(torch.relu(self.b(self.a(x) * 2)))

    small = prune(Scaled(), 0.5, structured=True, example_inputs=torch.randn(1, 3, 4, 4))
    assert (small.a.out_channels, small.b.in_channels, small.b.out_channels, small.head.in_channels) == (8, 8, 4, 4)


class _FlattenKeyword(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.fc1, self.fc2 = nn.Conv2d(1, 8, 3), nn.Linear(8 * 6 * 6, 16), nn.Linear(16, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(torch.relu(self.conv(x)).flatten(start_dim=1))))


def test_flatten_with_start_dim_as_keyword_is_followed():
    small = prune(_FlattenKeyword(), 0.5, structured=True, example_inputs=torch.randn(2, 1, 8, 8))
    assert (small.conv.out_channels, small.fc1.in_features, small.fc1.out_features) == (4, 4 * 36, 8)


def test_batchnorm_without_running_stats_is_rebuilt():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8, track_running_stats=False), nn.ReLU(),
                        nn.Conv2d(8, 4, 3))
    x = torch.randn(2, 3, 8, 8)
    small = prune(net, 0.5, structured=True, example_inputs=x)
    assert (small[0].out_channels, small[1].num_features, small[1].weight.shape[0], small[3].in_channels) == (4,) * 4
    assert small[1].running_mean is None and small(x).shape == (2, 4, 4, 4)


def test_a_pool_over_the_channel_axis_blocks_the_layer():
    # a 1-D pool of a Linear's [N, C] output pools the features themselves (unbatched [C, L] to torch)
    net = nn.Sequential(nn.Linear(8, 16), nn.MaxPool1d(2), nn.Linear(8, 4))
    with pytest.raises(StructureError, match=r"'0': 'layer `1` \(MaxPool1d\) pooling the channel axis"):
        prune(net, 0.5, structured=True, example_inputs=torch.randn(2, 8))
    # over the length of a [N, L, C] output (channels last) it still pools the channel axis
    net = nn.Sequential(nn.Linear(8, 16), nn.AdaptiveAvgPool1d(4), nn.Linear(4, 4), nn.Linear(4, 2))
    small = prune(net, 0.5, structured=True, example_inputs=torch.randn(2, 3, 8))
    assert (small[0].out_features, small[2].out_features, small[3].in_features) == (16, 2, 2)


class _Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.h = nn.Conv2d(3, 8, 1), nn.Conv2d(8, 8, 1), nn.Conv2d(8, 2, 1)

    def forward(self, x):
        y = self.a(x)
        return self.h(y + self.b(y))


def test_different_shares_for_layers_of_one_residual_group_are_refused():
    x = torch.randn(1, 3, 4, 4)
    with pytest.raises(ValueError, match=r"Expected `amount` to be one share for `a` and `b`.*residual.*"
                                         r"Received: amount=\{'a': 0.25, 'b': 0.75\}"):
        prune(_Residual(), {"a": 0.25, "b": 0.75}, structured=True, example_inputs=x)
    small = prune(_Residual(), {"a": 0.25, "b": 0.25}, structured=True, example_inputs=x)
    assert (small.a.out_channels, small.b.out_channels, small.b.in_channels) == (6, 6, 6)


def test_a_quantized_model_is_refused_with_the_order_to_follow(mlp):
    from sampan.quantization import quantize_dynamic
    q = quantize_dynamic(mlp)
    for structured in (False, True):
        with pytest.raises(TypeError, match=r"Expected `model` to be a float \(unquantized\) model.*"
                                            r"'0.weight_int8'.*HINT: prune before quantizing"):
            prune(q, 0.5, structured=structured, example_inputs=torch.randn(1, 32))
