"""Each built-in callback's behaviour inside a real fit."""
import csv
import math
import warnings

import pytest
import torch
from torch.utils.data import TensorDataset

import sampan
from sampan.callbacks import (Callback, CSVLogger, EarlyStopping, LRScheduler, ModelCheckpoint, TerminateOnNaN)
from sampan.metric import Accuracy


def prepared(net, lr=1e-2, opt=None):
    model = sampan.Model(net)
    model.prepare(opt or torch.optim.Adam(net.parameters(), lr=lr), torch.nn.CrossEntropyLoss(), Accuracy())
    return model


class Spy(Callback):
    """Overrides every hook so CallbackList calls them all."""
    def __init__(self):
        super().__init__()
        self.calls = []


for _hook in [n for n in vars(Callback) if n.startswith("on_")]:
    setattr(Spy, _hook, lambda self, *a, _h=_hook: self.calls.append(_h))


def test_hooks_are_called_in_order(blobs, mlp):
    spy = Spy()
    model = prepared(mlp())
    model.fit(blobs[0], blobs[1], epochs=2, batch_size=96, verbose=0, callbacks=[spy])
    c = spy.calls
    assert c[0] == "on_train_begin" and c[-1] == "on_train_end"
    assert c.count("on_epoch_begin") == 2 and c.count("on_epoch_end") == 2
    assert c.count("on_train_batch_begin") == 4 and c.count("on_train_batch_end") == 4
    assert c.count("on_eval_begin") == 2 and c.count("on_eval_batch_end") == 2
    first_epoch = c[: c.index("on_epoch_end") + 1]
    assert first_epoch == ["on_train_begin", "on_epoch_begin", "on_train_batch_begin", "on_train_batch_end",
                           "on_train_batch_begin", "on_train_batch_end", "on_eval_begin", "on_eval_batch_begin",
                           "on_eval_batch_end", "on_eval_end", "on_epoch_end"]
    spy.calls.clear()
    model.predict(blobs[1], batch_size=64, verbose=0, callbacks=[spy])
    assert spy.calls == ["on_predict_begin", "on_predict_batch_begin", "on_predict_batch_end", "on_predict_end"]


def test_callback_list_rejects_non_callbacks(blobs, mlp):
    with pytest.raises(TypeError, match=r"sampan.callbacks.Callback. Received: 'oops'"):
        prepared(mlp()).fit(blobs[0], verbose=0, callbacks=["oops"])


def test_early_stopping_stops_and_restores_best_weights(blobs, mlp):
    train, val = blobs

    class Worsen(Callback):  # plants a validation loss that is best at epoch 1 (0-based), then rises
        def on_epoch_end(self, epoch, logs=None):
            logs["eval_loss"] = [0.9, 0.5, 0.6, 0.7, 0.8, 0.9][epoch]
            self.snap = getattr(self, "snap", {})
            self.snap[epoch] = {k: v.clone() for k, v in self.model.network.state_dict().items()}

    worsen = Worsen()
    stop = EarlyStopping(monitor="eval_loss", patience=2, verbose=0)
    model = prepared(mlp())
    history = model.fit(train, val, epochs=6, verbose=0, callbacks=[worsen, stop])
    assert history.epoch == [0, 1, 2, 3] and stop.stopped_epoch == 3 and stop.best_epoch == 1
    for k, v in model.network.state_dict().items():
        assert torch.equal(v, worsen.snap[1][k])


def test_early_stopping_min_delta_mode_and_baseline(blobs, mlp):
    stop = EarlyStopping(monitor="eval_acc", baseline=1.01, patience=1, verbose=0)
    assert stop.tracker.mode == "max"
    model = prepared(mlp())
    history = model.fit(blobs[0], blobs[1], epochs=5, verbose=0, callbacks=[stop])
    assert len(history.epoch) == 1  # the baseline is never beaten
    with pytest.raises(ValueError, match=r"Expected `mode` to be 'auto', 'min' or 'max'. Received: mode='up'"):
        EarlyStopping(mode="up")
    with pytest.warns(UserWarning, match=r"`monitor`='eval_f1' is not in the logs"):
        prepared(mlp()).fit(blobs[0], epochs=1, verbose=0, callbacks=[EarlyStopping(monitor="eval_f1")])


def test_model_checkpoint_every_n_and_best_only(blobs, mlp, tmp_path):
    model = prepared(mlp())
    model.fit(blobs[0], blobs[1], epochs=4, verbose=0,
              callbacks=[ModelCheckpoint(tmp_path / "every", save_freq=2)])
    assert sorted(p.name for p in (tmp_path / "every").iterdir()) == ["2.pt", "4.pt", "final.pt"]
    best = ModelCheckpoint(tmp_path / "best", monitor="eval_acc", save_best_only=True)
    model.fit(blobs[0], blobs[1], epochs=2, verbose=0, callbacks=[best])
    assert [p.name for p in (tmp_path / "best").iterdir()] == ["best.pt"]
    saved = torch.load(tmp_path / "best" / "best.pt", weights_only=True)
    assert saved["epoch"] >= 1
    with pytest.raises(ValueError, match=r"Expected `monitor` to be a logged name when save_best_only=True"):
        ModelCheckpoint(tmp_path, save_best_only=True)


def test_lr_scheduler_by_epoch_by_step_and_plateau(blobs, mlp):
    net = mlp()
    opt = torch.optim.SGD(net.parameters(), lr=1.0)
    model = prepared(net, opt=opt)
    h = model.fit(blobs[0], epochs=3, batch_size=64, verbose=0,
                  callbacks=[LRScheduler(torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.1))])
    assert h["lr"] == pytest.approx([1.0, 0.1, 0.01])

    net = mlp()
    opt = torch.optim.SGD(net.parameters(), lr=1.0)
    model = prepared(net, opt=opt)
    model.fit(blobs[0], epochs=1, batch_size=64, verbose=0,   # 3 optimizer steps
              callbacks=[LRScheduler(torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5), by_step=True, by_epoch=False)])
    assert opt.param_groups[0]["lr"] == pytest.approx(0.125)

    net = mlp()
    opt = torch.optim.SGD(net.parameters(), lr=1.0)
    model = prepared(net, opt=opt)

    class Flat(Callback):
        def on_epoch_end(self, epoch, logs=None):
            logs["eval_loss"] = 1.0

    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0, factor=0.5)
    model.fit(blobs[0], epochs=3, batch_size=64, verbose=0, callbacks=[Flat(), LRScheduler(plateau)])
    assert opt.param_groups[0]["lr"] == pytest.approx(0.25)
    with pytest.raises(TypeError, match=r"Expected `scheduler` to be a torch.optim.lr_scheduler instance"):
        LRScheduler(opt)


def test_csv_logger_writes_a_row_per_epoch(blobs, mlp, tmp_path):
    path = tmp_path / "logs" / "train.csv"
    prepared(mlp()).fit(blobs[0], blobs[1], epochs=3, verbose=0, callbacks=[CSVLogger(path)])
    rows = list(csv.DictReader(path.open()))
    assert [r["epoch"] for r in rows] == ["1", "2", "3"]
    assert {"loss", "acc", "eval_loss", "eval_acc", "lr"} <= set(rows[0])
    assert all(math.isfinite(float(r["eval_acc"])) for r in rows)
    prepared(mlp()).fit(blobs[0], epochs=1, verbose=0, callbacks=[CSVLogger(path, append=True)])
    assert len(list(csv.DictReader(path.open()))) == 4


def test_terminate_on_nan_can_just_stop(mlp):
    x = torch.randn(32, 16)
    x[8:] = float("inf")
    stopper = TerminateOnNaN(raise_error=False)
    model = prepared(mlp())
    model.fit(TensorDataset(x, torch.zeros(32, dtype=torch.long)), batch_size=8, shuffle=False, epochs=3,
              verbose=0, callbacks=[stopper])
    assert model.stop_training and "batch 1" in stopper.message and model.global_step == 2


def test_history_keeps_step_losses_and_converts_to_a_dataframe(blobs, mlp):
    h = prepared(mlp()).fit(blobs[0], epochs=2, batch_size=64, verbose=0)
    assert len(h.steps) == 6 and all(isinstance(v, float) for v in h.steps)
    df = h.to_dataframe()
    assert list(df.index) == [0, 1] and "loss" in df.columns


def test_reduce_on_plateau_with_eval_freq_watches_the_evaluation_only(blobs, mlp):
    """Epochs without evaluation leave ReduceLROnPlateau alone; the training loss never stands in for eval_loss."""
    net = mlp()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0, factor=0.5)
    seen = []

    class Watch(Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.append(("eval_loss" in logs, opt.param_groups[0]["lr"]))

    model = prepared(net, opt=opt)
    model.fit(blobs[0], blobs[1], epochs=4, eval_freq=2, verbose=0, callbacks=[LRScheduler(plateau), Watch()])
    assert [has for has, _ in seen] == [False, True, False, True]
    assert plateau.last_epoch == 2  # stepped on epochs 2 and 4 only
    assert seen[0][1] == 0.1  # epoch 1: no evaluation, no step (the training loss went to it before)


def test_history_keeps_one_entry_per_epoch_with_eval_freq(blobs, mlp):
    history = prepared(mlp()).fit(blobs[0], blobs[1], epochs=3, eval_freq=2, verbose=0)
    assert len(history["loss"]) == len(history["eval_loss"]) == 3
    assert math.isnan(history["eval_loss"][0]) and not math.isnan(history["eval_loss"][1])
    frame = history.to_dataframe()
    assert list(frame.index) == [0, 1, 2] and frame["eval_acc"].isna().tolist() == [True, False, False]


def test_monitor_missing_on_an_epoch_without_evaluation_is_not_a_warning(blobs, mlp):
    stop = EarlyStopping(monitor="eval_loss", patience=5, verbose=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prepared(mlp()).fit(blobs[0], blobs[1], epochs=3, eval_freq=2, verbose=0, callbacks=[stop])
    assert stop.best_epoch in (1, 2)
    with pytest.warns(UserWarning, match=r"`monitor`='eval_los' is not in the logs.*HINT: monitor one of those"):
        prepared(mlp()).fit(blobs[0], blobs[1], epochs=1, verbose=0, callbacks=[EarlyStopping(monitor="eval_los")])


def test_model_checkpoint_best_starts_afresh_in_a_new_fit(blobs, mlp, tmp_path):
    best = ModelCheckpoint(tmp_path, monitor="eval_acc", save_best_only=True)
    prepared(mlp(seed=0)).fit(blobs[0], blobs[1], epochs=3, verbose=0, callbacks=[best])
    first = (tmp_path / "best.pt").stat().st_mtime_ns
    prepared(mlp(seed=1), lr=0.0).fit(blobs[0], blobs[1], epochs=1, verbose=0, callbacks=[best])
    assert (tmp_path / "best.pt").stat().st_mtime_ns != first  # the new run's first epoch is its best so far



def test_progress_bar_says_why_the_first_step_of_a_decorated_forward_waits(blobs, capsys):
    """Paddle's idiom, ``@to_static`` on the class's ``forward``: the bar says the first step compiles and
    measures, as it does for ``prepare(to_static=True)``, in the first epoch only."""
    class Decorated(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(16, 2)

        @sampan.jit.to_static(backend="eager")
        def forward(self, x):
            return self.linear(x)

    net = Decorated()
    prepared(net).fit(blobs[0], epochs=2, batch_size=96, verbose=1)
    bars = capsys.readouterr().err
    assert bars.count("to_static: compiling and timing the first step") == 1, bars
    assert net.forward.train_choice is not None and net.forward.layer is net


def test_a_fit_that_raises_lets_every_callback_release_what_it_took_and_raises_its_own_error(blobs, mlp, tmp_path):
    """on_train_end never comes for a fit that raised: before on_exception a monitor's sampler thread ran on, a
    profiler stayed on (the next one could not start) and TensorBoard's file kept the last steps unwritten."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from sampan.callbacks import VisualDL
    from sampan.monitor import MonitorCallback
    from sampan.profiler import Profiler, ProfilerCallback

    class Boom(Callback):
        def __init__(self, error):
            super().__init__()
            self.error = error

        def on_train_batch_end(self, step, logs=None):
            if step == 2:
                raise self.error

    class Clumsy(Callback):
        def on_exception(self, exception):
            raise ValueError("clumsy")

    spy, monitor = Spy(), MonitorCallback(interval=0.05, leak_check=False)
    profiling = ProfilerCallback(Profiler())
    model = prepared(mlp())
    callbacks = [spy, monitor, profiling, VisualDL(tmp_path / "log", log_freq=1), Clumsy()]
    with pytest.warns(RuntimeWarning, match=r"Clumsy\.on_exception raised ValueError: clumsy while fit was ending "
                                            r"with RuntimeError"):
        with pytest.raises(RuntimeError, match="boom at step 2"):
            model.fit(blobs[0], epochs=3, batch_size=32, verbose=0,
                      callbacks=[*callbacks, Boom(RuntimeError("boom at step 2"))])
    assert spy.calls[-1] == "on_exception" and "on_train_end" not in spy.calls
    assert not monitor.sampler.running and monitor.sampler.samples
    events = EventAccumulator(str(tmp_path / "log"))
    events.Reload()
    assert [e.step for e in events.Scalars("train/loss")] == [1, 2, 3]  # steps 0..2 (the third raised after)
    # Ctrl-C too; and the profiler is free again: a new fit starts and stops it
    spy.calls.clear()
    with pytest.warns(RuntimeWarning, match="Clumsy"), pytest.raises(KeyboardInterrupt):
        model.fit(blobs[0], epochs=1, batch_size=32, verbose=0, callbacks=[*callbacks, Boom(KeyboardInterrupt())])
    assert spy.calls[-1] == "on_exception" and not monitor.sampler.running
    model.fit(blobs[0], epochs=1, batch_size=32, verbose=0, callbacks=[spy, profiling])
    assert spy.calls[-1] == "on_train_end" and profiling.profiler.recorded
