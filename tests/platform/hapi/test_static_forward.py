"""Model finds its network's static forward however it was made: ``prepare(to_static=True)``, ``to_static(net)``,
or Paddle's ``@to_static`` on the class's ``forward``; also inside a data-parallel wrapper such as DDP."""
import pytest
import torch
from torch import nn

import sampan
from sampan.distributed.base import Strategy
from sampan.jit.to_static import PathChoice, static_forward


def decorated_class():
    """A fresh class per test: ``@to_static`` on ``forward`` (each instance gets its own StaticFunction)."""
    class Decorated(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 3)

        @sampan.jit.to_static(backend="eager", pick_faster=False)
        def forward(self, x):
            return self.linear(x)

    return Decorated


class _Wrapper(nn.Module):
    """What DistributedDataParallel is to Model: a module of its own, the network as ``.module``."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)


class _Wrapping(Strategy):
    """One process, with the network wrapped as ``DDPStrategy`` wraps it."""

    def setup(self, network, device):
        return _Wrapper(super().setup(network, device))

    def unwrap(self, network):
        return network.module if isinstance(network, _Wrapper) else network


def _prepared(case):
    net = decorated_class()() if case.startswith("decorated") else nn.Linear(4, 3)
    to_static = "prepare(to_static=True)" in case
    if case == "to_static(net)":
        net = sampan.jit.to_static(net, backend="eager")
    model = sampan.Model(net)
    model.prepare(torch.optim.Adam(net.parameters()), nn.CrossEntropyLoss(), device="cpu",
                  to_static=to_static, strategy=_Wrapping() if "wrapped" in case else None)
    return model


CASES = ["decorated", "decorated, wrapped", "to_static(net)", "prepare(to_static=True)",
         "prepare(to_static=True), wrapped", "decorated, prepare(to_static=True)"]


@pytest.mark.parametrize("case", CASES)
def test_model_finds_the_static_forward(case):
    model = _prepared(case)
    static = model._static_forward()
    assert static is not None
    assert static is (static_forward(model._train_net) or static_forward(model.network))


def test_an_eager_network_has_none(mlp):
    model = sampan.Model(mlp())
    model.prepare(torch.optim.Adam(model.network.parameters()), nn.CrossEntropyLoss(), strategy=_Wrapping())
    assert model._static_forward() is None


@pytest.mark.parametrize("case", CASES)
def test_a_checkpoint_keeps_the_training_path_so_a_resumed_run_does_not_measure_again(case, tmp_path):
    model = _prepared(case)
    static = static_forward(model._train_net) or static_forward(model.network)
    choice = PathChoice(path="eager", compiled_seconds=2.0, eager_seconds=1.0)
    static.set_train_choice(choice)
    target = model.save(tmp_path / "run")
    assert torch.load(target, weights_only=True)["static_training"]["path"] == "eager"
    static.set_train_choice(None)  # as a fresh process would start
    model.load(target)
    assert static.train_choice == choice
    # load fuses the optimizer again only where prepare(to_static=True) fused it
    assert model._optimizer.param_groups[0].get("fused") is (True if "prepare" in case else None)


def _decorated_cnn(**options):
    """A fresh class per call: a tiny CNN whose ``forward`` carries Paddle's ``@to_static``."""
    class DecoratedCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 4, 3)
            self.head = nn.Linear(4 * 4 * 4, 3)

        @sampan.jit.to_static(**options)
        def forward(self, x):
            return self.head(torch.relu(self.conv(x)).flatten(1))

    return DecoratedCNN


def _images(n=64):
    generator = torch.Generator().manual_seed(0)
    return torch.utils.data.TensorDataset(torch.randn(n, 2, 6, 6, generator=generator),
                                          torch.randint(0, 3, (n,), generator=generator))


class _Losses(sampan.callbacks.Callback):
    def __init__(self):
        self.losses = []

    def on_train_batch_end(self, step, logs=None):
        self.losses.append(logs["loss"])


def test_prepare_to_static_gives_a_decorated_network_its_own_static_forward_and_trains_like_eager():
    cls = _decorated_cnn(backend="eager", pick_faster=False)
    declared = cls.__dict__["forward"]
    curves, nets = {}, []
    for to_static in (False, True, True):
        torch.manual_seed(0)
        net = cls()
        model = sampan.Model(net)
        model.prepare(torch.optim.Adam(net.parameters(), 1e-2), nn.CrossEntropyLoss(), device="cpu",
                      to_static=to_static)
        losses = _Losses()
        sampan.seed_everything(0)
        model.fit(_images(), epochs=2, batch_size=16, verbose=0, callbacks=[losses])
        curves.setdefault(to_static, torch.tensor(losses.losses))
        nets.append((net, model))
    torch.testing.assert_close(curves[True], curves[False], rtol=1e-4, atol=1e-5)
    (first, first_model), (second, second_model) = nets[1:]
    for net, model in nets[1:]:  # prepare's settings went to the instance's own static forward, not the class's
        static = net.__dict__["forward"]
        assert static is not declared and static.layer is net and model._static_forward() is static
        assert static.status == "compiled" and static.training_passes == ["fused Adam"]
        assert static.backend == "eager" and not static.pick_faster  # the decorator's options
    assert first.forward is not second.forward
    assert declared.training_passes == [] and declared.on_layout_change is None


@pytest.mark.parametrize("called_before", [False, True])
def test_a_decorated_network_inside_a_wrapper_trains_compiled_in_the_wrappers_graph(called_before):
    """``prepare(to_static=True)`` under a data-parallel strategy compiles the wrapper (DDP's), which calls the
    network: a ``@to_static`` forward inside it broke the graph (Dynamo cannot trace the StaticFunction's lookup
    or its bookkeeping), so training fell back to eager with a warning. Inside a graph being compiled, the
    decorated forward is now the plain one, traced into the wrapper's graph; the loss curve is eager's."""
    import warnings

    cls = _decorated_cnn(backend="inductor")
    curves = {}
    for to_static in (False, True):
        torch.manual_seed(0)
        net = cls()
        if called_before:  # the network's own static forward exists already (made at its first lookup)
            net.eval()(torch.randn(1, 2, 6, 6))
            net.train()
        model = sampan.Model(net)
        model.prepare(torch.optim.Adam(net.parameters(), 1e-2), nn.CrossEntropyLoss(), device="cpu",
                      to_static=to_static, strategy=_Wrapping())
        losses = _Losses()
        sampan.seed_everything(0)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # a fallback to eager warns
            model.fit(_images(), epochs=2, batch_size=16, verbose=0, callbacks=[losses])
        curves[to_static] = torch.tensor(losses.losses)
    static = model._static_forward()
    assert isinstance(model._train_net, _Wrapper) and static is static_forward(model._train_net)
    assert static.status == "compiled" and static.fallback_reason is None
    torch.testing.assert_close(curves[True], curves[False], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("to_static", [False, True])
def test_resume_of_a_decorated_network_restores_its_layout_and_the_weights_of_a_straight_run(to_static, tmp_path):
    """A class-level ``@to_static`` forward has no layer of its own: a checkpoint's channels-last choice must still
    reach the network's weights (``to_static=False``); ``prepare(to_static=True)`` gives it its own."""
    from sampan.jit.to_static import _layout_of

    cls = _decorated_cnn(backend="eager")
    chosen = {"path": "compiled", "compiled_seconds": 1.0, "eager_seconds": 2.0, "layout": "channels_last"}

    def run(epochs, seed=0, **fit):
        sampan.seed_everything(seed)
        net = cls()
        model = sampan.Model(net)
        model.prepare(torch.optim.Adam(net.parameters(), 1e-2), nn.CrossEntropyLoss(), device="cpu",
                      to_static=to_static)
        model._static_forward().set_train_choice(None)  # each run starts as a fresh process would
        if "resume" not in fit:  # as if measured so
            net.to(memory_format=torch.channels_last)
            model._static_forward().set_train_choice(chosen)
        model.fit(_images(), epochs=epochs, batch_size=16, verbose=0, **fit)
        return model

    straight = run(3)
    run(2, save_dir=tmp_path)
    resumed = run(3, seed=5, save_dir=tmp_path, resume="auto")
    assert resumed._static_forward().train_choice.layout == "channels_last"
    assert _layout_of(resumed.network) == "channels_last"
    for (name, a), b in zip(straight.network.state_dict().items(), resumed.network.state_dict().values()):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("make", ["to_static(net)", "decorated"])
def test_the_first_step_note_shows_once_without_pick_faster(make, capsys):
    if make == "decorated":
        net = decorated_class()()
    else:
        net = sampan.jit.to_static(nn.Linear(4, 3), backend="eager", pick_faster=False)
    static = static_forward(net)
    assert static.first_training_step_waits  # it compiles at the first training call
    model = sampan.Model(net)
    model.prepare(torch.optim.Adam(net.parameters()), nn.CrossEntropyLoss(), device="cpu")
    data = torch.utils.data.TensorDataset(torch.randn(16, 4), torch.randint(0, 3, (16,)))
    model.fit(data, epochs=2, batch_size=8, verbose=1)
    assert not static.first_training_step_waits  # compiled, and nothing to measure
    bars = capsys.readouterr().err
    assert bars.count("to_static: compiling and timing the first step") == 1, bars
    static.set_train_choice(None)
    static.status = "pending"
    static.set_train_choice({"path": "eager", "compiled_seconds": 1.0, "eager_seconds": 0.5})
    assert not static.first_training_step_waits  # a restored eager path trains without compiling
