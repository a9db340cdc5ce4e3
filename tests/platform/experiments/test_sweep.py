"""Sweeps: ranges, refusals before anything runs, failing and pruned trials, two workers on one store."""
from __future__ import annotations

import pytest
import torch

import sampan
import sampan.experiments as ex
from sampan.experiments.space import parse_spec


@pytest.mark.parametrize("spec, kind", [("1e-4:1e-1:log", "float"), ("0:0.5", "float"), ("1:4", "int"),
                                        ("32,64", "choice"), ("0:1:0.25", "float")])
def test_ranges_parse(spec, kind):
    assert parse_spec("x", spec)["kind"] == kind


@pytest.mark.parametrize("spec", ["abc:1", "1:2:3:4", "5:1", "0:1:log", "", ",", " , ,"])
def test_unparseable_range_names_the_parameter_and_the_forms(spec):
    with pytest.raises(ValueError, match=r"Expected `lr` to be a sweep range .*LOW:HIGH:log.*A,B,C"):
        parse_spec("lr", spec)


def test_undefined_parameter_is_refused_before_anything_runs(fit_notebook, fresh_store, data_home):
    with pytest.raises(ValueError, match=r"'momentum', which it does not define; it defines: lr, width, fail"):
        ex.sweep(fit_notebook, {"lr": "1e-3:1e-1:log", "momentum": "0:0.9"}, trials=2)
    assert not (data_home / "sweeps").exists()
    assert ex.search_runs() == []


def test_function_sweep_records_trials_prunes_and_survives_a_failing_trial(fresh_store, blobs, mlp, one_thread):
    def train(lr, width):
        if width == 3:
            raise RuntimeError("width 3 is broken")
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(16, width), torch.nn.ReLU(), torch.nn.Linear(width, 2))
        model = sampan.Model(net)
        model.prepare(torch.optim.SGD(net.parameters(), lr), torch.nn.CrossEntropyLoss(), sampan.metric.Accuracy())
        model.fit(blobs[0], blobs[1], epochs=4, batch_size=32, verbose=0)
        return model.evaluate(blobs[1], verbose=0)["acc"]

    handle = ex.sweep(train, {"lr": "1e-3:3e-1:log", "width": [3, 16]}, trials=8, metric="eval_acc")
    trials = handle.wait(timeout=300).trials()
    states = [t.state.name for t in trials]
    assert len(trials) == 8 and "COMPLETE" in states
    runs = {r.data.tags["sampan.trial"]: r for r in handle.runs()}
    assert len(runs) == 8
    for t in trials:
        run = runs[str(t.number)]
        assert float(run.data.params["lr"]) == pytest.approx(t.params["lr"])
        if t.params["width"] == 3:
            assert t.state.name == "FAIL" and run.info.status == "FAILED"
            assert run.data.tags["sampan.error"] == "RuntimeError: width 3 is broken"
        elif t.state.name == "COMPLETE":
            assert run.info.status == "FINISHED" and run.data.metrics["eval_acc"] == pytest.approx(t.value)
        else:
            assert t.state.name == "PRUNED" and run.info.status == "KILLED"
    # each fit is a child run of its trial's run
    children = ex.search_runs("tags.`sampan.kind` = 'fit'")
    assert {c.data.tags["mlflow.parentRunId"] for c in children} <= {r.info.run_id for r in runs.values()}
    assert len(children) == sum(t.params["width"] != 3 for t in trials)


@pytest.mark.slow
def test_two_notebook_workers_on_one_sqlite_store_lose_nothing(fit_notebook, fresh_store):
    handle = ex.sweep(fit_notebook, {"lr": "0.01:0.5:log", "width": "4,8"}, trials=2, jobs=2, pruner="none")
    trials = handle.wait(timeout=600).trials()
    assert [t.state.name for t in trials] == ["COMPLETE"] * 2
    trial_runs = handle.runs()
    assert len(trial_runs) == 2 and all(r.info.status == "FINISHED" for r in trial_runs)
    from mlflow.tracking import MlflowClient  # imported here, not when every worker collects this file

    client = MlflowClient(tracking_uri=fresh_store)
    fits = ex.search_runs("tags.`sampan.kind` = 'fit'")
    assert sorted(f.data.tags["mlflow.parentRunId"] for f in fits) == sorted(r.info.run_id for r in trial_runs)
    for fit in fits:
        for name in ("loss", "acc", "eval_loss", "eval_acc"):
            assert [m.step for m in client.get_metric_history(fit.info.run_id, name)] == [1, 2, 3]
    by_id = {f.data.tags["mlflow.parentRunId"]: f for f in fits}
    for run in trial_runs:  # the trial's value is its fit's last eval_acc
        assert run.data.metrics["eval_acc"] == pytest.approx(by_id[run.info.run_id].data.metrics["eval_acc"])


def test_sweep_command_refuses_bad_parameters_before_anything_runs(fit_notebook, fresh_store, data_home, capsys):
    from sampan.cli import main

    assert main(["sweep", str(fit_notebook), "-p", "lr=1e-3:1e-1:log", "-p", "momentum=0:0.9"]) == 2
    err = capsys.readouterr().err
    assert "'momentum', which it does not define; it defines: lr, width, fail" in err
    assert main(["sweep", str(fit_notebook), "-p", "lr=1e-3:"]) == 2
    err = capsys.readouterr().err
    assert "Expected `lr` to be a sweep range" in err and "LOW:HIGH:log" in err and "Received: lr='1e-3:'" in err
    assert main(["sweep", str(fit_notebook), "-p", "lr"]) == 2
    assert "Expected `-p` to be KEY=VALUE" in capsys.readouterr().err
    assert not (data_home / "sweeps").exists()


def test_a_seeded_sweep_proposes_the_same_parameters_again(fresh_store):
    """A lesson ranges its sweep's best result: with ``seed`` the sampler draws the same parameters every run."""
    def objective(lr, width):
        return lr * width

    space = {"lr": "1e-3:1:log", "width": "4,8,16"}
    drawn = [[t.params for t in ex.sweep(objective, space, trials=4, metric="score", seed=7, wait=True,
                                          pruner="none").trials()] for _ in range(2)]
    assert drawn[0] == drawn[1] and len({t["lr"] for t in drawn[0]}) == 4
    with pytest.raises(ValueError, match="Expected `seed`"):
        ex.sweep(objective, space, trials=1, metric="score", seed="7")


def test_continuing_a_study_with_another_metric_or_direction_is_refused(fresh_store):
    def objective(lr):
        return lr

    ex.sweep(objective, {"lr": "0:1"}, trials=1, metric="score", direction="maximize", name="cont", wait=True)
    for kw, wrong in (({"metric": "other", "direction": "maximize"}, r"`metric`.*Received: metric='other'"),
                      ({"metric": "score", "direction": "minimize"}, r"`direction`.*Received: direction='minimize'")):
        with pytest.raises(ValueError, match=wrong + r".*HINT: give another name \(--name\) to start a new study, or "
                                                     r"continue this one with .*--metric score --direction maximize"):
            ex.sweep(objective, {"lr": "0:1"}, trials=1, name="cont", **kw)
    again = ex.sweep(objective, {"lr": "0:1"}, trials=1, metric="score", direction="maximize", name="cont", wait=True)
    assert len(again.trials()) == 2  # the same objective continues


def test_sweep_command_words_its_own_options(fit_notebook, fresh_store, data_home, capsys):
    from sampan.cli import main

    assert main(["sweep", str(fit_notebook)]) == 2
    err = capsys.readouterr().err
    assert "HINT: pass at least one -p KEY=RANGE" in err and "{'lr'" not in err
    assert main(["sweep", str(fit_notebook), "-p", "lr=0.1", "--trials", "0"]) == 2
    assert "Received: --trials=0. HINT: pass --trials 1 or more" in capsys.readouterr().err
    assert main(["sweep", str(fit_notebook), "-p", "width=,"]) == 2
    assert "Expected `width` to be a sweep range" in capsys.readouterr().err
    assert main(["sweep", str(fit_notebook), "-p", "lr=0.1", "--kernel", "no-such-kernel"]) == 2
    err = capsys.readouterr().err
    assert "Expected `kernel` to be an installed Jupyter kernel (" in err and "no-such-kernel" in err
    assert not (data_home / "sweeps").exists()


def test_failing_notebook_trials_are_recorded_and_the_command_says_why(fit_notebook, fresh_store, data_home, capsys):
    """Each failing trial's run keeps its error, cell and source, and the command prints each error and the
    workers' logs (one sweep for both: each notebook trial costs a kernel)."""
    from sampan.cli import main
    from sampan.experiments.store import search_runs

    assert main(["sweep", str(fit_notebook), "-p", "fail=True", "--trials", "2", "--jobs", "3", "--name", "f"]) == 1
    out, err = capsys.readouterr()
    assert "sweep f: 2 trials on 2 worker(s)" in out
    assert out.count("error: ValueError: this trial was asked to fail") == 2
    assert f"worker log: {data_home / 'sweeps' / 'f' / 'worker-0.log'}" in err and "no trial completed" in err
    runs = search_runs("tags.`sampan.sweep` = 'f' and tags.`sampan.kind` = 'trial'")
    assert len(runs) == 2
    for run in runs:
        assert run.info.status == "FAILED"
        assert run.data.tags["sampan.error"] == "ValueError: this trial was asked to fail"
        assert run.data.tags["sampan.failed_cell"] == "2"  # the injected parameters cell comes first
        assert "raise ValueError" in run.data.tags["sampan.failed_source"]


def test_wait_raises_timeout_error_once_its_one_deadline_passes():
    import subprocess
    import sys
    import threading
    import time

    from sampan.experiments.sweeps import Sweep

    sleepers = [threading.Thread(target=time.sleep, args=(s,), daemon=True) for s in (0.6, 1.5)]
    for t in sleepers:
        t.start()
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"sweep threads still running after 1.0 s"):
        Sweep("threads", "", "score", "maximize", sleepers).wait(timeout=1.0)  # not 1 s for each worker
    assert time.monotonic() - started < 1.4
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with pytest.raises(TimeoutError, match=r"sweep procs still running after 0.2 s"):  # not TimeoutExpired
            Sweep("procs", "", "score", "maximize", [proc]).wait(timeout=0.2)
    finally:
        proc.kill()
        proc.wait()


def test_best_of_a_sweep_without_a_completed_trial_says_why(fresh_store, data_home):
    def train(lr):
        raise RuntimeError("typo in my training function")

    handle = ex.sweep(train, {"lr": "1e-3:0.5:log"}, trials=2, metric="score", name="all-fail", wait=True)
    for attribute in ("best_params", "best_value"):
        with pytest.raises(sampan.SampanError, match=r"Sweep 'all-fail' has no completed trial, so no best one "
                                                     r"\(2 fail\)\. HINT: .*`sampan.error` tag.*worker-\*\.log"):
            getattr(handle, attribute)
    assert handle.runs()[0].data.tags["sampan.error"] == "RuntimeError: typo in my training function"
