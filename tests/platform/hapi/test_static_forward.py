"""Model finds its network's static forward however it was made: ``prepare(to_static=True)``, ``to_static(net)``,
or Paddle's ``@to_static`` on the class's ``forward``; also inside a data-parallel wrapper such as DDP."""
import pytest
import torch
from torch import nn

import sampan
from sampan.distributed.base import Strategy
from sampan.jit.to_static import PathChoice, static_forward


def decorated_class():
    """A fresh class per test: ``@to_static`` on ``forward`` keeps one StaticFunction, and its state, per class."""
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
    if case == "to_static(net)":
        net = sampan.jit.to_static(net, backend="eager")
    model = sampan.Model(net)
    model.prepare(torch.optim.Adam(net.parameters()), nn.CrossEntropyLoss(), device="cpu",
                  to_static=case.startswith("prepare"), strategy=_Wrapping() if "wrapped" in case else None)
    return model


CASES = ["decorated", "decorated, wrapped", "to_static(net)", "prepare(to_static=True)",
         "prepare(to_static=True), wrapped"]


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
    assert model._optimizer.param_groups[0].get("fused") is (True if case.startswith("prepare") else None)
