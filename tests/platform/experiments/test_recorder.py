"""Every Model.fit is an MLflow run; MLflow's own client reads back what Sampan wrote."""
from __future__ import annotations

import os
import time

import pytest
import torch

import sampan
import sampan.experiments as ex
from sampan.callbacks import ModelCheckpoint


def _fit(net, blobs, **kw):
    model = sampan.Model(net, inputs=sampan.InputSpec([None, 16], "float32", "x"))
    model.prepare(torch.optim.Adam(net.parameters(), 3e-3, weight_decay=1e-4), torch.nn.CrossEntropyLoss(),
                  sampan.metric.Accuracy())
    model.fit(blobs[0], blobs[1], epochs=3, batch_size=32, verbose=0, log_freq=2, **kw)
    return model


def _runs(uri):
    ex.flush()
    from mlflow.tracking import MlflowClient  # imported here, not when every worker collects this file

    client = MlflowClient(tracking_uri=uri)  # MLflow's own client, not Sampan's
    exp = client.get_experiment_by_name(os.environ["SAMPAN_EXPERIMENT"])
    return client, (client.search_runs([exp.experiment_id]) if exp else [])


def test_a_fit_is_a_run_that_mlflow_reads_back(fresh_store, blobs, mlp, tmp_path, monkeypatch, one_thread):
    monkeypatch.setenv("SAMPAN_LESSON", "first_model")
    _fit(mlp(), blobs, callbacks=[ModelCheckpoint(tmp_path / "ckpt", save_freq=0, monitor="eval_acc",
                                                  save_best_only=True)])
    client, runs = _runs(fresh_store)
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "FINISHED"
    p = run.data.params
    assert (p["optimizer"], float(p["optimizer.lr"]), float(p["optimizer.weight_decay"])) == ("Adam", 3e-3, 1e-4)
    assert (p["epochs"], p["batch_size"], p["loss"], p["metrics"]) == ("3", "32", "CrossEntropyLoss", "Accuracy")
    assert int(p["params_total"]) == sum(q.numel() for q in mlp().parameters())
    assert int(p["flops"]) > 0 and p["device"] == "cpu" and p["seed"].isdigit()
    assert run.data.tags["sampan.lesson"] == "first_model" and run.data.tags["sampan.source"]
    assert run.data.tags["version.torch"] == torch.__version__
    history = client.get_metric_history(run.info.run_id, "eval_acc")
    assert [m.step for m in history] == [1, 2, 3]
    assert all(0.0 <= m.value <= 1.0 for m in history)
    steps = client.get_metric_history(run.info.run_id, "step/loss")
    assert [m.step for m in steps] == list(range(2, 19, 2))  # 6 batches x 3 epochs, every 2nd step
    assert client.get_metric_history(run.info.run_id, "system/rss")[0].value > 0
    assert [f.path for f in client.list_artifacts(run.info.run_id, "checkpoints")] == ["checkpoints/best.pt"]


def test_recording_turns_off_with_one_switch(fresh_store, blobs, mlp, monkeypatch, one_thread):
    ex.disable()
    try:
        _fit(mlp(), blobs)
    finally:
        ex.enable()
    monkeypatch.setenv("SAMPAN_TRACKING", "0")
    _fit(mlp(), blobs)
    monkeypatch.delenv("SAMPAN_TRACKING")
    _fit(mlp(), blobs)
    _, runs = _runs(fresh_store)
    assert len(runs) == 1


def test_own_recorder_names_the_run_and_is_not_doubled(fresh_store, blobs, mlp, one_thread):
    rec = ex.Recorder(run_name="baseline", tags={"idea": "wider"})
    _fit(mlp(), blobs, callbacks=[rec])
    _, runs = _runs(fresh_store)
    assert [(r.info.run_name, r.data.tags["idea"], r.info.run_id) for r in runs] == [("baseline", "wider", rec.run_id)]
    assert ex.search_runs("tags.idea = 'wider'")[0].info.run_id == rec.run_id


def test_a_long_fit_is_in_the_store_while_it_trains(fresh_store, blobs, mlp, monkeypatch, one_thread):
    from sampan.callbacks import Callback
    from sampan.experiments import recorder

    monkeypatch.setattr(recorder, "WRITE_EVERY", 0.0)  # as if every epoch took longer than WRITE_EVERY
    seen = {}

    class Peek(Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 1:
                runs = ex.search_runs()  # flushes the writes so far
                seen["status"] = runs[0].info.status
                seen["epochs"] = [m.step for m in ex.client().get_metric_history(runs[0].info.run_id, "loss")]

    _fit(mlp(), blobs, callbacks=[Peek()])
    assert seen == {"status": "RUNNING", "epochs": [1]}  # Peek runs before the recorder sees epoch 2
    assert _runs(fresh_store)[1][0].info.status == "FINISHED"


def test_an_interrupted_fit_is_recorded_killed_and_a_failing_one_failed(fresh_store, blobs, mlp, one_thread):
    from sampan.callbacks import Callback

    class Boom(Callback):
        def __init__(self, exc):
            super().__init__()
            self.exc = exc

        def on_epoch_end(self, epoch, logs=None):
            if epoch == 1:  # before the recorder sees epoch 2: epoch 1 is all it has
                raise self.exc

    for exc in (KeyboardInterrupt(), RuntimeError("boom")):
        try:
            _fit(mlp(), blobs, callbacks=[Boom(exc)])
        except (KeyboardInterrupt, RuntimeError):
            pass
    _, runs = _runs(fresh_store)  # no later fit in this thread: the runs ended as the exceptions left fit
    assert sorted(r.info.status for r in runs) == ["FAILED", "KILLED"]
    for run in runs:
        assert [m.step for m in ex.client().get_metric_history(run.info.run_id, "loss")] == [1]


def test_a_recorder_reused_across_fits_ends_every_run(fresh_store, blobs, mlp, monkeypatch, one_thread):
    from sampan.callbacks import Callback
    from sampan.experiments import recorder

    class Slow(Callback):  # each epoch takes longer than creating a run
        def on_epoch_end(self, epoch, logs=None):
            time.sleep(0.15)

    call = recorder._via_service

    def slow_write(op, *args, **kw):  # a busy store: the next fit begins while the writer still writes this one's
        time.sleep(0.5 if op == "write" else 0)
        return call(op, *args, **kw)

    monkeypatch.setattr(recorder, "WRITE_EVERY", 0.0)  # as if every fit were longer than WRITE_EVERY
    rec = ex.Recorder(run_name="more")
    model = sampan.Model(mlp())
    model.prepare(torch.optim.SGD(model.network.parameters(), 0.1), torch.nn.CrossEntropyLoss())
    model.fit(blobs[0], epochs=1, batch_size=64, verbose=0, callbacks=[rec])
    assert rec.run_id  # the recording service is up: creating a run takes milliseconds now
    monkeypatch.setattr(recorder, "_via_service", slow_write)
    for _ in range(3):  # "train 2 more epochs" in a loop
        model.fit(blobs[0], epochs=2, batch_size=64, verbose=0, callbacks=[rec, Slow()])
    _, runs = _runs(fresh_store)
    assert len(runs) == 4 and rec.run_id == runs[0].info.run_id
    assert [r.info.status for r in runs] == ["FINISHED"] * 4
    assert [len(ex.client().get_metric_history(r.info.run_id, "loss")) for r in runs] == [2, 2, 2, 1]


def test_recorder_refuses_a_bad_log_freq_before_training(fresh_store):
    for bad in (0, "5", 2.5):
        with pytest.raises(ValueError, match=rf"Expected `log_freq` to be an int >= 1. Received: log_freq={bad!r}"):
            ex.Recorder(log_freq=bad)


def test_an_export_is_kept_with_the_latest_run(fresh_store, blobs, mlp, tmp_path, one_thread):
    model = _fit(mlp(), blobs)
    export = tmp_path / "mlp-weights.pt"  # any file: model.save(path, training=False) gives a .pt2 the same way
    torch.save(model.network.state_dict(), export)
    run_id = ex.log_artifact(export)
    assert run_id == ex.last_run_id() and ex.search_runs()[0].info.run_id == run_id
    assert [f.path for f in ex.client().list_artifacts(run_id, "exports")] == [f"exports/{export.name}"]


def test_an_export_of_a_recorded_model_goes_with_its_run(fresh_store, blobs, mlp, tmp_path, one_thread):
    model = _fit(mlp(), blobs)
    target = model.save(tmp_path / "mlp", training=False)
    run_id = ex.last_run_id()
    kept = sorted(f.path for f in ex.client().list_artifacts(run_id, "exports"))
    assert kept == ["exports/mlp.meta.json", f"exports/{target.name}"]
    # the kept copy is the exported file itself, byte for byte
    local = ex.client().download_artifacts(run_id, f"exports/{target.name}", str(tmp_path / "back"))
    assert open(local, "rb").read() == target.read_bytes()


def test_an_export_of_an_unrecorded_fit_is_kept_nowhere(fresh_store, blobs, mlp, tmp_path, monkeypatch,
                                                        one_thread):
    monkeypatch.setenv("SAMPAN_TRACKING", "0")
    model = _fit(mlp(), blobs)
    target = model.save(tmp_path / "mlp", training=False)
    assert target.is_file()
    assert ex.search_runs() == []  # no run was made, and the export did not make one
