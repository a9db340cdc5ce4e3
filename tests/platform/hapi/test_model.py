"""Model.prepare / fit / evaluate / predict on small data."""
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

import sampan
from sampan.metric import Accuracy


def prepared(net, lr=1e-2, **kw):
    model = sampan.Model(net, **{k: kw.pop(k) for k in ("inputs", "labels") if k in kw})
    model.prepare(torch.optim.Adam(net.parameters(), lr=lr), torch.nn.CrossEntropyLoss(), Accuracy(), **kw)
    return model


def test_fit_learns_and_history_has_train_and_eval_values(blobs, mlp):
    train, val = blobs
    model = prepared(mlp())
    history = model.fit(train, val, epochs=5, batch_size=32, verbose=0)
    assert history.epoch == [0, 1, 2, 3, 4]
    assert history["loss"][-1] < history["loss"][0]
    assert history["eval_acc"][-1] >= 0.85
    result = model.evaluate(val, verbose=0)
    assert set(result) == {"loss", "acc"}
    assert result["acc"] == pytest.approx(history["eval_acc"][-1])


def test_fit_accepts_a_dataloader_and_predict_stacks_outputs(blobs, mlp):
    train, val = blobs
    model = prepared(mlp())
    model.fit(DataLoader(train, batch_size=64, shuffle=True), verbose=0)
    (logits,) = model.predict(val, batch_size=10, verbose=0)
    assert isinstance(logits, np.ndarray) and logits.shape == (64, 2)
    per_batch = model.predict(val, batch_size=10, verbose=0, stack_outputs=False)[0]
    assert len(per_batch) == 7 and per_batch[-1].shape == (4, 2)


class TwoInTwoOut(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(3, 2), torch.nn.Linear(5, 2)

    def forward(self, x1, x2):
        h = self.a(x1) + self.b(x2)
        return h, h.sum(1)


class TwoLabelData(Dataset):
    def __init__(self, n=40):
        g = torch.Generator().manual_seed(1)
        self.x1, self.x2 = torch.randn(n, 3, generator=g), torch.randn(n, 5, generator=g)
        self.y = (self.x1[:, 0] > 0).long()
        self.z = self.x2.sum(1)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x1[i], self.x2[i], self.y[i], self.z[i]


def test_multiple_inputs_outputs_and_labels():
    spec = [sampan.InputSpec([None, 3], "float32", "x1"), sampan.InputSpec([None, 5], "float32", "x2")]
    labels = [sampan.InputSpec([None], "int64", "y"), sampan.InputSpec([None], "float32", "z")]
    net = TwoInTwoOut()

    def loss(logits, total, y, z):
        return torch.nn.functional.cross_entropy(logits, y) + torch.nn.functional.mse_loss(total, z)

    model = sampan.Model(net, inputs=spec, labels=labels)
    model.prepare(torch.optim.SGD(net.parameters(), lr=0.1), loss, Accuracy())
    history = model.fit(TwoLabelData(), epochs=3, batch_size=8, verbose=0)
    assert history["loss"][-1] < history["loss"][0]
    outs = model.predict(TwoLabelData(), verbose=0)
    assert [o.shape for o in outs] == [(40, 2), (40,)]


def test_gradient_accumulation_matches_a_big_batch(blobs, mlp):
    train, _ = blobs
    sub = TensorDataset(*train[:64])
    big = prepared(mlp(seed=3), lr=0.1)
    big.prepare(torch.optim.SGD(big.network.parameters(), lr=0.1), torch.nn.CrossEntropyLoss())
    big.fit(sub, batch_size=64, shuffle=False, verbose=0)
    small = prepared(mlp(seed=3), lr=0.1)
    small.prepare(torch.optim.SGD(small.network.parameters(), lr=0.1), torch.nn.CrossEntropyLoss(),
                  accumulate_steps=4)
    small.fit(sub, batch_size=16, shuffle=False, verbose=0)
    assert small.global_step == 1 and big.global_step == 1
    for p, q in zip(big.network.parameters(), small.network.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_grad_clip_bounds_the_update(mlp):
    net = mlp(seed=1)
    before = [p.detach().clone() for p in net.parameters()]
    x, y = torch.randn(32, 16) * 1e3, torch.randint(0, 2, (32,))
    model = sampan.Model(net)
    model.prepare(torch.optim.SGD(net.parameters(), lr=1.0), torch.nn.CrossEntropyLoss(), grad_clip=0.5)
    model.fit(TensorDataset(x, y), batch_size=32, verbose=0)
    step = torch.cat([(p.detach().cpu() - b).flatten() for p, b in zip(net.parameters(), before)])  # GPU too
    assert step.norm().item() == pytest.approx(0.5, rel=1e-3)


def test_num_iters_stops_early(blobs, mlp):
    model = prepared(mlp())
    model.fit(blobs[0], epochs=10, batch_size=16, num_iters=5, verbose=0)
    assert model.global_step == 5


def test_fast_dev_run_cuts_fit_and_evaluate_to_a_few_batches_but_never_predict(blobs, mlp, monkeypatch, capsys):
    from sampan.hapi import loop

    train, val = blobs  # 192 and 64 samples: 12 and 4 batches of 16
    seen = {"train": 0, "eval": 0}

    class Count(sampan.callbacks.Callback):
        def on_train_batch_end(self, step, logs=None):
            seen["train"] += 1

        def on_eval_batch_end(self, step, logs=None):
            seen["eval"] += 1

    monkeypatch.setenv(loop.FAST_DEV_RUN_ENV, "2")
    model = prepared(mlp())
    with pytest.warns(UserWarning, match="SAMPAN_FAST_DEV_RUN=2") as said:
        history = model.fit(train, val, epochs=3, batch_size=16, verbose=1, callbacks=[Count()])
    assert said[0].filename == __file__  # the warning names the learner's line, not sampan's
    assert model.global_step == 6 and seen == {"train": 6, "eval": 6}  # 2 + 2 per epoch, every epoch still run
    assert len(history["loss"]) == 3 and "2/2" in capsys.readouterr().err  # the progress bar counts the cut epoch
    seen.update(train=0, eval=0)
    model.evaluate(val, batch_size=16, verbose=0, callbacks=[Count()])
    assert seen["eval"] == 2
    (out,) = model.predict(val, batch_size=16, verbose=0)
    assert out.shape == (64, 2)  # predict keeps one row per sample

    monkeypatch.setenv(loop.FAST_DEV_RUN_ENV, "two")
    with pytest.raises(ValueError, match=r"SAMPAN_FAST_DEV_RUN.*positive number.*'two'"):
        model.fit(train, epochs=1, verbose=0)
    monkeypatch.setenv(loop.FAST_DEV_RUN_ENV, "0")  # 0 (or unset) is a real run
    before = model.global_step
    model.fit(train, epochs=1, batch_size=16, verbose=0)
    assert model.global_step - before == 12


def test_seed_everything_makes_fit_repeatable(blobs, mlp):
    weights = []
    for _ in range(2):
        sampan.seed_everything(7)
        model = prepared(mlp(seed=7, dropout=0.3))
        model.fit(blobs[0], epochs=2, verbose=0)
        weights.append(torch.cat([p.detach().flatten() for p in model.network.parameters()]))
    assert torch.equal(weights[0], weights[1])


def test_progress_bar_verbose_2_prints_one_line_per_epoch(blobs, mlp, capsys):
    model = prepared(mlp())
    model.fit(blobs[0], blobs[1], epochs=2, verbose=2)
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("Epoch")]
    assert len(lines) == 2 and "eval_acc" in lines[1]


def test_progress_bar_verbose_1_uses_tqdm_without_line_spam(blobs, mlp, capsys):
    model = prepared(mlp())
    model.fit(blobs[0], epochs=1, batch_size=4, verbose=1)
    err = capsys.readouterr().err
    assert "Epoch 1/1" in err and "48/48" in err
    assert err.count("\n") <= 3  # one bar, redrawn in place, not a line per step


def test_summary_reports_params_shapes_and_flops():
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(144, 10))
    model = sampan.Model(net, inputs=sampan.InputSpec([None, 1, 8, 8]))
    info = model.summary()
    assert info["total_params"] == 4 * 9 + 4 + 144 * 10 + 10
    assert info["layers"][0]["output_shape"] == [1, 4, 6, 6]
    # conv: 2 * (4*6*6 outputs) * 9 MACs; linear: 2 * 144 * 10
    assert info["flops"] == 2 * 4 * 36 * 9 + 2 * 144 * 10
    assert sampan.summary(net, (2, 1, 8, 8), print_table=False)["flops"] == 2 * info["flops"]


def test_deterministic_mode_turns_on_deterministic_algorithms(mlp):
    net = mlp()
    try:
        sampan.Model(net).prepare(torch.optim.SGD(net.parameters(), 0.1), torch.nn.CrossEntropyLoss(),
                                  deterministic=True)
        assert torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(False)


def test_device_defaults_to_cuda_when_present_else_cpu(mlp):
    net = mlp()
    model = sampan.Model(net).prepare(torch.optim.SGD(net.parameters(), 0.1), torch.nn.CrossEntropyLoss())
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert model.device.type == expected and next(net.parameters()).device.type == expected
