"""One learner cannot use the class's progress service against classmates or the teacher.

The service (``sampan.hub.service``) reads every learner's gallery and stores everyone's progress events, so
what one learner writes in their own folder or posts from their own server must not expose a classmate's
files, hang the service or its pages for the class, or let a browser page post events as its viewer. Each
attack runs against the real functions, and the event endpoint against the real tornado app behind a stand-in
for the hub's user API.
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

from sampan.hub import progress_store
from sampan.hub.progress_store import ProgressStore, StoreFullError
from sampan.hub.service import published, render_dashboard

SECRET = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
    {"cell_type": "markdown", "id": "s", "metadata": {}, "source": "BOB'S PRIVATE HOMEWORK"}]}


def _gallery(users, user: str, entries: dict) -> object:
    folder = users / user / ".sampan" / "gallery"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "gallery.json").write_text(json.dumps({"dashboards": entries}))
    return folder


def test_a_published_link_to_a_classmates_file_is_not_served(tmp_path):
    users = tmp_path / "users"
    (users / "bob" / "private").mkdir(parents=True)
    (users / "bob" / "private" / "homework.ipynb").write_text(json.dumps(SECRET))
    folder = _gallery(users, "alice", {"stolen": {"name": "stolen", "published_at": "2026-12-05T10:00:00"},
                                       "mine": {"name": "mine", "published_at": "2026-12-05T10:00:00"}})
    (folder / "stolen.ipynb").symlink_to(users / "bob" / "private" / "homework.ipynb")
    (folder / "mine.ipynb").write_text(json.dumps({**SECRET, "cells": [{**SECRET["cells"][0], "source": "MINE"}]}))
    assert render_dashboard(users, "alice", "stolen") is None
    assert "MINE" in render_dashboard(users, "alice", "mine")  # her own dashboard still shows


def test_a_fifo_or_a_huge_file_in_a_gallery_does_not_hang_the_service(tmp_path):
    users = tmp_path / "users"
    folder = users / "mallory" / ".sampan" / "gallery"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "gallery.json")  # opening it for reading would wait for a writer forever
    _gallery(users, "alice", {"app": {"name": "app", "published_at": None}})
    result: list = []
    reader = threading.Thread(target=lambda: result.append(published(users)), daemon=True)
    reader.start()
    reader.join(timeout=20)
    assert result == [[("alice", {"name": "app", "published_at": None})]], "published() hung on a FIFO"
    big = _gallery(users, "eve", {"big": {"name": "big", "published_at": None}})
    with open(big / "big.ipynb", "wb") as fh:  # sparse: 100 GB on paper, nothing on disk
        fh.truncate(100 << 30)
    assert render_dashboard(users, "eve", "big") is None


def test_a_title_in_a_learners_gallery_shows_as_text_in_the_class_gallery(tmp_path):
    """A dashboard's title is the learner's own text (gallery.json is theirs to edit), shown in the teacher's and
    classmates' browsers: markup shows as text, a bidi override or a newline is dropped, a long one is capped,
    and one of another type shows the name."""
    from sampan.hub.gallery import index_notebook
    from sampan.hub.service import render_gallery

    attack = "<script>alert('x')</script><img src=x onerror=alert(1)>\u202e[go](javascript:alert(2)) $x$\n# big"
    users = tmp_path / "users"
    when = "2026-12-05T10:00:00"
    entries = {"xss": {"name": "xss", "published_at": when, "title": attack},
               "long": {"name": "long", "published_at": when, "title": "长" * 1000},
               "odd": {"name": "odd", "published_at": when, "title": {"<script>": 1}}}
    _gallery(users, "mallory", entries)
    page = render_gallery(published(users), live=True)
    assert "<script" not in page and "<img" not in page and "\u202e" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;[go]" in page
    assert "长" * 79 + "…</bdi></a>" in page and "长" * 80 not in page  # at most 80 characters
    assert '<a href="gallery/mallory/odd"><bdi>odd</bdi></a>' in page  # not a string: the name
    cell = index_notebook(entries)["cells"][0]["source"]  # the learner's own gallery page, a markdown cell
    assert "<script" not in cell and "<img src=x" not in cell and "\u202e" not in cell
    assert "](javascript:" not in cell and "$x$" not in cell and "\n# big" not in cell
    assert "&#60;script&#62;alert&#40;&#39;x&#39;&#41;" in cell


def test_a_thumbnail_named_in_gallery_json_is_read_only_from_the_galleries_thumbs_folder(tmp_path, monkeypatch):
    """The gallery page embeds each dashboard's thumbnail as a data URI. A hand-edited or planted gallery.json that
    names another file (a path up and out, an absolute path, a link in thumbs/ to a secret) got that file's
    bytes embedded in the page; now only ``thumbs/<name>.png`` as a plain file is read, anything else shows the
    placeholder."""
    import base64

    from sampan.hub import gallery

    monkeypatch.setenv("SAMPAN_DATA", str(tmp_path / "data"))
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"SECRET-BYTES-" * 8)
    thumbs = gallery.gallery_dir() / "thumbs"
    thumbs.mkdir(parents=True)
    (thumbs / "linked.png").symlink_to(secret)
    (thumbs / "good.png").write_bytes(b"\x89PNG-good")
    when = "2026-12-06T08:00:00+00:00"
    entries = {"up": {"name": "up", "published_at": when, "thumbnail": "../../../secret.png"},
               "absolute": {"name": "absolute", "published_at": when, "thumbnail": str(secret)},
               "linked": {"name": "linked", "published_at": when, "thumbnail": "thumbs/linked.png"},
               "good": {"name": "good", "published_at": when, "thumbnail": "thumbs/good.png"}}
    cell = gallery.index_notebook(entries)["cells"][0]["source"]
    leaked = base64.b64encode(secret.read_bytes()).decode()[:24]
    assert leaked not in cell
    assert cell.count("data:image/svg+xml;base64,") == 3  # the placeholder for each of the three
    assert "data:image/png;base64," + base64.b64encode(b"\x89PNG-good").decode() in cell


def test_a_right_to_left_title_is_isolated_from_the_name_beside_it(tmp_path):
    """An Arabic or Hebrew title (or one with a stray right-to-left mark) reordered the URL name and the cells
    beside it in the class gallery; each title is now its own bidi-isolated run."""
    from sampan.hub.service import render_gallery

    page = render_gallery([("alice", {"name": "arabic", "published_at": None, "title": "لوحة الأرقام 1"})])
    assert '<bdi>لوحة الأرقام 1</bdi></a> <small><code>arabic</code></small>' in page


def test_one_learner_cannot_flood_the_store_that_the_class_pages_summarise(monkeypatch):
    monkeypatch.setattr(progress_store, "MAX_LESSONS_PER_USER", 3)
    monkeypatch.setattr(progress_store, "MAX_EVENTS_PER_USER", 5)
    store = ProgressStore(":memory:")
    for lesson in ("a", "b", "c"):
        store.add("mallory", {"lesson": lesson, "status": "started"})
    with pytest.raises(StoreFullError, match=r"'mallory' has recorded 3 events on 3 lessons.*not stored"):
        store.add("mallory", {"lesson": "d", "status": "started"})
    store.add("mallory", {"lesson": "a", "status": "passed"})  # a known lesson still records
    store.add("mallory", {"lesson": "b", "status": "passed"})
    with pytest.raises(StoreFullError, match="5 events"):
        store.add("mallory", {"lesson": "c", "status": "passed"})
    store.add("alice", {"lesson": "d", "status": "passed"})  # the cap is per learner
    summary = store.class_summary(["alice", "mallory"])
    assert summary["learners"]["alice"]["d"]["status"] == "done"
    assert summary["learners"]["mallory"]["b"]["status"] == "done" and "d" not in summary["learners"]["mallory"]


def test_a_learner_cannot_add_columns_to_the_teachers_page_with_made_up_lessons(tmp_path, monkeypatch):
    """The teacher's table had a column per lesson id any learner posted: one learner could add up to 300 made-up
    columns (``lesson-1``, ``lesson-2``, ...) for the whole class. The columns are now the course's lessons, in the
    course's order (the hub passes the course folder; its path.yaml lists them), in the page, JSON and CSV."""
    from sampan.hub.config import HubSettings, services
    from sampan.hub.service import COURSE_ENV, render_class, render_own
    from sampan.hub.service import course as read_course

    notebooks = Path(__file__).resolve().parents[2] / "notebooks"
    course = read_course(notebooks)[0]
    assert course[:2] == ["environment_check", "tensors_and_autograd"] and len(course) >= 20
    store = ProgressStore(":memory:")
    store.add("alice", {"lesson": "tensors_and_autograd", "status": "passed"})
    for i in range(40):
        store.add("mallory", {"lesson": f"lesson-{i}", "status": "started"})
    people = [{"name": n, "role": "student", "last_activity": None} for n in ("alice", "mallory")]
    summary = store.class_summary(["alice", "mallory"], course)
    assert list(summary["lessons"]) == course and summary["learners"]["mallory"] == {}
    page = render_class(summary, people, store.last_activity())
    assert "lesson-0" not in page
    assert page.index('<th class="n" title="environment_check">1</th>') < page.index('<th class="n" title="serving">')
    assert "lesson-0" not in render_own("mallory", store.lesson_status("mallory"), course_lessons=course)
    assert "lesson-" not in store.csv_export(["alice", "mallory"], course)
    assert "tensors_and_autograd,done" in store.csv_export(["alice"], course)
    assert len(store.class_summary(["mallory"])["lessons"]) == 41  # no course known: every lesson posted
    settings = HubSettings(hub_dir=tmp_path, course_dir=str(notebooks))
    progress = next(s for s in services(settings) if s["name"] == "progress")
    assert progress["environment"][COURSE_ENV] == str(notebooks)  # the hub tells the service where the course is
    broken = tmp_path / "course"
    shutil.copytree(notebooks, broken, ignore=shutil.ignore_patterns("*.ipynb", "figures"))
    (broken / "path.yaml").write_text("stages: [", encoding="utf-8")
    assert read_course(broken) == read_course(tmp_path / "none") == read_course("") == (None, {}, {})


def test_an_exercise_name_a_learner_posts_shows_as_text_on_the_teachers_page():
    """Exercise names are any text now (Unicode, spaces): the teacher's page shows them escaped, and refuses the
    control characters that would break its lines or reorder the text beside them."""
    from sampan.hub.service import render_class, render_own

    store = ProgressStore(":memory:")
    attack = "<script>alert(1)</script><img src=x onerror=alert(2)> Übung"
    store.add("mallory", {"lesson": "第一课", "status": "failed", "exercise": attack})
    people = [{"name": "mallory", "role": "student", "last_activity": None}]
    page = render_class(store.class_summary(["mallory"]), people, store.last_activity())
    assert "<script" not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt; Übung" in page
    assert '<th class="n" title="第一课">1</th>' in page and "第一课" in render_own("mallory", store.lesson_status("mallory"))
    with pytest.raises(ValueError, match="without control characters"):
        store.add("mallory", {"lesson": "l1", "status": "failed", "exercise": "q\u202e1"})


@pytest.fixture
def service(tmp_path, monkeypatch):
    """The real progress app on 127.0.0.1, behind a stand-in for the hub's ``/hub/api/user`` that knows one
    valid token (bob's)."""
    from tornado import httpserver, netutil, web

    class HubUser(web.RequestHandler):
        def get(self):
            if self.request.headers.get("Authorization") == "token bob-token":
                self.finish({"kind": "user", "name": "bob", "admin": False,
                             "scopes": ["access:services!service=progress", "custom:progress:write"]})
            else:
                self.set_status(403)
                self.finish({"status": 403, "message": "bad token"})

    (hub_socket,) = netutil.bind_sockets(0, "127.0.0.1")
    stop = threading.Event()

    def hub():
        async def run():
            httpserver.HTTPServer(web.Application([(r"/hub/api/user", HubUser)])).add_sockets([hub_socket])
            while not stop.is_set():
                await asyncio.sleep(0.05)
        asyncio.run(run())

    thread = threading.Thread(target=hub, daemon=True)
    thread.start()
    env = {"JUPYTERHUB_API_URL": f"http://127.0.0.1:{hub_socket.getsockname()[1]}/hub/api",
           "JUPYTERHUB_API_TOKEN": "service-token", "JUPYTERHUB_SERVICE_PREFIX": "/services/progress/",
           "JUPYTERHUB_CLIENT_ID": "service-progress",
           "JUPYTERHUB_OAUTH_CALLBACK_URL": "/services/progress/oauth_callback",
           "JUPYTERHUB_OAUTH_ACCESS_SCOPES": json.dumps(["access:services!service=progress"]),
           "SAMPAN_HUB_USERS": str(tmp_path / "users")}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    yield tmp_path / "progress.sqlite"
    stop.set()
    thread.join(timeout=10)


def test_events_need_the_servers_token_not_a_browsers_cookie(service):
    from tornado import httpserver, netutil, web
    from tornado.httpclient import AsyncHTTPClient, HTTPRequest

    from sampan.hub.service import make_app

    async def attempt() -> list[int]:
        app = make_app(service)
        (sock,) = netutil.bind_sockets(0, "127.0.0.1")
        server = httpserver.HTTPServer(app)
        server.add_sockets([sock])
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/services/progress/api/events"
        # bob's browser holds the service's cookie; a page he opens posts with it (and a made-up token)
        cookie = "service-progress=" + web.create_signed_value(app.settings["cookie_secret"], "service-progress",
                                                                "bob-token").decode()
        codes = []
        for headers in ({"Cookie": cookie}, {"Cookie": cookie, "Authorization": "token made-up"},
                        {"Authorization": "token bob-token"}):
            request = HTTPRequest(url, method="POST", headers=headers, follow_redirects=False,
                                  body=json.dumps({"lesson": f"l{len(codes)}", "status": "passed"}))
            codes.append((await AsyncHTTPClient().fetch(request, raise_error=False)).code)
        server.stop()
        return codes

    assert asyncio.run(attempt()) == [403, 403, 201]
    assert list(ProgressStore(str(service)).lesson_status("bob")) == ["l2"]  # only the token's post was stored


def test_the_course_sync_never_writes_through_a_learners_link(tmp_path):
    """The hub copies the course into each learner's ``~/course`` (as root when it runs as root): a folder the
    learner replaced by a link must not carry those writes out of their home."""
    from sampan.hub.course import sync_course

    course = tmp_path / "course"
    (course / "lessons").mkdir(parents=True)
    (course / "lessons" / "intro.ipynb").write_text("{}")
    (course / "top.ipynb").write_text("{}")
    outside = tmp_path / "outside"
    outside.mkdir()
    home = tmp_path / "home"
    (home / "course").mkdir(parents=True)
    (home / "course" / "lessons").symlink_to(outside, target_is_directory=True)
    report = sync_course(course, home / "course")
    assert report.kept == ["lessons/intro.ipynb"] and report.copied == ["top.ipynb"]
    (home / "other").symlink_to(outside, target_is_directory=True)
    assert sync_course(course, home / "other").kept == ["lessons/intro.ipynb", "top.ipynb"]
    assert list(outside.iterdir()) == []


def test_the_hub_folder_is_private_to_the_hubs_account(tmp_path, monkeypatch):
    import stat

    from traitlets.config import Config

    from sampan.hub.config import HubSettings, configure

    settings = HubSettings(hub_dir=tmp_path / "hub", live="off", learner_user="root")
    (tmp_path / "hub").mkdir(mode=0o755)
    configure(Config(), settings)
    assert stat.S_IMODE((tmp_path / "hub").stat().st_mode) == 0o700


def _runnable_by_anyone(monkeypatch) -> None:
    """The account checks need this Python readable by the account; in CI it lies in root's private home, so
    the checks are pointed at a system program instead (the switch itself runs /usr/bin/id)."""
    from sampan.hub import live

    monkeypatch.setattr(live, "_python_files", lambda: [Path("/usr/bin/id")])


def test_as_root_the_learners_servers_run_as_an_unprivileged_account(tmp_path, monkeypatch):
    """A hub run as root started every server as root (a root shell for each learner). With
    ``SAMPAN_HUB_LEARNER_USER`` they run as that account, in a home it owns, and read none of the hub's files."""
    from traitlets.config import Config

    from sampan.hub.config import HubSettings, configure, learner_account

    if os.geteuid() != 0:  # without root the servers run as the hub's account, as documented
        assert learner_account("") is None
        return
    with pytest.raises(ValueError, match="Expected `SAMPAN_HUB_LEARNER_USER` to be the account"):
        learner_account("")
    assert learner_account("root") is None  # asked for: every learner is root (a container given to the class)
    _runnable_by_anyone(monkeypatch)
    assert learner_account("nobody") == "nobody"
    with pytest.raises(ValueError, match="'nobody' runs the live dashboards"):
        learner_account("nobody", live_user="nobody")

    with pytest.raises(ValueError, match=r"Expected `SAMPAN_HUB_DIR` to be a folder 'nobody' can pass through"):
        configure(Config(), HubSettings(hub_dir=tmp_path / "hub", live="off", learner_user="nobody"))
    base = Path(tempfile.mkdtemp(prefix="sampan-hub-test-", dir="/tmp"))  # tmp_path lies under a 0700 folder
    try:
        _learners_as_nobody(base, tmp_path, monkeypatch)
    finally:
        shutil.rmtree(base)


def _learners_as_nobody(base, tmp_path, monkeypatch) -> None:
    import pwd
    import stat
    import subprocess
    from types import SimpleNamespace

    from traitlets.config import Config

    from sampan.hub.config import HubSettings, configure
    from sampan.hub import spawner as spawner_module
    from sampan.hub.course import LOCALE_SETTINGS
    from sampan.hub.spawner import SampanSpawner, _hand_over

    base.chmod(0o755)
    hub, config = base / "hub", Config()
    configure(config, HubSettings(hub_dir=hub, live="off", learner_user="nobody"))
    assert config.SampanSpawner.learner_user == "nobody"
    assert stat.S_IMODE(hub.stat().st_mode) == 0o711 == stat.S_IMODE((hub / "users").stat().st_mode)
    # the cookie secret too: JupyterHub would write it 0644 and chmod it after, a window for a learner's open()
    assert {f.name: stat.S_IMODE(f.stat().st_mode) for f in hub.iterdir() if f.is_file()} == {
        "jupyterhub.sqlite": 0o600, "progress.sqlite": 0o600, "jupyterhub_cookie_secret": 0o600}
    assert len((hub / "jupyterhub_cookie_secret").read_text().strip()) == 64

    nobody = pwd.getpwnam("nobody")
    old = hub / "users" / "bob"
    (old / "course").mkdir(parents=True)  # made before the hub ran learners as nobody: a walk could be raced
    with pytest.raises(RuntimeError, match=r"holds files made before.*HINT: stop every process of 'nobody'"):
        _hand_over(old, "nobody")
    assert old.stat().st_uid == 0
    home = hub / "users" / "alice"
    home.mkdir()
    _hand_over(home, "nobody")  # new and empty: just the folder
    assert home.stat().st_uid == nobody.pw_uid and stat.S_IMODE(home.stat().st_mode) == 0o700
    (home / "rootfile").write_text("x")  # once the learner's, the hub never walks or writes the home again
    _hand_over(home, "nobody")
    assert (home / "rootfile").stat().st_uid == 0
    (home / "rootfile").unlink()

    course = base / "course"  # the course and the code must be readable by the account
    (course / "lessons").mkdir(parents=True)
    (course / "lessons" / "a.ipynb").write_text("{}")
    for path in (course, course / "lessons"):
        path.chmod(0o755)
    (course / "lessons" / "a.ipynb").chmod(0o644)
    # this checkout's Python, and the checkout itself (a CI clone in a 0700 temporary folder), may be out of
    # the account's reach: the system Python runs a copy of the modules prepare_home needs
    source = Path(spawner_module.__file__).parents[1]
    for rel in ("__init__.py", "_version.py", "errors.py", "hub/__init__.py", "hub/course.py", "utils/__init__.py",
                "utils/io.py", "utils/quiet.py", "utils/record.py"):
        (base / "code" / "sampan" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / rel, base / "code" / "sampan" / rel)
    for path in [base / "code", *(base / "code").rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    monkeypatch.setattr(spawner_module, "PYTHON", "/usr/bin/python3")
    monkeypatch.setenv("PYTHONPATH", str(base / "code"))
    learner = SimpleNamespace(learner_user="nobody", course_dir=str(course), datasets_dir=str(base), lang="zh",
                              user=SimpleNamespace(name="alice"),
                              log=SimpleNamespace(error=lambda *a: pytest.fail(a[0] % a[1:])))
    report = SampanSpawner._prepare_as_learner(learner, home)
    assert report.copied == ["lessons/a.ipynb"]
    made = [home / "course" / "lessons" / "a.ipynb", home / ".jupyter", home / "datasets", home / LOCALE_SETTINGS]
    assert all(p.lstat().st_uid == nobody.pw_uid for p in made)  # written by the learner's own process
    spawner = SimpleNamespace(learner_user="nobody", home_dir=str(home))
    preexec = SampanSpawner.make_preexec_fn(spawner, "alice")
    done = subprocess.run(["/usr/bin/id", "-u"], preexec_fn=preexec, capture_output=True, text=True, check=True)
    assert int(done.stdout) == nobody.pw_uid
    denied = subprocess.run(["/usr/bin/head", "-c1", str(hub / "jupyterhub.sqlite")], preexec_fn=preexec,
                            capture_output=True, text=True)
    assert denied.returncode != 0 and "Permission denied" in denied.stderr


def test_a_teachers_server_never_runs_as_the_learners_account(tmp_path, monkeypatch):
    """With ``SAMPAN_HUB_LEARNER_USER`` every server ran as that account, the teacher's too: a learner's kernel
    wrote an IPython startup file into the teacher's home (``users/`` is 0711 and the teacher's name is known),
    code that would run in the teacher's kernel, a hub admin's. A teacher's or assistant's server now runs as
    ``SAMPAN_HUB_STAFF_USER``, or is not started."""
    import subprocess
    from types import SimpleNamespace

    from sampan.hub.config import staff_account
    from sampan.hub.spawner import SampanSpawner, _hand_over, server_account

    teacher = SimpleNamespace(name="teacher", admin=True, roles=[SimpleNamespace(name="teacher")])
    assistant = SimpleNamespace(name="ta", admin=False, roles=[SimpleNamespace(name="assistant")])
    student = SimpleNamespace(name="alice", admin=False, roles=[SimpleNamespace(name="user")])
    alone = SimpleNamespace(learner_user="", staff_user="", user=teacher)
    assert server_account(alone) == ""  # no learner account: every server is the hub's, as documented
    shared = SimpleNamespace(learner_user="nobody", staff_user="")
    assert server_account(SimpleNamespace(**vars(shared), user=student)) == "nobody"
    for user in (teacher, assistant):
        with pytest.raises(RuntimeError, match=r"(?s)run as it, this server could be changed by any learner.*"
                                               r"HINT: create an account for the staff's servers.*SAMPAN_HUB_STAFF_"):
            server_account(SimpleNamespace(**vars(shared), user=user))
    if os.geteuid() != 0:  # the accounts below are switched to only as root
        return
    _runnable_by_anyone(monkeypatch)
    with pytest.raises(ValueError, match="'nobody' also runs the learners' servers"):
        staff_account("nobody", "nobody")
    with pytest.raises(ValueError, match="it is root"):
        staff_account("root", "nobody")
    assert staff_account("daemon", "nobody") == "daemon"

    base = Path(tempfile.mkdtemp(prefix="sampan-hub-test-", dir="/tmp"))  # tmp_path lies under a 0700 folder
    try:
        base.chmod(0o755)
        users = base / "users"
        users.mkdir(mode=0o711)
        users.chmod(0o711)
        homes = {name: users / name for name in ("teacher", "alice")}
        spawners = {}
        for name, user in (("teacher", teacher), ("alice", student)):
            spawners[name] = SimpleNamespace(learner_user="nobody", staff_user="daemon", user=user,
                                             home_dir=str(homes[name]))
            homes[name].mkdir()
            _hand_over(homes[name], server_account(spawners[name]))
        uid = {name: int(subprocess.run(["/usr/bin/id", "-u"], capture_output=True, text=True, check=True,
                                        preexec_fn=SampanSpawner.make_preexec_fn(spawner, name)).stdout)
               for name, spawner in spawners.items()}
        assert uid == {"teacher": 1, "alice": 65534}
        planted = homes["teacher"] / ".ipython" / "profile_default" / "startup" / "00-x.py"
        attack = subprocess.run(["/bin/sh", "-c", f"mkdir -p {planted.parent} && echo 'print(1)' > {planted}"],
                                preexec_fn=SampanSpawner.make_preexec_fn(spawners["alice"], "alice"),
                                capture_output=True, text=True)
        assert attack.returncode != 0 and "Permission denied" in attack.stderr
        assert not planted.exists()
    finally:
        shutil.rmtree(base)


def test_the_live_copies_skip_a_huge_published_file(tmp_path):
    from sampan.hub import live

    users = tmp_path / "users"
    folder = _gallery(users, "eve", {"big": {"name": "big", "published_at": None},
                                     "app": {"name": "app", "published_at": None}})
    with open(folder / "big.ipynb", "wb") as fh:  # sparse: read whole, it would take 100 GB of memory
        fh.truncate(100 << 30)
    (folder / "app.ipynb").write_text(json.dumps(SECRET))
    (tmp_path / "live" / "dashboards").mkdir(parents=True)
    assert live.sync(users, tmp_path / "live") == [("eve", "app")]


def test_the_service_never_follows_a_learners_link_to_read_a_file(tmp_path):
    """Run as root, the service opened whatever a learner's gallery.json linked to (an entry of a root-only
    file showed on the class page); a link loop stopped the live copies for the whole class."""
    from sampan.hub import live
    from sampan.hub.service import read_learner_file

    secret = tmp_path / "root-only" / "gallery"
    secret.mkdir(parents=True)
    (secret / "gallery.json").write_text(json.dumps({"dashboards": {"x": {"name": "ROOT_ONLY", "published_at": None}}}))
    users = tmp_path / "users"
    (users / "lee").mkdir(parents=True)
    (users / "lee" / ".sampan").symlink_to(tmp_path / "root-only", target_is_directory=True)  # a folder on the way
    mallory = _gallery(users, "mallory", {"loop": {"name": "loop", "published_at": None}})
    (mallory / "gallery.json").rename(mallory / "real.json")
    (mallory / "gallery.json").symlink_to(mallory / "real.json")  # the file itself
    (mallory / "loop.ipynb").symlink_to(mallory / "loop.ipynb")
    zoe = _gallery(users, "zoe", {"app": {"name": "app", "published_at": None}})
    (zoe / "app.ipynb").write_text(json.dumps(SECRET))
    assert published(users) == [("zoe", {"name": "app", "published_at": None})]
    assert read_learner_file(users / "mallory", ".sampan/gallery/real.json", 1 << 20) is not None
    (mallory / "gallery.json").unlink()
    _gallery(users, "mallory", {"loop": {"name": "loop", "published_at": None}})  # a plain catalog, a looping entry
    assert ("mallory", {"name": "loop", "published_at": None}) in published(users)
    (tmp_path / "live" / "dashboards").mkdir(parents=True)
    assert live.sync(users, tmp_path / "live") == [("zoe", "app")]  # the loop is skipped, the class is served
