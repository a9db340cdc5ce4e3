"""RunCompare without a browser: runs recorded by real fits, drawn through a recording comm."""
from __future__ import annotations

import re
import uuid

import pytest
import torch

import sampan
import sampan.experiments as ex


@pytest.fixture
def three_runs(monkeypatch, blobs, mlp):
    monkeypatch.setenv("SAMPAN_EXPERIMENT", f"compare-{uuid.uuid4().hex[:8]}")
    names = []
    for lr in (0.3, 0.05, 0.01):
        net = mlp()
        model = sampan.Model(net)
        model.prepare(torch.optim.SGD(net.parameters(), lr), torch.nn.CrossEntropyLoss(), sampan.metric.Accuracy())
        rec = ex.Recorder(run_name=f"lr-{lr}")
        model.fit(blobs[0], blobs[1], epochs=3, batch_size=32, verbose=0, callbacks=[rec])
        names.append(rec.run_id)
    return names


def test_table_highlights_what_differs_and_curves_overlay_the_selection(three_runs, recorder):
    from sampan_widgets import RunCompare

    view = RunCompare(metric="eval_acc", select=3)
    assert [r.run_id for r in view.runs] == three_runs[::-1]  # newest first
    table = view._table.value
    assert len(re.findall('class="sampan-run-row"', table)) == 3
    assert "1 of " in table and "parameters differ" in table  # only optimizer.lr differs
    assert re.search(r'<th style="background:#fff3c4">optimizer.lr</th>', table)
    assert not re.search(r'<th style="background:#fff3c4">epochs</th>', table)
    assert view._curves_view.value.count("<polyline") == 3 and "eval_acc by step" in view._curves_view.value
    assert view._parallel.value.count("<polyline") == 3
    # the view reached the frontend through the comm
    assert any("sampan-compare-table" in u.get("value", "") for u in recorder.updates())

    view.select(three_runs[:2])
    assert len(re.findall('class="sampan-run-row"', view._table.value)) == 2
    assert view._curves_view.value.count("<polyline") == 2
    par = view._parallel.value
    assert par.count('stroke="#bbb"') == 1  # the unselected run stays, in grey: parameters linked to the table
    view._metric.value = "loss"
    assert "loss by step" in view._curves_view.value
    curves = view.curves("eval_acc")
    assert all([s for s, _ in points] == [1, 2, 3] for points in curves.values())
    assert view.figure() is not None
    view.close()


def test_a_filter_narrows_the_runs(three_runs, recorder):
    from sampan_widgets import RunCompare

    view = RunCompare("params.`optimizer.lr` = '0.05'")
    assert [r.name for r in view.runs] == ["lr-0.05"]
    assert "0 of " in view._table.value
    view.close()


def test_a_filter_mlflow_cannot_search_is_shown_and_the_runs_are_kept(three_runs, recorder):
    from sampan_widgets import RunCompare

    view = RunCompare(select=3)
    before = [r.run_id for r in view.runs]
    view._filter.value = "params.lr > 0.05"  # what a learner types: MLflow compares params only with = != LIKE
    assert [r.run_id for r in view.runs] == before and view.error
    table = view._table.value
    assert 'class="sampan-filter-error"' in table and "params.lr &gt; 0.05" in table
    assert len(re.findall('class="sampan-run-row"', table)) == 3  # the runs before it are still shown
    view._filter.value = "params.`optimizer.lr` = '0.05'"
    assert view.error is None and "sampan-filter-error" not in view._table.value
    assert [r.name for r in view.runs] == ["lr-0.05"]
    fresh = RunCompare("bad filter (((")  # made with one: no exception either
    assert fresh.runs == [] and "sampan-filter-error" in fresh._table.value
    view.close()
    fresh.close()


def test_a_metric_no_run_logged_is_named_with_the_logged_ones(three_runs, recorder):
    from sampan_widgets import RunCompare

    with pytest.warns(UserWarning, match=r"Expected `metric` to be a metric the runs logged \(.*eval_acc.*\)\. "
                                         r"Received: metric='nonexistent'"):
        view = RunCompare(metric="nonexistent")
    assert view._metric.value == "eval_acc"
    view.close()


def test_the_view_follows_a_running_sweep(monkeypatch, blobs, mlp, recorder):
    import time

    from sampan_widgets import RunCompare

    monkeypatch.setenv("SAMPAN_EXPERIMENT", f"compare-sweep-{uuid.uuid4().hex[:8]}")

    def train(lr):
        net = mlp()
        model = sampan.Model(net)
        model.prepare(torch.optim.SGD(net.parameters(), lr), torch.nn.CrossEntropyLoss(), sampan.metric.Accuracy())
        model.fit(blobs[0], blobs[1], epochs=2, batch_size=64, verbose=0)
        return model.evaluate(blobs[1], verbose=0)["acc"]

    handle = ex.sweep(train, {"lr": "0.01:0.5:log"}, trials=3, pruner="none")
    view = RunCompare(f"tags.`sampan.sweep` = '{handle.name}' and tags.`sampan.kind` = 'trial'", metric="eval_acc",
                      sweep=handle, refresh_s=0.2)
    handle.wait(timeout=120)
    deadline = time.monotonic() + 30
    while len(view.runs) < 3 or any(r.status == "RUNNING" for r in view.runs):
        assert time.monotonic() < deadline, [r.status for r in view.runs]
        time.sleep(0.2)
    assert sorted(r.params["lr"] for r in view.runs) == sorted(str(t.params["lr"]) for t in handle.trials())
    assert "optimizer" not in view._table.value and "lr" in view._table.value  # trial runs: the swept values
    view.close()
