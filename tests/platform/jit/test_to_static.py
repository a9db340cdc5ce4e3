"""sampan.jit.to_static: compiled parity, dynamic batch, verification, fallback with graph breaks."""
from __future__ import annotations

import warnings

import pytest
import torch
from jit_helpers import DataDependent, lenet
from torch import nn
from torch._dynamo.utils import counters

import sampan
from sampan import InputSpec
from sampan.jit import StaticFunction, StaticGraphError, to_static
from sampan.jit.to_static import static_forward


@pytest.fixture(scope="module")
def static_lenet():
    """LeNet compiled once with inductor; the eager twin shares the weights."""
    eager = lenet()
    net = to_static(lenet(), input_spec=[InputSpec([None, 1, 28, 28], "float32", "image")])
    graphs_before = counters["stats"]["unique_graphs"]
    with torch.no_grad():
        net(torch.randn(4, 1, 28, 28))
    return net, eager, graphs_before


def test_lenet_matches_eager_at_other_batch_sizes_without_recompiling(static_lenet):
    net, eager, graphs_before = static_lenet
    assert net.forward.status == "compiled"
    with torch.no_grad():
        for batch in (2, 3, 9, 15):
            x = torch.randn(batch, 1, 28, 28)
            torch.testing.assert_close(net(x), eager(x), rtol=1e-4, atol=1e-5)
    assert counters["stats"]["unique_graphs"] - graphs_before == 1  # one graph served every batch size


@pytest.mark.slow
def test_lenet_batch_one_and_large_batches_compile_their_own_graph(static_lenet):
    net, eager, graphs_before = static_lenet
    with torch.no_grad():
        for batch in (1, 40, 64):
            x = torch.randn(batch, 1, 28, 28)
            torch.testing.assert_close(net(x), eager(x), rtol=1e-4, atol=1e-5)
    assert counters["stats"]["unique_graphs"] - graphs_before <= 3  # 1, 2..15, 16+: never one per size


def test_first_call_is_verified_against_eager(static_lenet):
    net, _, _ = static_lenet
    assert net.forward.verified is True
    assert net.forward.max_abs_diff < 1e-4
    assert net.forward.compile_seconds > 0


def test_to_static_returns_the_same_layer_with_its_weights(static_lenet):
    net, eager, _ = static_lenet
    assert isinstance(net, type(eager))
    assert isinstance(net.forward, StaticFunction)
    assert net.state_dict().keys() == eager.state_dict().keys()
    assert to_static(net) is net  # converting twice is a no-op


def test_verify_warns_when_the_compiled_output_differs():
    def off_by_one(gm, example_inputs):  # a broken "compiler"
        def run(*args):
            return tuple(o + 1 for o in gm(*args))
        return run

    net = to_static(nn.Linear(4, 2).eval(), backend=off_by_one)
    x = torch.randn(3, 4)
    with pytest.warns(RuntimeWarning, match=r"differs from eager by up to 1"):
        with torch.no_grad():
            net(x)
    assert net.forward.verified is False


def test_data_dependent_control_flow_falls_back_with_one_warning_naming_the_line():
    net = to_static(DataDependent(), backend="aot_eager")
    eager = DataDependent()
    eager.load_state_dict(net.state_dict())
    x = torch.randn(3, 4)
    with pytest.warns(RuntimeWarning) as record:
        out = net(x)
    messages = [str(w.message) for w in record if "to_static" in str(w.message)]
    assert len(messages) == 1
    assert "jit_helpers.py" in messages[0] and "if y.sum() > 0" in messages[0]
    assert "torch.where" in messages[0] and "Running eagerly" in messages[0]
    assert net.forward.status == "eager"
    torch.testing.assert_close(out, eager(x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning
        torch.testing.assert_close(net(-x), eager(-x))


def test_full_graph_raises_with_the_graph_breaks():
    net = to_static(DataDependent(), backend="aot_eager", full_graph=True)
    with pytest.raises(StaticGraphError, match=r"(?s)if y.sum\(\) > 0.*full_graph=True") as info:
        net(torch.randn(2, 4))
    assert info.value.report.graph_break_count >= 1


def test_a_bug_in_the_model_raises_as_in_eager():
    net = to_static(nn.Linear(4, 2), backend="aot_eager")
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        net(torch.randn(2, 5))


class _Decorated(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)

    @to_static(input_spec=[InputSpec([None, 4])], backend="aot_eager")
    def forward(self, x):
        return torch.tanh(self.linear(x))


def test_decorator_on_forward_and_on_a_function():
    net = _Decorated().eval()
    x = torch.randn(5, 4)
    expected = torch.tanh(net.linear(x))
    torch.testing.assert_close(net(x), expected)
    assert net.forward.status == "compiled" and net.forward.verified is True  # the instance's own
    assert _Decorated.forward.status == "pending"  # the class's keeps the options, never compiles

    @to_static(backend="aot_eager")
    def gelu_sum(a, b):
        return torch.nn.functional.gelu(a) + b

    a, b = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(gelu_sum(a, b), torch.nn.functional.gelu(a) + b)
    assert gelu_sum.status == "compiled"


def test_each_instance_of_a_decorated_class_has_its_own_static_forward():
    """``@to_static`` on a class's ``forward`` kept one StaticFunction for every instance, as Paddle does not: the
    second network of a class ran the first one's faster-path choice without being timed, and never got a frozen
    graph of its own weights (it ran the unfrozen one: 32 against 19 ms for resnet18 at batch 4, where the first
    ran frozen). Each instance now has its own, made at its first lookup;
    ``super().forward`` from a subclass that overrides ``forward`` still runs the decorated one."""
    class Net(nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.linear = nn.Linear(4, 3)
            torch.nn.init.constant_(self.linear.weight, scale)

        @to_static(backend="aot_eager")
        def forward(self, x):
            return torch.relu(self.linear(x)) * 2

    class Child(Net):
        def forward(self, x):
            return super().forward(x) + 1

    first, second, child = Net(1.0).eval(), Net(2.0).eval(), Child(3.0).eval()
    x = torch.ones(2, 4)
    with torch.no_grad():
        for _ in range(2):  # alternating calls: each serves its own weights
            torch.testing.assert_close(first(x), torch.relu(first.linear(x)) * 2)
            torch.testing.assert_close(second(x), torch.relu(second.linear(x)) * 2)
            torch.testing.assert_close(child(x), torch.relu(child.linear(x)) * 2 + 1)
    assert first.forward is not second.forward
    assert first.forward.layer is first and second.forward.layer is second
    key = (((2, 4), torch.float32),)
    assert key in first.forward.choices and key in second.forward.choices  # each timed on its own network
    assert first.forward.status == second.forward.status == "compiled"
    assert Net.forward not in (first.forward, second.forward) and "forward" not in child.__dict__  # Child's stays
    assert sampan.jit.to_static(first) is first and static_forward(first) is first.forward


def test_frozen_graph_never_serves_stale_weights():
    torch.manual_seed(0)
    net = to_static(nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)))
    x = torch.randn(4, 8)
    net.eval()
    with torch.no_grad():
        before = net(x)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.5)  # the weights change after the frozen graph was built
        after = net(x)
        expected = net.forward.original(x)
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, expected, rtol=1e-4, atol=1e-5)
    net.forward.refreeze()  # fold the new weights into a new frozen graph
    with torch.no_grad():
        torch.testing.assert_close(net(x), expected, rtol=1e-4, atol=1e-5)
    assert net.forward._frozen_fingerprint is not None


def test_inference_calls_really_fold_the_weights():
    """The speed-up on CPU comes from inductor freezing: weights folded in as constants. Prove the
    frozen graph holds constants by hiding a weight change from to_static's check: it must then
    serve the old result. (torch.compile(options={"freezing": True}) was silently ignored in
    torch 2.14, so this graph used to follow the live weights and resnet18 ran at eager speed.)"""
    torch.manual_seed(0)
    net = to_static(nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)).eval(), pick_faster=False)
    x = torch.randn(4, 8)
    with torch.no_grad():
        before = net(x)
        for p in net.parameters():
            p.add_(0.5)
        net.forward._frozen_fingerprint = net.forward._fingerprint(net)  # hide the change
        assert torch.equal(net(x), before)
        net.forward.refreeze()
        torch.testing.assert_close(net(x), net.forward.original(x))


def test_lenet_channels_last_runs_frozen_at_every_batch_size():
    # LeNet's first convolution reads one channel, so its weight is both layouts at once; with the channels-last
    # strides that net.to(memory_format=torch.channels_last) gives it, a frozen graph failed at the next batch size
    # (torch 2.14: "AssertionError: expected size 6==6, stride 1==784 at dim=1").
    eager = lenet()
    net = to_static(lenet().to(memory_format=torch.channels_last), pick_faster=False)
    first, second = [m.weight for m in net.modules() if isinstance(m, nn.Conv2d)][:2]
    assert first.stride()[1] == 1 and second.is_contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        for batch in (32, 64, 17):
            x = torch.randn(batch, 1, 28, 28)
            torch.testing.assert_close(net(x), eager(x), rtol=1e-4, atol=1e-5)
    assert net.forward.status == "compiled"
    assert first.stride() == torch.empty_like(first, memory_format=torch.contiguous_format).stride()  # NCHW's
    assert second.is_contiguous(memory_format=torch.channels_last)  # the network stays channels-last
    torch.testing.assert_close(first, [m.weight for m in eager.modules() if isinstance(m, nn.Conv2d)][0])


def test_a_module_copied_under_inference_mode_still_compiles():
    """Parameters created under inference_mode keep no version counter; to_static must not trip on it."""
    import copy

    with torch.inference_mode():
        net = to_static(copy.deepcopy(nn.Sequential(nn.Linear(8, 4), nn.ReLU()).eval()))
        x = torch.randn(3, 8)
        out = net(x)
    assert net.forward.status == "compiled", net.forward.fallback_reason
    torch.testing.assert_close(out, net.forward.original(x))


def test_training_through_a_static_layer_updates_weights():
    torch.manual_seed(0)
    net = to_static(nn.Linear(4, 1), backend="aot_eager")
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    losses = []
    for _ in range(5):
        loss = torch.nn.functional.mse_loss(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="layer_or_function"):
        to_static(42)
    with pytest.raises(TypeError, match="input_spec"):
        to_static(nn.Linear(2, 2), input_spec=["not a spec"])


def test_not_to_static_restores_eager():
    net = to_static(nn.Linear(2, 2), backend="aot_eager")
    sampan.jit.not_to_static(net)
    assert "forward" not in net.__dict__



class _Mlp(nn.Module):
    """A forward of its own: Dynamo's recompile limit is per code object, and many tests compile Sequential's."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 8), nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def test_a_deepcopy_after_the_first_call_computes_with_its_own_weights():
    """Pruning, quantization and EMA copies deep-copy a layer that has already run: its compiled graphs closed
    over the original's forward, so the copy computed with the original's weights."""
    import copy

    torch.manual_seed(0)
    net = to_static(_Mlp().eval(), backend="aot_eager", pick_faster=False)
    x = torch.randn(3, 4)
    with torch.no_grad():
        before = net(x)
        twin = copy.deepcopy(net)
        assert twin.forward.status == "pending" and not twin.forward.choices
        twin.fc1.weight.zero_()
        twin.fc1.bias.zero_()
        torch.testing.assert_close(twin(x), twin.forward.original(x))
        assert not torch.allclose(twin(x), before)
        torch.testing.assert_close(net(x), before)  # the original keeps its own weights and graphs
    assert twin.forward.status == "compiled" and twin.forward.layer is twin


def test_a_frozen_graph_follows_weights_swapped_through_data_or_vector_to_parameters():
    """``w.data = ...`` and ``vector_to_parameters`` give a weight new memory without bumping its version."""
    torch.manual_seed(0)
    net = to_static(_Mlp().eval(), pick_faster=False)
    x = torch.randn(3, 4)
    with torch.no_grad():
        net(x)  # the frozen graph, holding these weights
        weight = net.fc1.weight
        for scale in (2.0, 0.5, 3.0):  # new memory each time, never mistaken for the frozen weights'
            weight.data = weight.data * scale
            torch.testing.assert_close(net(x), net.forward.original(x))
        net.forward.refreeze()
        net(x)
        vector = torch.nn.utils.parameters_to_vector(net.parameters())
        torch.nn.utils.vector_to_parameters(vector * 2, net.parameters())
        torch.testing.assert_close(net(x), net.forward.original(x))
    assert net.forward.status == "compiled" and net.forward.freezing
