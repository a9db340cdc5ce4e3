"""``report.html`` from a report dict: as a page beside its run folder, or shown elsewhere (the dashboard), and
what a report that is damaged or from another version gives."""
from __future__ import annotations

import re

import pytest

from sampan.path.report import render_html


def _report(**changes):
    lesson = {"lesson": "warm_up", "stage": "beginner", "title": "Warm up", "notebook": "warm_up.ipynb",
              "status": "passed", "output": "beginner/warm_up.ipynb", "duration_s": 1.0, "reason": "", "error": None,
              "metrics": []}
    return {"mode": "quick", "run_dir": "runs/x", "started": "t0", "finished": "t1", "parameters": {},
            "summary": {"passed": 1, "failed": 0, "skipped": 0, "not_run": 0}, "language": "en",
            "lessons": [lesson], **changes}


def test_the_executed_notebook_is_a_link_in_the_run_folder_and_text_elsewhere():
    beside = render_html(_report())  # report.html lies in the run folder: the relative link reaches the notebook
    assert re.findall(r'href="([^"]*)"', beside) == ["beginner/warm_up.ipynb"]
    shown = render_html(_report(), links=False)  # the path_report dashboard: the same link would be a 403
    assert "href=" not in shown
    assert 'executed notebook: <code class="output">beginner/warm_up.ipynb</code>' in shown
    hostile = render_html(_report(lessons=[{**_report()["lessons"][0], "output": "<img src=x onerror=alert(1)>"}]),
                          links=False)
    assert "<img" not in hostile and "&lt;img src=x" in hostile


def test_a_report_in_a_language_this_version_lacks_is_drawn_in_english():
    page = render_html(_report(language="fr"))
    assert '<html lang="en">' in page and "1 passed" in page


@pytest.mark.parametrize("data, problem", [({"lessons": [], "summary": {}}, "no attribute 'mode'"),
                                           ([], "it is a list, not an object"),
                                           (_report(summary=[1, 2]), "'list object' has no attribute 'passed'")])
def test_data_that_is_not_a_report_is_a_clear_value_error(data, problem):
    with pytest.raises(ValueError, match=r"not a learning-path report that this version can show \(.*"
                                         + re.escape(problem) + r".*HINT: open a report\.json written by"):
        render_html(data)


@pytest.mark.parametrize("lang, started, finished, expected", [
    ("en", "2026-12-06T18:41:50+00:00", "2026-12-06T18:44:55+00:00",
     "started 2026-12-06 18:41:50 UTC, finished 2026-12-06 18:44:55 UTC, took 3 min 05 s."),
    ("zh", "2026-12-07T08:00:00+08:00", "2026-12-07T09:02:30+08:00",
     "开始于 2026-12-07 08:00:00 UTC+08:00，结束于 2026-12-07 09:02:30 UTC+08:00，用时 1 小时 02 分。"),
    ("en", "t0", "t1", "started t0, finished t1."),  # not ISO times (an older or hand-made report): as they are
])
def test_the_run_times_read_as_a_person_writes_them(lang, started, finished, expected):
    page = render_html(_report(language=lang, started=started, finished=finished))
    assert expected in re.sub(r"\s+", " ", page)
