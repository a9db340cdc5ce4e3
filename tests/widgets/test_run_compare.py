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
    # what tells the runs apart comes first: the differing parameter, the metrics, then the parameters in common
    assert table.index(">optimizer.lr</th>") < table.index(">eval_acc</th>") < table.index(">epochs</th>")
    assert table.count("<th") == table.count("<td") // 3  # the head has as many columns as each of the 3 rows
    assert view._curves_view.value.count("<polyline") == 3 and "eval_acc by step" in view._curves_view.value
    assert view._parallel.value.count("<polyline") == 3
    # each axis says its values: optimizer.lr from its lowest to its highest learning rate, then the metric's range
    ticks = re.findall(r'<text class="tick"[^>]*>([^<]*)</text>', view._parallel.value)
    assert ticks[:2] == ["0.01", "0.3"] and len(ticks) == 4
    accs = sorted(r.metrics["eval_acc"] for r in view.runs)
    assert ticks[2:] == [f"{accs[0]:.3g}", f"{accs[-1]:.3g}"] or accs[0] == accs[-1]
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


@pytest.fixture
def dollar_runs(monkeypatch):
    """Two runs recorded straight into the store (no fit): one named with a `$...$` pair matplotlib would read
    as mathtext, one with a parameter value like that."""
    from sampan.experiments import store

    monkeypatch.setenv("SAMPAN_EXPERIMENT", f"compare-dollars-{uuid.uuid4().hex[:8]}")
    client, eid = store.client(), store.experiment_id()
    for name, lr in (("baseline", "0.1"), ("a $x^$ b", "cost $5 vs $10^")):
        run = client.create_run(eid, run_name=name)
        client.log_param(run.info.run_id, "lr", lr)
        client.log_param(run.info.run_id, "epochs", "3")
        for step in range(3):
            client.log_metric(run.info.run_id, "eval_acc", 0.5 + step / 10, step=step)
        client.set_terminated(run.info.run_id)


def _displayed(view, monkeypatch):
    """What displaying the view in a kernel (JupyterLab, Voilà, papermill) sends: the widget and its picture."""
    import IPython.display

    import sampan_widgets.experiments as module

    shown = []
    monkeypatch.setattr(module, "in_kernel", lambda: True)
    monkeypatch.setattr(IPython.display, "display", lambda bundle, **kw: shown.append(bundle))
    view._ipython_display_()
    assert len(shown) == 1
    return shown[0]


def test_a_run_name_with_dollar_signs_is_drawn_as_typed_not_as_mathtext(dollar_runs, recorder, monkeypatch):
    from sampan_widgets import RunCompare

    view = RunCompare(metric="eval_acc", select=2)
    assert sorted(r.name for r in view.runs) == ["a $x^$ b", "baseline"]
    bundle = _displayed(view, monkeypatch)
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["image/png"] and view.picture_error is None  # the saved notebook's picture was drawn
    legend = [t.get_text() for t in view.figure().axes[0].get_legend().get_texts()]
    assert r"a \$x^\$ b" in legend  # an escaped `$` draws as a plain dollar sign
    view.close()


def test_a_picture_that_cannot_be_drawn_never_keeps_the_widget_from_showing(dollar_runs, recorder, monkeypatch):
    from sampan_widgets import RunCompare

    view = RunCompare(metric="eval_acc", select=2)

    def broken():
        raise RuntimeError("no font for this text")

    monkeypatch.setattr(view, "figure", broken)
    bundle = _displayed(view, monkeypatch)
    assert "application/vnd.jupyter.widget-view+json" in bundle and "image/png" not in bundle
    assert view.picture_error == "RuntimeError: no font for this text"
    view.close()


@pytest.mark.parametrize("uri, named", [("bogus://nowhere", "bogus://nowhere"),
                                        ("sqlite:////proc/nope/mlflow.db", "/proc/nope")])
def test_a_store_that_cannot_be_opened_is_shown_above_the_table_not_raised(uri, named, recorder, monkeypatch):
    from sampan_widgets import RunCompare

    monkeypatch.setenv("SAMPAN_TRACKING_URI", uri)
    view = RunCompare()  # in Voilà an exception here is a page with a generic error and no view
    assert view.runs == [] and view.error_source == "store" and named in view.error
    table = view._table.value
    assert 'class="sampan-store-error"' in table and "SAMPAN_TRACKING_URI" in table
    assert "sampan-filter-error" not in table
    view._refresh_button.click()  # pressing refresh says it again, still without an exception
    assert view.error_source == "store" and 'class="sampan-store-error"' in view._table.value
    view.close()


def test_on_refresh_callbacks_run_after_every_refresh_failed_or_not(dollar_runs, recorder):
    from sampan_widgets import RunCompare

    view = RunCompare()
    seen = []
    view.on_refresh(lambda v: seen.append((len(v.runs), v.error_source)))
    view._refresh_button.click()
    view._filter.value = "params.lr > 0.05"  # MLflow cannot search it: the runs are kept
    view._filter.value = "params.lr = '0.1'"
    assert seen == [(2, None), (2, "filter"), (1, None)]
    view.close()


def test_the_compare_view_has_no_english_words_in_chinese(dollar_runs, recorder, monkeypatch):
    from sampan_widgets import RunCompare

    monkeypatch.setenv("SAMPAN_LANG", "zh")
    view = RunCompare(metric="eval_acc", select=2)
    words = re.compile(r"\b(no run selected|parameters differ|no parameters|run|status|parameters|no metric logged)\b")
    visible = lambda markup: re.sub(r"<[^>]+>", " ", markup)  # noqa: E731
    table, parallel = visible(view._table.value), visible(view._parallel.value)
    assert "2 个参数中有 1 个不同" in table and "运行" in table and "状态" in table and "参数 → eval_acc" in parallel
    assert not words.findall(table) and not words.findall(parallel), (table, parallel)
    view.select([])
    assert visible(view._table.value).strip() == "未选择运行"
    assert view.curves_svg([], None) == "<i>还没有记录指标</i>"
    view.close()
