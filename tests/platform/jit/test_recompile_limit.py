"""to_static keeps compiling where courses and sweeps use it: many models of one class in one process (past
torch's recompile limit), and models whose FLOPs were counted first."""
from __future__ import annotations

import sys
import warnings

import torch
from torch.utils.data import TensorDataset

import sampan
from sampan.jit import to_static


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(x)


class Other(Tiny):
    def forward(self, x):  # a code object of its own: its recompile count starts at zero
        return self.fc(x) * 2


def test_many_compiled_models_of_one_class_fit_and_evaluate():
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(16, 8, generator=g), torch.randint(0, 3, (16,), generator=g))
    # torch keeps 8 graphs per forward's code (the 8th to 12th model crashed); a limit of 2 with 4 models is
    # the same situation in a third of the compile time
    statics = []
    with torch._dynamo.config.patch(recompile_limit=2), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(4):  # each model adds graphs: evaluation and frozen inference hold its weights
            net = Tiny()
            model = sampan.Model(net, inputs=sampan.InputSpec([None, 8], "float32", "x"))
            model.prepare(torch.optim.SGD(net.parameters(), 0.1), torch.nn.CrossEntropyLoss(),
                          sampan.metric.Accuracy(), to_static=True, device="cpu")
            model.fit(data, batch_size=16, epochs=1, verbose=0)
            logs = model.evaluate(data, batch_size=16, verbose=0)
            assert 0.0 <= logs["acc"] <= 1.0 and logs["loss"] > 0, (i, logs)
            statics.append(model.network.forward)
            with torch.no_grad():
                assert torch.allclose(model.network(data.tensors[0]), net.fc(data.tensors[0]), atol=1e-5)
    assert any(getattr(s, "_recompile_reset", False) for s in statics)  # the limit was reached...
    assert statics[-1].status == "compiled"  # ...and the old models' graphs were dropped, not compiling
    assert not [w for w in caught if "to_static" in str(w.message)], [str(w.message) for w in caught]


def test_past_the_limit_again_it_runs_eagerly_with_one_warning(monkeypatch):
    monkeypatch.setattr(sys.modules[to_static.__module__], "_RECOMPILE_WARNED", [])
    x = torch.randn(4, 8)
    with torch._dynamo.config.patch(recompile_limit=1), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # pick_faster=False: every call runs compiled (no measured choice sends a shape to eager first)
        nets = [to_static(Other(), backend="eager", pick_faster=False) for _ in range(3)]
        for net in nets:  # one graph for training, one for inference: the second call of each is past the limit
            net.train()
            expected = net.fc(x) * 2
            assert torch.allclose(net(x), expected)
            net.eval()
            with torch.no_grad():
                assert torch.allclose(net(x), expected)
            net.train()
            assert torch.allclose(net(x), expected)
    assert [n.forward.status for n in nets] == ["eager", "eager", "eager"]
    messages = [str(w.message) for w in caught if "recompile limit" in str(w.message)]
    assert len(messages) == 1 and "HINT: build fewer models of one class per process" in messages[0], messages


def test_a_first_call_under_a_flop_counter_does_not_make_it_eager_for_good():
    from torch.utils.flop_counter import FlopCounterMode

    net, x = to_static(Other(), backend="eager"), torch.randn(4, 8)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():  # what a run recorder or summary does before training
        net(x)
    assert counter.get_total_flops() == 2 * 4 * 8 * 3 and net.forward.status == "pending"
    assert torch.allclose(net(x), net.fc(x) * 2) and net.forward.status == "compiled"
