"""Silent wrong results of Model that became clear errors: no labels, an optimizer over another network."""
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import sampan
from sampan.metric import Accuracy


def prepared(mlp, **kwargs):
    net = mlp()
    model = sampan.Model(net)
    model.prepare(torch.optim.SGD(net.parameters(), 0.1), torch.nn.CrossEntropyLoss(), Accuracy(), **kwargs)
    return model


def test_evaluate_without_labels_is_refused_instead_of_scoring_zero(blobs, mlp):
    model = prepared(mlp)
    inputs_only = TensorDataset(blobs[1].tensors[0])
    pattern = r"Expected `eval_data` to be a dataset of \(inputs\.\.\., labels\.\.\.\) items: loss, Accuracy need labels.*HINT: use model\.predict"
    with pytest.raises(ValueError, match=pattern):
        model.evaluate(inputs_only, verbose=0)
    with pytest.raises(ValueError, match=pattern):
        model.evaluate(DataLoader(inputs_only, batch_size=8), verbose=0)
    with pytest.raises(ValueError, match=pattern):
        model.fit(blobs[0], inputs_only, epochs=1, verbose=0)
    assert model.predict(inputs_only, verbose=0)[0].shape == (64, 2)  # outputs without labels: predict
    logs = model.evaluate(blobs[1], verbose=0)
    assert set(logs) >= {"loss", "acc"} and 0.0 <= logs["acc"] <= 1.0


def test_an_optimizer_over_another_networks_parameters_is_refused(mlp):
    net, other = mlp(), mlp()
    model = sampan.Model(net)
    with pytest.raises(ValueError, match=r"Expected `optimizer` to be an optimizer over the parameters of this network "
                                         r"\(Sequential\); none of its 4 parameter tensor\(s\) belong to it.*"
                                         r"HINT: build the optimizer from the same network"):
        model.prepare(torch.optim.Adam(other.parameters()), torch.nn.CrossEntropyLoss())


def test_optimizers_that_own_the_network_pass_also_after_precision_setup(mlp):
    net = mlp()
    center = torch.nn.Parameter(torch.zeros(2))  # an extra parameter next to the network's is fine
    model = sampan.Model(net).prepare(torch.optim.SGD([*net.parameters(), center], 0.1),
                                      torch.nn.CrossEntropyLoss())
    x, y = torch.randn(8, 16), torch.randint(0, 2, (8,))
    before = net[0].weight.detach().clone()
    model.train_batch(x, y)
    assert not torch.equal(before, net[0].weight)  # the optimizer really trains this network
    net = mlp()
    o2 = sampan.amp.AmpConfig(dtype="bf16", level="O2")
    model = sampan.Model(net).prepare(torch.optim.SGD(net.parameters(), 0.1), torch.nn.CrossEntropyLoss(),
                                      amp=o2, device="cpu")
    model.prepare(model._optimizer, torch.nn.CrossEntropyLoss(), amp=o2, device="cpu")  # fp32 master weights
    before = [p.detach().clone() for p in model.network.parameters()]
    model.train_batch(x, y)
    assert any(not torch.equal(b, p) for b, p in zip(before, model.network.parameters()))
