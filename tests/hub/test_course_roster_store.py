"""The pieces of the classroom without a hub: course sync, roster, progress store, the client outside a hub."""
from __future__ import annotations

import io

import pytest

from sampan.hub.client import post_event
from sampan.hub.course import main as course_main
from sampan.hub.course import sync_course
from sampan.hub.progress_store import ProgressStore
from sampan.hub.roster import read_roster


def test_course_sync_copies_new_files_updates_untouched_ones_and_keeps_edits(tmp_path):
    course, mine = tmp_path / "course", tmp_path / "home" / "course"
    (course / "01").mkdir(parents=True)
    (course / "01" / "a.ipynb").write_text("a1")
    (course / "01" / "b.ipynb").write_text("b1")
    (course / ".ipynb_checkpoints").mkdir()
    (course / ".ipynb_checkpoints" / "x.ipynb").write_text("junk")
    first = sync_course(course, mine)
    assert sorted(first.copied) == ["01/a.ipynb", "01/b.ipynb"] and not (mine / ".ipynb_checkpoints").exists()
    (mine / "01" / "a.ipynb").write_text("my answer")           # the learner edits a
    (course / "01" / "a.ipynb").write_text("a2")                # the teacher updates a and b, adds c
    (course / "01" / "b.ipynb").write_text("b2")
    (course / "01" / "c.ipynb").write_text("c1")
    second = sync_course(course, mine)
    assert (second.copied, second.updated, second.kept) == (["01/c.ipynb"], ["01/b.ipynb"], ["01/a.ipynb"])
    assert (mine / "01" / "a.ipynb").read_text() == "my answer"
    assert (mine / "01" / "b.ipynb").read_text() == "b2"
    (mine / "01" / "c.ipynb").unlink()                          # a deleted file comes back
    assert sync_course(course, mine).copied == ["01/c.ipynb"]
    assert course_main([str(course), str(mine)]) == 0 and course_main([]) == 2


def test_roster_reads_roles_and_names_bad_lines():
    assert read_roster(io.StringIO("username,role\nKim,teacher\nlee,\nta1,assistant\n")) == {
        "kim": "teacher", "lee": "student", "ta1": "assistant"}
    with pytest.raises(ValueError, match="line 3 role.*one of teacher, assistant, student"):
        read_roster(io.StringIO("username,role\nlee,student\nkim,boss\n"))
    with pytest.raises(ValueError, match="line 2 username"):
        read_roster(io.StringIO("username,role\n../x,student\n"))
    with pytest.raises(ValueError, match="header row is 'username,role'"):
        read_roster(io.StringIO("name\nlee\n"))


def test_progress_store_summaries_and_csv(tmp_path):
    store = ProgressStore(str(tmp_path / "p.sqlite"))
    store.add("lee", {"lesson": "l1", "status": "started"})
    store.add("lee", {"lesson": "l1", "status": "failed", "exercise": "q1"})
    store.add("kim", {"lesson": "l1", "status": "failed", "exercise": "q1"})
    store.add("kim", {"lesson": "l1", "status": "failed", "exercise": "q2"})
    store.add("lee", {"lesson": "l1", "status": "passed", "exercise": "q1"})
    store.add("lee", {"lesson": "l1", "status": "passed"})
    again = ProgressStore(str(tmp_path / "p.sqlite"))  # a restarted service reads the same file
    summary = again.class_summary(["kim", "lee", "new"])
    assert summary["learners"]["lee"]["l1"]["status"] == "done"
    assert summary["learners"]["lee"]["l1"]["exercises_passed"] == 1
    assert summary["learners"]["kim"]["l1"] == {**summary["learners"]["kim"]["l1"], "status": "in progress",
                                                "exercises_passed": 0}
    assert summary["lessons"]["l1"]["done"] == 1 and summary["lessons"]["l1"]["learners"] == 3
    assert summary["lessons"]["l1"]["most_failed"] == ["q1", "q2"]
    rows = again.csv_export(["kim", "lee", "new"]).splitlines()
    assert rows[1].startswith("kim,l1,in progress,0,") and rows[3] == "new,l1,not started,0,"
    for bad, match in [({"lesson": "l1", "status": "done"}, "status"), ({"lesson": "../x", "status": "passed"},
                       "lesson"), ([], "JSON object"), ({"lesson": "l1", "status": "started", "exercise": "q"},
                       "passed or failed")]:
        with pytest.raises(ValueError, match=match):
            store.add("lee", bad)


def test_client_sends_nothing_outside_a_hub(monkeypatch):
    monkeypatch.delenv("SAMPAN_PROGRESS_URL", raising=False)
    assert post_event("l1", "passed") is False
    monkeypatch.setenv("SAMPAN_PROGRESS_URL", "http://127.0.0.1:9/none")  # a hub that is down: one line, no raise
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "x")
    assert post_event("l1", "passed", timeout=2) is False
