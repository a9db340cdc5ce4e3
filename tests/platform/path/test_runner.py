"""sampan.path.run on planted lessons: failures with their cell, ranges, parameters, progress, run folders."""
from __future__ import annotations

import contextlib
import io
import json

import pytest

import sampan.path

@pytest.fixture(scope="module")
def first_run(tmp_path_factory, plant):
    base = tmp_path_factory.mktemp("pathrun")
    manifest = plant(base / "notebooks")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        report = sampan.path.run(lesson=["good", "broken", "out_of_range", "after"], quick=True, keep_going=True,
                                 manifest=manifest, output_dir=base / "runs", data_dir=base / "data", seed=7)
    return report, base, manifest, err.getvalue()


def test_failed_lesson_is_reported_with_its_cell_and_others_are_kept(first_run):
    report, *_ = first_run
    data = json.loads(report.json_path.read_text())
    status = {x["lesson"]: x["status"] for x in data["lessons"]}
    assert status == {"good": "passed", "broken": "failed", "out_of_range": "failed", "after": "passed"}
    broken = report.result("broken")
    # the cell as the lesson is written: markdown 0, parameters 1, `x = 1` 2, the raise 3
    assert broken.error["cell_index"] == 3
    assert broken.error["ename"] == "ValueError" and "planted failure" in broken.error["evalue"]
    assert "raise ValueError" in broken.error["source"]
    assert "cell 3" in broken.reason
    assert "acc" not in broken.records  # the cell after the failure never ran
    html = report.html_path.read_text()
    assert 'id="failure-broken"' in html and "planted failure" in html and "in cell 3" in html
    for lesson in ("good", "out_of_range", "after"):  # earlier and later outputs are kept
        assert (report.run_dir / report.result(lesson).output).is_file()
    assert data["summary"] == {"passed": 2, "failed": 2, "skipped": 0, "not_run": 0}
    assert not report.ok


def test_metrics_are_checked_against_the_quick_ranges(first_run):
    report, *_ = first_run
    good = report.result("good").metrics[0]
    assert (good["name"], good["value"], good["low"], good["high"], good["ok"]) == ("acc", 0.9, 0.8, 1.0, True)
    bad = report.result("out_of_range")
    assert bad.status == "failed" and "5 is outside [0, 1]" in bad.reason
    assert bad.metrics[0]["ok"] is False


def test_parameters_reach_the_lessons(first_run):
    report, base, *_ = first_run
    rec = report.result("good").records
    assert rec["quick_seen"] is True
    assert rec["data_dir_seen"] == str((base / "data").resolve()) == rec["env_data"]
    assert rec["seed_seen"] == 7
    # lessons run inside the run folder: what they write never lands beside the course notebooks
    assert rec["cwd"] == str(report.run_dir / "beginner")
    assert rec["sampan.path.done"] == "good"
    assert report.parameters == {"QUICK": True, "DATA_DIR": rec["data_dir_seen"], "SEED": 7}
    # the artifact produced by `good` reached `after` through the zoo
    assert report.result("after").records["acc"] == 0.5


def test_progress_bar_over_lessons(first_run):
    *_, stderr = first_run
    assert "4/4" in stderr and "lesson" in stderr


def test_passing_lessons_mark_progress(first_run):
    report, base, *_ = first_run
    lessons = json.loads((base / "data" / "progress.json").read_text())["lessons"]
    assert lessons["good"]["status"] == "passed" and lessons["good"]["mode"] == "quick"
    assert lessons["after"]["status"] == "passed"
    assert lessons["broken"]["status"] == "failed"
    assert lessons["good"]["run"] == str(report.run_dir)


def test_second_run_gets_a_new_folder_and_stops_at_the_first_failure(first_run):
    report, base, manifest, _ = first_run
    before = report.json_path.read_text()
    second = sampan.path.run(lesson=["broken", "after"], quick=True, manifest=manifest, output_dir=base / "runs",
                             data_dir=base / "data", progress=False)
    assert second.run_dir != report.run_dir and second.run_dir.parent == report.run_dir.parent
    assert report.json_path.read_text() == before
    assert [r.status for r in second.lessons] == ["failed", "not_run"]
    assert "--keep-going" in second.result("after").reason
    # a failure never erases an earlier pass
    progress = sampan.path.load_progress()  # SAMPAN_DATA is this test's own dir: untouched by the run
    assert progress == {}
    lessons = json.loads((base / "data" / "progress.json").read_text())["lessons"]
    assert lessons["good"]["status"] == "passed"


def test_lesson_timeout_names_the_running_cell(tmp_path, plant):
    manifest = plant(tmp_path / "notebooks")
    report = sampan.path.run(lesson="slow", manifest=manifest, output_dir=tmp_path / "runs", timeout=4,
                             progress=False)
    slow = report.result("slow")
    assert slow.status == "failed" and slow.error["ename"] == "TimeoutError"
    assert slow.error["cell_index"] == 2 and "time.sleep" in slow.error["source"]
    assert "exceeded its timeout of 4 s" in slow.reason


def test_missing_artifact_names_the_producing_lesson(tmp_path, plant):
    manifest = plant(tmp_path / "notebooks")
    report = sampan.path.run(lesson="after", manifest=manifest, output_dir=tmp_path / "runs", progress=False)
    after = report.result("after")
    assert after.status == "failed" and after.output is None
    assert "'tiny_weights'" in after.reason and "produced by lesson 'good'" in after.reason
    assert "sampan path run --lesson good" in after.reason


def test_keep_going_skips_lessons_whose_prerequisite_failed(tmp_path, plant, nb):
    manifest = plant(tmp_path / "notebooks")
    (tmp_path / "notebooks/01-beginner/good.ipynb").unlink()
    nb(tmp_path / "notebooks/01-beginner/good.ipynb", "raise RuntimeError('no')")
    report = sampan.path.run(lesson=["good", "after"], manifest=manifest, output_dir=tmp_path / "runs",
                             keep_going=True, progress=False)
    assert [r.status for r in report.lessons] == ["failed", "skipped"]
    assert "prerequisite 'good' failed" in report.result("after").reason


def test_unknown_stage_or_lesson_is_a_clear_error(tmp_path, plant):
    manifest = plant(tmp_path / "notebooks")
    with pytest.raises(ValueError, match=r"Received: stage='expert'.*beginner, intermediate"):
        sampan.path.run(stage="expert", manifest=manifest, output_dir=tmp_path / "runs")
    with pytest.raises(ValueError, match=r"Received: lesson='nope'.*good, broken"):
        sampan.path.run(lesson="nope", manifest=manifest, output_dir=tmp_path / "runs")


def test_a_stage_without_lessons_is_a_clear_error(tmp_path, planted):
    planted.notebook("01-beginner/a.ipynb", "pass")
    file = planted.manifest([{"id": "beginner", "lessons": [{"id": "a", "notebook": "01-beginner/a.ipynb"}]},
                             {"id": "advanced", "lessons": []}])
    with pytest.raises(ValueError, match="Stage 'advanced' has no lessons yet"):
        sampan.path.run(stage="advanced", manifest=file, output_dir=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()  # nothing written for a refused run

