"""The pieces of the classroom without a hub: course sync, roster, progress store, the client outside a hub."""
from __future__ import annotations

import asyncio
import errno
import io
import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sampan.hub.client import post_event
from sampan.hub.course import main as course_main
from sampan.hub.course import LOCALE_SETTINGS, sync_course
from sampan.hub.progress_store import ProgressStore
from sampan.hub.roster import read_roster
from sampan.hub.service import PAGED, hub_users


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


def test_a_sync_that_stops_part_way_still_updates_the_files_it_copied(tmp_path, monkeypatch):
    """A sync that stopped (disk full, the prepare timeout) saved no state: every file it had copied was from then
    on taken for the learner's edit and never updated again."""
    course, mine = tmp_path / "course", tmp_path / "home" / "course"
    course.mkdir()
    for name in ("a.ipynb", "b.ipynb", "c.ipynb"):
        (course / name).write_text(f"{name} v1")
    real, calls = shutil.copyfile, []

    def disk_full_at_the_third(src, dst, *args, **kwargs):
        calls.append(src)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(shutil, "copyfile", disk_full_at_the_third)
    with pytest.raises(OSError, match="No space left"):
        sync_course(course, mine)
    monkeypatch.setattr(shutil, "copyfile", real)
    assert sync_course(course, mine).copied == ["c.ipynb"]
    (mine / ".sampan-course.json").unlink()  # a state lost another way: a file equal to the course is recorded
    assert sync_course(course, mine).kept == []
    for name in ("a.ipynb", "b.ipynb", "c.ipynb"):
        (course / name).write_text(f"{name} v2 (the teacher's fix)")
    assert sync_course(course, mine).updated == ["a.ipynb", "b.ipynb", "c.ipynb"]
    assert (mine / "a.ipynb").read_text() == "a.ipynb v2 (the teacher's fix)"


def test_a_course_source_that_is_not_a_folder_is_refused(tmp_path, capsys):
    """`python -m sampan.hub.course` (Kubernetes' postStart hook) with a wrong SOURCE said "0 copied" and
    succeeded, leaving the learner an empty course."""
    assert course_main([str(tmp_path / "notebookz"), str(tmp_path / "home" / "course")]) == 2
    err = capsys.readouterr().err
    assert f"Received: SOURCE='{tmp_path / 'notebookz'}'" in err and "HINT: check the course's path" in err
    assert "values.yaml" in err and not (tmp_path / "home").exists()
    with pytest.raises(NotADirectoryError, match="Expected `SOURCE` to be the course folder"):
        sync_course(tmp_path / "notebookz", tmp_path / "home" / "course")


def test_the_spawner_prepares_a_home_in_a_fresh_process_that_loads_no_torch(tmp_path):
    """The spawner runs prepare_home in a new interpreter at every server start (as the learner account): it
    imports sampan, which must not pull in torch (seconds of CPU per start for a class of thirty)."""
    import subprocess
    import sys

    from sampan.hub.spawner import _PREPARE

    course = tmp_path / "course"
    (course / "lessons").mkdir(parents=True)
    (course / "lessons" / "a.ipynb").write_text("{}")
    home = tmp_path / "home"
    home.mkdir()
    code = _PREPARE + "assert not {'torch', 'numpy'} & set(sys.modules), sorted(sys.modules)\n"
    done = subprocess.run([sys.executable, "-s", "-c", code, str(home), str(course), "", "zh"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout.splitlines()[-1])[0] == ["lessons/a.ipynb"]
    assert (home / "course" / "lessons" / "a.ipynb").read_text() == "{}"
    assert json.loads((home / LOCALE_SETTINGS).read_text()) == {"locale": "zh_CN"}  # a Chinese class's menus


def test_a_roster_saved_by_a_spreadsheet_reads_and_a_duplicate_is_refused(tmp_path):
    bom = tmp_path / "bom.csv"  # Excel's "CSV UTF-8": a byte-order mark, CRLF, a header in capitals
    bom.write_bytes("Username,Role\r\nkim,teacher\r\nlee,student\r\n".encode("utf-8-sig"))
    assert read_roster(bom) == {"kim": "teacher", "lee": "student"}
    dup = tmp_path / "dup.csv"
    dup.write_text("username,role\nkim,teacher\nlee,student\nKim,student\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"dup\.csv line 4 username` to be a name not already on line 2.*"
                                         r"Received: .*'Kim'.*HINT: keep one of lines 2 and 4"):
        read_roster(dup)
    gbk = tmp_path / "gbk.csv"
    gbk.write_bytes("username,role\nlee,student\nli.lei,student\n# 李雷\n".encode("gbk"))
    with pytest.raises(ValueError, match=r"Expected `roster` to be a UTF-8 text file.*gbk\.csv.*save it as CSV UTF-8"):
        read_roster(gbk)


def test_the_roster_of_the_dashboard_follows_every_page_of_the_hubs_user_list():
    """JupyterHub answers GET /hub/api/users 200 users at a time: a class of 230 showed 200."""
    everyone = [{"name": f"s{i:03d}"} for i in range(230)]
    asked = []

    async def hub_api(url: str):  # JupyterHub's paginated answer, as apihandlers/base.py builds it
        asked.append(url)
        offset = int(url.partition("offset=")[2].partition("&")[0] or 0)
        nxt = {"offset": offset + 100, "limit": 100, "url": "http://elsewhere/"} if offset + 100 < 230 else None
        return {"items": everyone[offset:offset + 100], "_pagination": {"offset": offset, "limit": 100,
                                                                       "total": 230, "next": nxt}}

    assert asyncio.run(hub_users(hub_api, "http://hub/hub/api/users")) == everyone
    assert asked == ["http://hub/hub/api/users", "http://hub/hub/api/users?offset=100&limit=100",
                     "http://hub/hub/api/users?offset=200&limit=100"]
    assert PAGED == "application/jupyterhub-pagination+json"

    async def old_hub(url: str):
        return everyone[:3]

    assert asyncio.run(hub_users(old_hub, "http://hub/hub/api/users")) == everyone[:3]


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


def test_lesson_ids_of_any_script_and_exercise_names_as_written_are_stored():
    """The course manifest takes Unicode lesson ids (第一课) and exercise names are the author's text: the store
    refused both, so the teacher's dashboard never saw them."""
    store = ProgressStore(":memory:")
    store.add("lee", {"lesson": "第一课", "status": "passed"})
    store.add("lee", {"lesson": "v1.2", "status": "failed", "exercise": "Übung 1: Form (2×3)"})
    assert store.lesson_status("lee")["第一课"]["status"] == "done"
    assert store.class_summary(["lee"])["lessons"]["v1.2"]["most_failed"] == ["Übung 1: Form (2×3)"]
    for lesson in ("..", ".hidden", "a/b", "a b", "x" * 129, ""):
        with pytest.raises(ValueError, match="Expected `lesson` to be a lesson id: letters, digits"):
            store.add("lee", {"lesson": lesson, "status": "started"})
    for exercise in ("q1\nq2", "x" * 129, "", "  ", "abc\u202edef", "tab\there"):
        with pytest.raises(ValueError, match="Expected `exercise` to be an exercise name .*without control"):
            store.add("lee", {"lesson": "l1", "status": "passed", "exercise": exercise})


class _Refusing(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.dumps({"error": "Expected `lesson` to be a lesson id: letters, digits"}).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_the_client_prints_why_the_service_refused_an_event(monkeypatch, capsys):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("SAMPAN_PROGRESS_URL", f"http://127.0.0.1:{server.server_address[1]}/api/events")
        monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "x")
        assert post_event("a b", "passed", timeout=10) is False
    finally:
        server.shutdown()
        server.server_close()
    assert "(HTTP 400: Expected `lesson` to be a lesson id: letters, digits)" in capsys.readouterr().err


def test_client_sends_nothing_outside_a_hub(monkeypatch):
    monkeypatch.delenv("SAMPAN_PROGRESS_URL", raising=False)
    assert post_event("l1", "passed") is False
    monkeypatch.setenv("SAMPAN_PROGRESS_URL", "http://127.0.0.1:9/none")  # a hub that is down: one line, no raise
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "x")
    assert post_event("l1", "passed", timeout=2) is False
