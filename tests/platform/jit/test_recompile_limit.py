"""Many models of one class in one process (a course, a sweep) keep working past torch's recompile limit."""
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
    # torch keeps 8 graphs per forward's code (12 models crashed); a limit of 4 with 6 models is the same
    # situation in half the compile time
    with torch._dynamo.config.patch(recompile_limit=4), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(6):  # each model needs 2-3 graphs: training, evaluation, frozen inference
            net = Tiny()
            model = sampan.Model(net, inputs=sampan.InputSpec([None, 8], "float32", "x"))
            model.prepare(torch.optim.SGD(net.parameters(), 0.1), torch.nn.CrossEntropyLoss(),
                          sampan.metric.Accuracy(), to_static=True, device="cpu")
            model.fit(data, batch_size=16, epochs=1, verbose=0)
            logs = model.evaluate(data, batch_size=16, verbose=0)
            assert 0.0 <= logs["acc"] <= 1.0 and logs["loss"] > 0, (i, logs)
            with torch.no_grad():
                assert torch.allclose(model.network(data.tensors[0]), net.fc(data.tensors[0]), atol=1e-5)
    assert model.network.forward.status == "compiled"  # the old models' graphs were dropped, not this one's
    assert not [w for w in caught if "to_static" in str(w.message)], [str(w.message) for w in caught]


def test_past_the_limit_again_it_runs_eagerly_with_one_warning(monkeypatch):
    monkeypatch.setattr(sys.modules[to_static.__module__], "_RECOMPILE_WARNED", [])
    x = torch.randn(4, 8)
    with torch._dynamo.config.patch(recompile_limit=1), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nets = [to_static(Other(), backend="eager") for _ in range(3)]
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
