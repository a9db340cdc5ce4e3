"""Integration: the real hub of ``sampan hub`` (JupyterHub, configurable-http-proxy, NativeAuthenticator,
SQLite, the teacher dashboard service, jupyterhub-idle-culler) driven over HTTP like a class would.

The tests share one hub and run in order: sign-up and approval, servers and progress, the 403 cases,
then a restart (nothing lost) with short culling times (a busy server survives, an idle one is culled).
"""
from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from pathlib import Path

import nbformat
import pytest

from sampan.hub.service import course
from sampan.path.exercise import Exercises
from sampan.utils.net import LOWEST, ephemeral_range

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

LEARNERS = ("alice", "bob", "carol")
PASSWORD = "river-boat-{}-2718"
LESSON = "tensors_and_autograd"
CHROMIUM = Path(shutil.which("chromium") or "/usr/bin/chromium")
IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
COURSE = Path(__file__).resolve().parents[2] / "notebooks"  # the course the hub hands out (sampan.hub.config)
QUICK_LESSON = f"""
from sampan.path.exercise import Exercises
import torch
ex = Exercises({LESSON!r})
for name in ex.exercises:  # the lesson's exercises (its checks module), all right but "shape" at first
    if name != "shape":
        ex.check(name, (torch.tensor(3.0) * 2).item(), 6.0)
ex.check("shape", tuple(torch.zeros(2, 3).shape), (3, 2))
ex.done()
ex.results["shape"] = ex.check("shape", tuple(torch.zeros(2, 3).shape), (2, 3))
ex.done()
"""

EXERCISES = len(set(Exercises(LESSON).exercises) | {"shape"})
PUBLISH = """
import nbformat
from nbformat.v4 import new_code_cell, new_notebook, new_output
from sampan.hub import gallery
cell = new_code_cell("print('hello from alice')", outputs=[new_output("stream", name="stdout", text="hello from alice")])
nbformat.write(new_notebook(cells=[cell]), "my_app.ipynb")
print(gallery.publish("my_app.ipynb", thumbnail=False).name)
"""


@pytest.fixture(scope="module")
def hub(hub_factory):
    return hub_factory(roster="username,role\nta,assistant\n")


def pw(name: str) -> str:
    return PASSWORD.format(name)


def test_signup_needs_approval_and_wrong_passwords_say_nothing(hub):
    for name in (*LEARNERS, "ta", "dave"):
        hub.signup(name, pw(name))
    with pytest.raises(PermissionError, match="has not been authorized"):
        hub.login("alice", pw("alice"))  # signed up, not approved yet
    with pytest.raises(PermissionError, match="has not been authorized"):
        hub.login("ta", pw("ta"))  # an assistant on the roster waits too: the name carries the class's progress
    teacher = hub.login("teacher", hub.teacher_password)
    for name in (*LEARNERS, "ta"):
        assert teacher.get(hub.url + f"hub/authorize/{name}", timeout=10).status_code == 200
    for name in (*LEARNERS, "ta"):
        hub.login(name, pw(name))
    with pytest.raises(PermissionError, match="has not been authorized"):
        hub.login("dave", pw("dave"))  # never approved
    with pytest.raises(PermissionError) as wrong_password:
        hub.login("alice", "not-her-password")
    with pytest.raises(PermissionError) as no_such_user:
        hub.login("nobody", "not-her-password")
    assert str(wrong_password.value) == str(no_such_user.value) == "Invalid username or password."
    # the password reached the hub in a private file it deleted, not in its environment, which every
    # learner's server (the hub's own account) could read in /proc for the hub's whole life
    assert hub.teacher_password.encode() not in Path(f"/proc/{hub.proc.pid}/environ").read_bytes()
    assert not (hub.dir / ".teacher-password").exists()
    # the teacher's name cannot be taken at sign-up
    hub.signup("teacher", "someone-else-123")
    with pytest.raises(PermissionError):
        hub.login("teacher", "someone-else-123")


def test_a_lesson_in_a_learners_kernel_reaches_the_teacher_dashboard(hub):
    hub.spawn(*LEARNERS, "ta")
    # the servers listen below the ephemeral range, where no outgoing connection takes their port before they bind
    # it (JupyterHub's own pick collided once in `make test`: "port 34473 is not available", then a 500)
    low = ephemeral_range()[0]
    assert all(LOWEST <= hub.server_port(name) < low for name in (*LEARNERS, "ta"))
    alice = hub.token_for("alice")
    out = hub.execute("alice", QUICK_LESSON, token=alice)
    assert f"{EXERCISES - 1}/{EXERCISES} exercises right" in out and "complete" in out
    # the learner's own copy of the course was made in her home on the first spawn
    assert (hub.dir / "users" / "alice" / "course" / "path.yaml").is_file()
    # in the class's language (--lang en): one language a notebook, not the bilingual source
    lesson = nbformat.read(hub.dir / "users" / "alice" / "course" / "01-beginner" / f"{LESSON}.ipynb", as_version=4)
    assert lesson.metadata["sampan"]["language"] == "en"
    assert {c.metadata.get("sampan", {}).get("lang") for c in lesson.cells} <= {None, "en"}

    for who in ("teacher", "ta"):
        token = hub.admin_token() if who == "teacher" else hub.token_for("ta")
        data = hub.api("GET", "services/progress/api/progress", token=token).json()
        assert {u["name"]: u["role"] for u in data["roster"]}["ta"] == "assistant"
        assert data["learners"]["alice"][LESSON]["status"] == "done"
        assert data["learners"]["alice"][LESSON]["exercises_passed"] == EXERCISES
        assert LESSON not in data["learners"]["bob"]
        assert data["lessons"][LESSON]["done"] == 1 and data["lessons"][LESSON]["learners"] == len(LEARNERS)
        assert data["lessons"][LESSON]["most_failed"] == ["shape"]
    # alice publishes a dashboard from her server; every hub user can open it, anonymous visitors cannot
    hub.execute("alice", PUBLISH, token=alice)
    bob = hub.token_for("bob")
    assert 'href="gallery/alice/my_app"' in hub.api("GET", "services/progress/gallery", token=bob).text
    shared = hub.api("GET", "services/progress/gallery/alice/my_app", token=bob)
    assert shared.status_code == 200 and "hello from alice" in shared.text and "print(" not in shared.text
    assert "default-src 'none'" in shared.headers["Content-Security-Policy"]  # its HTML runs no script
    assert hub.api("GET", "services/progress/gallery/alice/nope", token=bob).status_code == 404
    assert "/hub/login" in __import__("requests").get(hub.url + "services/progress/gallery/alice/my_app",
                                                      timeout=10).url
    page = hub.api("GET", "services/progress/", token=hub.admin_token()).text
    assert "alice" in page and "carol" in page and 'class="cell done"' in page
    csv = hub.api("GET", "services/progress/progress.csv", token=hub.admin_token()).text.splitlines()
    assert csv[0] == "user,lesson,status,exercises_passed,last_activity"
    assert any(line.startswith(f"alice,{LESSON},done,{EXERCISES},") for line in csv)
    assert any(line.startswith(f"bob,{LESSON},not started,0,") for line in csv)
    # the hub's process serves the class all day and never needs torch: it never loads it (`import sampan` does
    # not import torch), nor does the progress service
    service = [p for p in _hub_processes(hub) if "sampan.hub.service" in " ".join(p.cmdline())]
    assert service, "the progress service's process was not found"
    for proc in (hub.proc.pid, *(p.pid for p in service)):
        assert "libtorch" not in Path(f"/proc/{proc}/maps").read_text(), f"process {proc} loaded torch"


def _hub_processes(hub) -> list:
    import psutil

    return psutil.Process(hub.proc.pid).children(recursive=True)


def test_students_and_assistants_are_kept_out(hub):
    bob, ta = hub.token_for("bob"), hub.token_for("ta")
    assert hub.api("GET", "services/progress/", token=bob).status_code == 403
    assert hub.api("GET", "services/progress/progress.csv", token=bob).status_code == 403
    assert hub.api("GET", "user/alice/api/contents", token=bob).status_code == 403
    assert hub.api("GET", "user/alice/api/contents", token=ta).status_code == 403  # progress, not files
    own = hub.api("GET", "services/progress/me", token=bob)
    assert own.status_code == 200 and "Progress of bob" in own.text and "lessons done: 0/" in own.text
    assert own.text.count('class="done"') == 0 and f'<span title="{LESSON}">' in own.text  # the course, not started
    # an event is stored for the token's owner only; a bad one is refused with the reason
    forged = hub.api("POST", "services/progress/api/events", token=bob, json={"lesson": "x", "status": "done"})
    assert forged.status_code == 400 and "status" in forged.json()["error"]
    # anonymous visitors are sent to the login page
    anonymous = __import__("requests").get(hub.url + "services/progress/", timeout=10)
    assert "/hub/login" in anonymous.url


@pytest.mark.browser
def test_browser_learners_open_a_lesson_and_a_shared_dashboard_teacher_sees_the_roster(hub):
    """Headless Debian Chromium: carol logs in, opens a lesson in her JupyterLab and the dashboard alice
    published; the teacher opens the class's progress. The screenshots go to docs/images/ (docs/CLASSROOM.md shows them)."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (.ci/run does this)")
    from playwright.sync_api import sync_playwright

    IMAGES.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
        try:
            learner = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
            learner.set_default_timeout(180_000)
            _browser_login(learner, hub, "carol", pw("carol"))
            learner.goto(hub.url + f"user/carol/lab/tree/course/01-beginner/{LESSON}.ipynb")
            learner.locator(".jp-NotebookPanel .jp-RenderedMarkdown h1").first.wait_for()
            learner.locator(".jp-StatusBar-Widget", has_text="Sampan (Python 3)").first.wait_for()
            learner.screenshot(path=str(IMAGES / "classroom-lesson.png"))
            learner.goto(hub.url + "services/progress/gallery")  # another learner's published dashboard
            learner.click("a:has-text('my_app')")
            learner.get_by_text("hello from alice").first.wait_for()

            teacher = browser.new_context(viewport={"width": 1280, "height": 600}).new_page()
            teacher.set_default_timeout(60_000)
            _browser_login(teacher, hub, "teacher", hub.teacher_password)
            teacher.goto(hub.url + "services/progress/")
            roster = teacher.locator("table#roster")
            roster.locator("td", has_text="alice").first.wait_for()
            assert roster.locator("td.done").count() >= 1
            assert ": done" in roster.locator("td.done").first.get_attribute("title")  # the words on hover
            assert roster.locator("td", has_text="assistant").count() == 1
            # the whole course (20 lessons) fits the 1280-pixel window: one narrow column a lesson
            assert roster.locator("th.n").count() == len(course(COURSE).lessons)
            assert teacher.evaluate("document.getElementById('roster').getBoundingClientRect().right") <= 1280
            teacher.screenshot(path=str(IMAGES / "classroom-teacher.png"), full_page=True)
            # the same page for a browser that asks for Chinese (README.zh-CN shows it)
            zh = browser.new_context(viewport={"width": 1280, "height": 600}, locale="zh-CN").new_page()
            zh.set_default_timeout(60_000)
            _browser_login(zh, hub, "teacher", hub.teacher_password)
            zh.goto(hub.url + "services/progress/")
            zh.locator("h1", has_text="班级学习进度").wait_for()
            assert zh.locator("table#roster td", has_text="助教").count() == 1
            assert "：已完成" in zh.locator("table#roster td.done").first.get_attribute("title")
            zh.screenshot(path=str(IMAGES / "classroom-teacher-zh.png"), full_page=True)
        finally:
            browser.close()


def _browser_login(page, hub, name: str, password: str) -> None:
    page.goto(hub.url + "hub/login")
    page.fill("#username_input", name)
    page.fill("#password_input", password)
    page.click("#login_submit")
    page.wait_for_url(lambda url: "/hub/login" not in url)


def test_a_crashed_server_offers_a_restart_not_a_hang(hub):
    alice = hub.login("alice", pw("alice"))
    server = hub.api("GET", "hub/api/users/alice").json()["servers"][""]
    os.kill(server["state"]["pid"], signal.SIGKILL)  # the learner's JupyterLab dies
    page = alice.get(hub.url + "user/alice/api/status", timeout=30)
    assert page.status_code == 503
    assert "Your server appears to be down" in page.text and "/hub/home" in page.text


def test_restart_keeps_everything_and_culling_spares_a_busy_server(hub):
    hub.extra_env.update(SAMPAN_HUB_CULL_TIMEOUT="20", SAMPAN_HUB_CULL_EVERY="5", SAMPAN_HUB_ACTIVITY_INTERVAL="5")
    hub.restart()
    hub.login("alice", pw("alice"))  # users and approvals survived
    data = hub.api("GET", "services/progress/api/progress").json()
    assert data["learners"]["alice"][LESSON]["status"] == "done"  # progress survived

    hub.spawn("alice", "bob")
    alice = hub.token_for("alice")
    def train():  # a long cell: the kernel stays busy and sends nothing
        try:
            hub.execute("alice", "import time; time.sleep(75)", token=alice, timeout=100)
        except Exception:  # the hub stops at the end of the module, closing the connection
            pass

    busy = threading.Thread(target=train, daemon=True)
    busy.start()
    deadline = time.time() + 90
    while time.time() < deadline and hub.api("GET", "hub/api/users/bob").json()["servers"]:
        time.sleep(2)
    assert not hub.api("GET", "hub/api/users/bob").json()["servers"], "the idle server was not culled"
    assert hub.api("GET", "hub/api/users/alice").json()["servers"][""]["ready"], "the busy server was culled"
