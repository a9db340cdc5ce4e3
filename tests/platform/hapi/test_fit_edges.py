"""fit / evaluate / predict / train_batch on the inputs an audit tried: streams, variable lengths, resumes from
any epoch's checkpoint, partial loads, step budgets with accumulation, multi-input prediction."""
import warnings

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, TensorDataset

import sampan
from sampan.callbacks import Callback, EarlyStopping, LRScheduler, ModelCheckpoint
from sampan.metric import Accuracy


def prepared(net, lr=0.1, **kw):
    model = sampan.Model(net)
    model.prepare(torch.optim.SGD(net.parameters(), lr=lr), torch.nn.CrossEntropyLoss(), Accuracy(), **kw)
    return model


class Steps(Callback):
    def __init__(self):
        super().__init__()
        self.batches = 0

    def on_train_batch_end(self, step, logs=None):
        self.batches += 1


@pytest.mark.parametrize("order", ["checkpoint_first", "checkpoint_last"])
def test_resuming_from_an_epoch_checkpoint_is_exact_whatever_the_callback_order(blobs, mlp, tmp_path, order):
    """A checkpoint is written after the epoch's other callbacks (History, LRScheduler): resuming from 2.pt
    gives the straight run's weights, learning rates and History, even when ModelCheckpoint is listed first."""
    train, val = blobs

    def run(epochs, resume=None, folder=None):
        sampan.seed_everything(0)
        net = mlp(seed=0, dropout=0.2)
        opt = torch.optim.Adam(net.parameters(), lr=1e-2)
        sched = LRScheduler(torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5))
        model = sampan.Model(net)
        model.prepare(opt, torch.nn.CrossEntropyLoss(), Accuracy())
        cbs = [sched] if folder is None else [ModelCheckpoint(folder), sched]
        if order == "checkpoint_last":
            cbs.reverse()
        history = model.fit(train, val, epochs=epochs, verbose=0, callbacks=cbs, resume=resume)
        return model, history

    straight, straight_history = run(4)
    run(3, folder=tmp_path)  # "killed" after epoch 3; resume from epoch 2's file
    resumed, history = run(4, resume=tmp_path / "2.pt", folder=tmp_path / "again")
    assert history.epoch == [0, 1, 2, 3]
    assert history["lr"] == straight_history["lr"] == [0.01, 0.005, 0.0025, 0.00125]
    for (name, a), b in zip(straight.network.state_dict().items(), resumed.network.state_dict().values()):
        assert torch.equal(a, b), name


class Stream(IterableDataset):
    def __init__(self, data):
        self.data = data

    def __iter__(self):
        return iter(self.data)


def test_an_iterable_dataset_trains_evaluates_and_predicts(blobs, mlp):
    train, val = blobs
    model = prepared(mlp())
    history = model.fit(Stream(train), Stream(val), epochs=2, batch_size=32, verbose=0)  # shuffle=True default
    assert len(history["loss"]) == 2 and 0.0 <= history["eval_acc"][-1] <= 1.0
    assert model.global_step == 2 * 6  # 192 samples / 32 per epoch, counted as they come
    assert set(model.evaluate(DataLoader(Stream(val), batch_size=16), verbose=0)) == {"loss", "acc"}
    (logits,) = model.predict(Stream([(x,) for x, _ in val]), batch_size=16, verbose=0)
    assert logits.shape == (64, 2)


def test_skip_mismatch_does_not_load_the_optimizer_state_of_skipped_parameters(blobs, mlp, tmp_path):
    three = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    model = sampan.Model(three)
    model.prepare(torch.optim.Adam(three.parameters()), torch.nn.CrossEntropyLoss())
    model.fit(blobs[0], epochs=1, verbose=0)
    model.save(tmp_path / "three")
    five = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 5))
    other = sampan.Model(five)
    other.prepare(torch.optim.Adam(five.parameters()), torch.nn.CrossEntropyLoss())
    with pytest.warns(UserWarning, match=r"skipped 2 entries .*optimizer state is not loaded"):
        other.load(tmp_path / "three", skip_mismatch=True)
    assert torch.equal(five[0].weight, three[0].weight)  # the matching layer came over
    other.fit(blobs[0], epochs=1, verbose=0)  # Adam's moments of the 3-class head would not fit the 5-class one


def test_num_iters_counts_optimizer_steps_with_accumulation(blobs, mlp):
    for num_iters in (3, 7, 12):
        model, spy = prepared(mlp()), Steps()
        model.fit(blobs[0], epochs=10, batch_size=32, verbose=0, num_iters=num_iters, accumulate_grad_batches=2,
                  callbacks=[spy])
        assert model.global_step == num_iters and spy.batches == 2 * num_iters, num_iters


def test_accumulate_grad_batches_holds_for_one_fit_only(blobs, mlp):
    model = prepared(mlp(), accumulate_steps=1)
    model.fit(blobs[0], epochs=1, batch_size=64, verbose=0, accumulate_grad_batches=3)
    assert model.global_step == 1
    model.fit(blobs[0], epochs=1, batch_size=64, verbose=0)
    assert model.global_step == 1 + 3  # prepare's 1 again: one step per batch


def test_predict_feeds_every_argument_forward_requires(blobs):
    class Two(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(16, 2), torch.nn.Linear(16, 2)

        def forward(self, x1, x2):
            return self.a(x1) + self.b(x2)

    x = blobs[0].tensors[0]
    model = sampan.Model(Two())
    (out,) = model.predict(TensorDataset(x, 2 * x), batch_size=64, verbose=0)  # no labels, no InputSpec
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(out), model.network(x, 2 * x))
    with pytest.raises(ValueError, match=r"forward pass failed on the first batch.*missing 1 required"):
        sampan.Model(Two()).predict(TensorDataset(x), verbose=0)


def test_evaluate_checks_num_iters(blobs, mlp):
    model = prepared(mlp())
    for bad in (-1, 0, 1.5):
        with pytest.raises(ValueError, match=r"`num_iters`"):
            model.evaluate(blobs[1], num_iters=bad, verbose=0)
    assert model.evaluate(blobs[1], batch_size=16, num_iters=2, verbose=0)["acc"] >= 0.0


def test_evaluate_with_verbose_2_prints_one_line(blobs, mlp, capsys):
    result = prepared(mlp()).evaluate(blobs[1], verbose=2)
    line = capsys.readouterr().out.strip()
    assert line.startswith("Eval - loss: ") and f"acc: {result['acc']:.4g}" in line


class Tagger(torch.nn.Module):
    """[N, T] tokens -> [N, T, 3] scores: T varies from batch to batch."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 3)

    def forward(self, tokens):
        return self.emb(tokens)


def _sequences(lengths):
    g = torch.Generator().manual_seed(0)
    return [(torch.randint(0, 10, (4, t), generator=g), torch.randint(0, 3, (4, t), generator=g))
            for t in lengths]


def test_metrics_take_batches_of_different_sequence_lengths(mlp):
    batches = _sequences([5, 7, 5, 9, 3])
    model = sampan.Model(Tagger())
    model.prepare(torch.optim.SGD(model.network.parameters(), lr=0.0),
                  lambda out, y: torch.nn.functional.cross_entropy(out.transpose(1, 2), y), Accuracy())
    result = model.evaluate(DataLoader(batches, batch_size=None), verbose=0)
    with torch.no_grad():
        hits = sum(int((model.network(x).argmax(-1) == y).sum()) for x, y in batches)
    assert result["acc"] == pytest.approx(hits / sum(y.numel() for _, y in batches))
    model.fit(DataLoader(batches, batch_size=None), epochs=1, log_freq=10, verbose=0)


def test_evaluate_feeds_the_metrics_as_it_goes(blobs, mlp):
    """An evaluation set is never held whole: the metrics are fed every MAX_BUFFERED batches at most."""
    from sampan.hapi.metrics import MAX_BUFFERED

    calls = []

    class Counting(Accuracy):
        def update(self, outputs, labels):
            calls.append(len(labels))
            super().update(outputs, labels)

    model = sampan.Model(mlp())
    model.prepare(None, torch.nn.CrossEntropyLoss(), Counting())
    model.evaluate(blobs[0], batch_size=4, log_freq=1000, verbose=0)  # 48 batches
    assert max(calls) <= MAX_BUFFERED * 4 and sum(calls) == 192


def test_train_batch_accumulates_into_the_metric_as_paddle_does(blobs, mlp):
    acc = Accuracy()
    model = sampan.Model(mlp())
    model.prepare(torch.optim.SGD(model.network.parameters(), lr=0.0), torch.nn.CrossEntropyLoss(), acc)
    x, y = blobs[0].tensors
    hits = 0
    for i in range(0, 40, 8):
        with torch.no_grad():
            batch_hits = int((model.network(x[i:i + 8]).argmax(1) == y[i:i + 8]).sum())
        hits += batch_hits
        _, (value,) = model.train_batch([x[i:i + 8]], [y[i:i + 8]])
        assert value == pytest.approx(batch_hits / 8)  # the batch's own value, as Paddle's update returns
    assert acc.accumulate() == [pytest.approx(hits / 40)]  # and the metric holds all five batches
    acc.reset()
    assert acc.accumulate() == [0.0]


def test_early_stopping_from_an_earlier_fit_starts_afresh(blobs, mlp):
    stop = EarlyStopping(monitor="eval_loss", patience=1, verbose=0)
    first = prepared(mlp(seed=0))
    first.fit(blobs[0], blobs[1], epochs=6, verbose=0, callbacks=[stop])
    second = prepared(mlp(seed=1), lr=0.0)  # learns nothing: the loss stays flat
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        second.fit(blobs[0], blobs[1], epochs=3, verbose=0, callbacks=[stop])
    assert stop.best_epoch == 0 and stop.stopped_epoch == 1
    for a, b in zip(second.network.parameters(), mlp(seed=1).parameters()):
        assert torch.equal(a, b)  # its own best weights, never the first model's
