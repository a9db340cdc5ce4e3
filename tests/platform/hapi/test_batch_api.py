"""Model.train_batch / eval_batch / predict_batch (paddle.Model's), gradient accumulation, errors on any batch."""
import numpy as np
import pytest
import torch
from torch.utils.data import TensorDataset

import sampan


def _prepared(mlp, *, accumulate_steps=1, to_static=False, metrics=None, seed=0):
    net = mlp(seed)
    model = sampan.Model(net)
    model.prepare(torch.optim.SGD(net.parameters(), lr=0.5), torch.nn.CrossEntropyLoss(), metrics,
                  accumulate_steps=accumulate_steps, to_static=to_static, device="cpu")
    return model


def _batch(n=32, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    return x, (x[:, :4].sum(1) > 0).long()


def test_train_batch_steps_and_returns_the_loss_as_paddle_does(mlp):
    model = _prepared(mlp)
    x, y = _batch()
    expected = torch.nn.functional.cross_entropy(model.network(x), y).item()
    before = [p.detach().clone() for p in model.network.parameters()]
    (loss,) = model.train_batch([x], [y])
    assert isinstance(loss, np.ndarray) and loss.item() == pytest.approx(expected, rel=1e-6)
    assert model.global_step == 1
    assert any(not torch.equal(a, b) for a, b in zip(before, model.network.parameters()))
    assert all(p.grad is None for p in model.network.parameters())  # zero_grad(set_to_none=True) after the step


def test_train_batch_with_metrics_returns_losses_and_this_batchs_metrics(mlp):
    model = _prepared(mlp, metrics=sampan.metric.Accuracy())
    x, y = _batch()
    with torch.no_grad():
        acc = (model.network(x).argmax(1) == y).float().mean().item()
    losses, metrics = model.train_batch(x.numpy(), y.numpy())  # NumPy arrays are accepted, as in Paddle
    assert len(losses) == 1 and metrics == [pytest.approx(acc)]


def test_update_false_accumulates_gradients_like_one_big_batch(mlp):
    x, y = _batch(32)
    whole = _prepared(mlp)
    whole.train_batch([x], [y])
    halves = _prepared(mlp, accumulate_steps=2)
    params = list(halves.network.parameters())
    first = [p.detach().clone() for p in params]
    halves.train_batch([x[:16]], [y[:16]], update=False)
    assert all(torch.equal(a, b) for a, b in zip(first, params)) and all(p.grad is not None for p in params)
    assert halves.global_step == 0
    halves.train_batch([x[16:]], [y[16:]], update=True)
    assert halves.global_step == 1
    for a, b in zip(whole.network.parameters(), params):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_update_false_accumulates_under_to_static_too(mlp):
    x, y = _batch(32)
    eager = _prepared(mlp, accumulate_steps=2)
    static = _prepared(mlp, accumulate_steps=2, to_static=True)
    for model in (eager, static):
        model.train_batch([x[:16]], [y[:16]], update=False)
        model.train_batch([x[16:]], [y[16:]])
    for a, b in zip(eager.network.parameters(), static.network.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_eval_batch_and_predict_batch_do_not_train(mlp):
    model = _prepared(mlp)
    x, y = _batch()
    before = [p.detach().clone() for p in model.network.parameters()]
    (loss,) = model.eval_batch([x], [y])
    (logits,) = model.predict_batch([x])
    with torch.no_grad():
        out = model.network(x)
    assert loss.item() == pytest.approx(torch.nn.functional.cross_entropy(out, y).item(), rel=1e-6)
    np.testing.assert_allclose(logits, out.numpy(), rtol=1e-6)
    assert all(torch.equal(a, b) for a, b in zip(before, model.network.parameters()))
    assert all(p.grad is None for p in model.network.parameters())


def test_batch_api_errors_name_the_argument(mlp):
    model = _prepared(mlp)
    x, y = _batch()
    with pytest.raises(TypeError, match=r"Expected `inputs` to be a torch.Tensor, a NumPy array.*Received: inputs="):
        model.train_batch(["not a tensor"], [y])
    with pytest.raises(TypeError, match=r"Expected `update` to be True or False.*HINT"):
        model.train_batch([x], [y], update="no")
    with pytest.raises(RuntimeError, match=r"before model.train_batch\(\)"):
        sampan.Model(mlp()).train_batch([x], [y])


def test_labels_out_of_range_after_the_first_batch_get_the_first_batchs_clear_error(mlp):
    x, y = _batch(64)
    y[40] = 7  # two classes: batch 2 (of 16) holds an impossible label
    model = _prepared(mlp)
    with pytest.raises(ValueError, match=r"The loss failed on batch 2: inputs \[\[16, 16\] float32\], labels "
                                         r"\[\[16\] int64\]\. torch said: .*HINT: check that the labels"):
        model.fit(TensorDataset(x, y), batch_size=16, shuffle=False, verbose=0)
    with pytest.raises(ValueError, match=r"The loss failed on batch 2"):
        model.evaluate(TensorDataset(x, y), batch_size=16, verbose=0)
