"""The Voilà dashboards' code (notebooks/dashboards/) run without a kernel: what a viewer sees after pressing
their buttons, with a broken store, a failing training or a damaged report."""
from __future__ import annotations

import json
import threading
import uuid

import pytest


def test_the_experiments_dashboard_headline_follows_refresh(recorder, monkeypatch, run_dashboard):
    """The headline ("N runs loaded", "No runs yet … press refresh") is redrawn when the viewer presses refresh."""
    from sampan.experiments import store

    monkeypatch.setenv("SAMPAN_EXPERIMENT", f"headline-{uuid.uuid4().hex[:8]}")  # a new, empty experiment
    ns = run_dashboard("experiments")
    view, headline = ns["view"], ns["store"]
    assert " 0 runs loaded" in headline.value and "No runs yet" in headline.value
    client = store.client()
    run = client.create_run(store.experiment_id(), run_name="first-run")
    client.set_terminated(run.info.run_id)
    view._refresh_button.click()
    assert len(view.runs) == 1 and " 1 runs loaded" in headline.value and "No runs yet" not in headline.value
    assert "store: <code>" in headline.value
    view.close()
    monkeypatch.setenv("SAMPAN_EXPERIMENT", f"headline-{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("SAMPAN_LANG", "zh")  # the Chinese page: its words and its full-width colon
    ns = run_dashboard("experiments")
    text = ns["store"].value
    assert "记录库：<code>" in text and " 0 次运行已加载" in text and "还没有运行记录" in text, text
    ns["view"].close()



def _samplers():
    return {t for t in threading.enumerate() if t.name == "sampan-resource-sampler" and t.is_alive()}


def test_a_failed_training_leaves_no_sampler_thread_and_closes_the_last_views(recorder, monkeypatch, run_dashboard):
    monkeypatch.setenv("SAMPAN_TRACKING_URI", "bogus://nowhere")  # every fit fails as it starts recording
    before = _samplers()
    ns = run_dashboard("training_monitor")
    ns["epochs"].value, ns["limit"].value = 1, 200
    ns["train_button"].click()
    first = ns["views"].children
    assert "Training failed" in ns["status"].value and "SAMPAN_TRACKING_URI" in ns["status"].value
    ns["train_button"].click()
    assert ns["views"].children != first and all(view.comm is None for view in first)  # closed, not left behind
    assert _samplers() == before
    for view in ns["views"].children:
        view.close()


@pytest.fixture
def report_runs(tmp_path, monkeypatch):
    """A runs folder: a good report, a damaged one, a foreign one (a language this version lacks), a bare one."""
    good = {"mode": "quick", "run_dir": "runs/x", "started": "t0", "finished": "t1", "parameters": {},
            "summary": {"passed": 1, "failed": 0, "skipped": 0, "not_run": 0}, "language": "en",
            "lessons": [{"lesson": "warm_up", "stage": "beginner", "title": "Warm up", "notebook": "warm_up.ipynb",
                         "status": "passed", "output": "beginner/warm_up.ipynb", "duration_s": 1.0, "reason": "",
                         "error": None, "metrics": []}]}
    reports = {"20260101-000000": json.dumps(good), "20260102-000000": "{",
               "20260103-000000": json.dumps({**good, "language": "fr"}),
               "20260104-000000": json.dumps({"lessons": [], "summary": {}})}
    for name, text in reports.items():
        (tmp_path / "runs" / name).mkdir(parents=True)
        (tmp_path / "runs" / name / "report.json").write_text(text, encoding="utf-8")
    monkeypatch.setenv("SAMPAN_RUNS_DIR", str(tmp_path / "runs"))
    return tmp_path / "runs"


def test_a_damaged_report_is_labelled_and_explained_and_the_others_stay_usable(report_runs, recorder, run_dashboard):
    ns = run_dashboard("path_report")  # one bad report.json used to fail the whole page
    picker, page = ns["picker"], ns["page"]
    labels = dict((value.rsplit("/", 1)[-1], label) for label, value in picker.options)
    assert labels["20260102-000000"].startswith("20260102-000000 · (unreadable: JSONDecodeError")
    assert labels["20260101-000000"] == "20260101-000000 · quick · 1 passed, 0 failed"
    picker.value = str(report_runs / "20260102-000000")
    assert 'class="sampan-report-error"' in page.value and "JSONDecodeError" in page.value
    picker.value = str(report_runs / "20260104-000000")  # readable, but not a report: said, not raised
    assert 'class="sampan-report-error"' in page.value and "not a learning-path report" in page.value
    picker.value = str(report_runs / "20260103-000000")  # a language this version lacks: drawn in English
    assert "Warm up" in page.value and "1 passed" in page.value
    picker.value = str(report_runs / "20260101-000000")
    assert "Warm up" in page.value and "sampan-report-error" not in page.value


def test_the_executed_notebook_is_named_not_linked_in_the_dashboard(report_runs, recorder, run_dashboard):
    ns = run_dashboard("path_report")  # a link relative to the run folder is a 403 from the Voilà page
    ns["picker"].value = str(report_runs / "20260101-000000")
    page = ns["page"].value
    assert "href=" not in page and '<code class="output">beginner/warm_up.ipynb</code>' in page
