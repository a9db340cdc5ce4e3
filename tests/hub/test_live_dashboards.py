"""Live dashboards on the hub: a classmate opens what a learner published as a live Voilà page behind hub
login (the ``live`` service, :mod:`sampan.hub.live`); the service's copies, user and folders.

The hub test runs the service as ``nobody`` when that user can run this Python (JupyterHub's service
``user``); where the interpreter lies in a private folder (a Python under /root) it runs as the hub's own
account (``SAMPAN_HUB_LIVE_USER=`` empty), and the test checks the kernel's uid either way.
"""
from __future__ import annotations

import functools
import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import nbformat
import pytest
import requests
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from sampan.hub import live
from sampan.hub.service import render_gallery
from sampan.utils.notebooks import VOILA_BOOT

NOBODY = pwd.getpwnam("nobody")
NOBODY_RUNS_PYTHON = os.geteuid() == 0 and all(live.reachable_by(p, "nobody") for p in live._python_files())
LIVE_USER = "nobody" if NOBODY_RUNS_PYTHON else ""
APP = """import os
print(f"rendered live: {6 * 7}; kernel uid {os.getuid()}; HOME in {os.environ['HOME'].split('/')[-2][:12]}")"""


def _notebook(path: Path, code: str = APP) -> Path:
    nb = new_notebook(cells=[new_markdown_cell("# Alice's app"), new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def _gallery(users: Path, user: str, names: list[str]) -> Path:
    folder = users / user / ".sampan" / "gallery"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "gallery.json").write_text(json.dumps({"version": 1, "dashboards": {
        n: {"name": n, "source": f"{n}.ipynb", "published_at": "2026-12-03T07:00:00+00:00"} for n in names}}))
    return folder


def test_sync_copies_published_notebooks_read_only_and_never_follows_links_out(tmp_path):
    users, live_dir = tmp_path / "users", tmp_path / "live"
    (live_dir / "dashboards").mkdir(parents=True)
    _notebook(_gallery(users, "alice", ["app"]) / "app.ipynb")
    secret = tmp_path / "jupyterhub.sqlite"
    secret.write_text('{"cells": [], "secret": "hub-cookie-secret"}')
    (_gallery(users, "mallory", ["evil"]) / "evil.ipynb").symlink_to(secret)  # a link to the hub's files

    assert live.sync(users, live_dir) == [("alice", "app")]
    copy = live_dir / "dashboards" / "alice" / "app.ipynb"
    assert copy.read_bytes() == (users / "alice" / ".sampan" / "gallery" / "app.ipynb").read_bytes()
    assert stat.S_IMODE(copy.stat().st_mode) == 0o640  # read-only to the service's group, no one else's
    assert not (live_dir / "dashboards" / "mallory").exists()

    _gallery(users, "alice", [])  # alice removes her dashboard: its copy goes too
    assert live.sync(users, live_dir) == [] and not copy.exists()


def test_the_live_folder_belongs_to_the_hub_and_its_home_to_the_service_user(tmp_path):
    first = live.make_live_dir(tmp_path, "nobody")
    try:
        home = first / "home"
        assert (home.stat().st_uid, stat.S_IMODE(home.stat().st_mode)) == (NOBODY.pw_uid, 0o700)
        assert (first / "dashboards").stat().st_uid == os.geteuid()
        # the published copies: readable by the service's account (its group), by no other local account
        dashboards = (first / "dashboards").stat()
        assert (dashboards.st_gid, stat.S_IMODE(dashboards.st_mode)) == (NOBODY.pw_gid, 0o2750)
        users = tmp_path / "users"
        _notebook(_gallery(users, "alice", ["app"]) / "app.ipynb")
        assert live.sync(users, first) == [("alice", "app")]
        copy = first / "dashboards" / "alice" / "app.ipynb"
        readers = {}
        for account in ("nobody", "daemon"):
            entry = pwd.getpwnam(account)
            switch = functools.partial(_become, entry.pw_uid, entry.pw_gid)
            readers[account] = subprocess.run(["/usr/bin/head", "-c1", str(copy)], preexec_fn=switch,
                                              capture_output=True).returncode
        assert readers == {"nobody": 0, "daemon": 1}, readers
        assert not first.is_relative_to(tmp_path)  # outside the hub folder
        second = live.make_live_dir(tmp_path, "nobody")  # the next hub start replaces it
        assert not first.exists() and second.is_dir()
    finally:
        shutil.rmtree(Path((tmp_path / "live_dir.txt").read_text().strip()), ignore_errors=True)


def _become(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


def test_reachable_by_reads_the_permission_bits_along_the_path():
    folder = Path(tempfile.mkdtemp(prefix="sampan-test-"))  # under /tmp (pytest's tmp_path is private)
    try:
        (folder / "python").write_text("")
        assert not live.reachable_by(folder / "python", "nobody")  # mkdtemp: 0700
        folder.chmod(0o755)
        assert live.reachable_by(folder / "python", "nobody")
    finally:
        shutil.rmtree(folder)


def test_live_plan_is_explicit_about_who_runs_the_kernels():
    assert live.live_plan("off", "nobody").enabled is False
    with pytest.raises(ValueError, match="Expected `SAMPAN_HUB_LIVE` to be one of auto, on, off.*HINT"):
        live.live_plan("sometimes", "nobody")
    if os.geteuid() == 0:
        with pytest.raises(ValueError, match="Expected `SAMPAN_HUB_LIVE_USER`.*HINT: .*does not exist"):
            live.live_plan("on", "no-such-user-" + uuid.uuid4().hex[:6])
        with pytest.raises(ValueError, match="is root"):
            live.live_plan("on", "root")
        assert live.live_plan("auto", "nobody") == live.LivePlan(
            NOBODY_RUNS_PYTHON, "nobody" if NOBODY_RUNS_PYTHON else None, live.live_plan("auto", "nobody").reason)
        assert live.live_plan("on", "").user is None  # explicitly the hub's own account
    else:
        assert live.live_plan("auto", "nobody").enabled is False  # no root: snapshots unless asked
        assert live.live_plan("on", "nobody").user is None


def test_the_live_service_runs_as_the_planned_user_on_the_copies(tmp_path):
    from sampan.hub.config import LIVE_BOOT, live_service

    service = live_service(live.LivePlan(True, "nobody", "test"), tmp_path)
    assert service["user"] == "nobody" and service["cwd"] == str(tmp_path / "dashboards")  # JupyterHub's setuid
    assert service["command"][-1] == LIVE_BOOT and service["environment"]["SAMPAN_LIVE_DIR"] == str(tmp_path)
    assert "user" not in live_service(live.LivePlan(True, None, "test"), tmp_path)
    args = live.voila_arguments(tmp_path, "http://127.0.0.1:9000", "/services/live/")
    for flag in ("--VoilaConfiguration.strip_sources=True", "--VoilaConfiguration.show_tracebacks=False",
                 "--VoilaConfiguration.file_allowlist=[]", "--Voila.base_url=/services/live/"):
        assert flag in args  # `sampan dashboard`'s settings, under the service prefix


def test_the_gallery_links_each_entry_to_its_snapshot_and_its_live_page():
    page = render_gallery([("alice", {"name": "my_app", "published_at": "2026-12-03T07:00:00"})], live=True)
    assert 'href="gallery/alice/my_app"' in page
    assert 'href="../live/voila/render/alice/my_app.ipynb"' in page
    assert "../live/" not in render_gallery([("alice", {"name": "my_app"})])


def test_one_learners_odd_gallery_json_leaves_the_class_gallery_working(tmp_path):
    from sampan.hub.service import published

    good = {"name": "my_app", "published_at": "2026-12-03T07:00:00"}
    odd = {"a": {"name": "x", "published_at": ["2026"]}, "b": {"name": ["x"]}, "c": "text",
           "d": {"name": "<script>x</script>"}, "e": {"name": "ok_too", "published_at": None}}
    for user, entries in (("alice", {"my_app": good}), ("mallory", odd)):
        folder = tmp_path / user / ".sampan" / "gallery"
        folder.mkdir(parents=True)
        (folder / "gallery.json").write_text(json.dumps({"dashboards": entries}))
    entries = published(tmp_path)
    assert entries == [("alice", good), ("mallory", {"name": "ok_too", "published_at": None})]
    page = render_gallery(entries, live=True)
    assert 'href="gallery/alice/my_app"' in page and 'href="gallery/mallory/ok_too"' in page


# --- the real hub ---------------------------------------------------------------------------------------
LIVE_PAGE = live.live_url("alice", "my_app").lstrip("/")  # services/live/voila/render/alice/my_app.ipynb


@pytest.fixture(scope="module")
def hub(hub_factory):
    return hub_factory(roster="username,role\nalice,student\nbob,student\n",
                       env={"SAMPAN_HUB_LIVE": "on", "SAMPAN_HUB_LIVE_USER": LIVE_USER})


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_classmate_opens_the_live_dashboard_anonymous_and_unscoped_visitors_do_not(hub):
    _publish(hub)
    hub.signup("bob", "river-boat-bob-2718")
    bob = hub.login("bob", "river-boat-bob-2718")
    gallery = bob.get(hub.url + "services/progress/gallery", timeout=30).text
    assert 'href="../live/voila/render/alice/my_app.ipynb"' in gallery and 'href="gallery/alice/my_app"' in gallery

    deadline, page = time.time() + 60, None
    while time.time() < deadline:  # the progress service copies it for the live service within seconds
        page = bob.get(hub.url + LIVE_PAGE, timeout=120)  # OAuth with the hub, then Voilà renders it
        if page.status_code != 404:
            break
        time.sleep(1)
    assert page.status_code == 200, hub.log_tail()
    kernel_uid = NOBODY.pw_uid if LIVE_USER else os.geteuid()
    # a cell ran at render time, as LIVE_USER, with the service's own HOME (not the hub's)
    assert f"rendered live: 42; kernel uid {kernel_uid}; HOME in sampan-live-" in page.text
    assert "6 * 7" not in page.text  # sources stripped
    _kernel_answers_widgets_but_not_code(hub, bob, page.text)

    anonymous = requests.get(hub.url + LIVE_PAGE, timeout=30)
    assert "/hub/login" in anonymous.url and "rendered live" not in anonymous.text
    r = hub.api("POST", "hub/api/users/bob/tokens", json={"scopes": ["access:services!service=progress"]})
    unscoped = r.json()["token"]  # bob's token without access to the live service
    assert hub.api("GET", "services/progress/me", token=unscoped).status_code == 200
    refused = hub.api("GET", LIVE_PAGE, token=unscoped)
    assert refused.status_code == 403 and "rendered live" not in refused.text


def _publish(hub) -> None:
    """alice runs `sampan publish` in her own environment, as her server does."""
    home = hub.dir / "users" / "alice"
    _notebook(home / "my_app.ipynb")
    env = {**os.environ, "SAMPAN_DATA": str(home / ".sampan"), "SAMPAN_LEARNER_HOME": str(home)}
    done = subprocess.run([sys.executable, "-m", "sampan", "publish", "my_app.ipynb", "--no-thumbnail"],
                          cwd=home, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_live_service_caps_each_hub_users_kernels_and_narrows_the_pages_script_source(hub):
    """Through the hub's login (LiveViewers): alice's 4th page gets 429 while bob still opens his; the pages'
    policy lets scripts load only from the live service's voila/ path."""
    _publish(hub)
    copy = Path((hub.dir / "live_dir.txt").read_text().strip()) / "dashboards" / "alice" / "my_app.ipynb"
    deadline = time.time() + 60
    while not copy.is_file() and time.time() < deadline:  # the progress service copies it within seconds
        time.sleep(0.5)
    sessions = {}
    for name in ("alice", "bob"):
        hub.signup(name, f"river-boat-{name}-2718")  # bob's second signup only shows an error page
        sessions[name] = hub.login(name, f"river-boat-{name}-2718")
    for _ in range(live.PER_VIEWER):
        page = sessions["alice"].get(hub.url + LIVE_PAGE, timeout=120)
        assert page.status_code == 200 and "rendered live: 42" in page.text, hub.log_tail()
        policy = page.headers["Content-Security-Policy"]
        assert f"script-src 127.0.0.1:{hub.port}/services/live/voila/ 'sha256-" in policy, policy
    refused = sessions["alice"].get(hub.url + LIVE_PAGE, timeout=120)
    assert refused.status_code == 429 and f"You have {live.PER_VIEWER} live dashboards open" in refused.text
    assert sessions["bob"].get(hub.url + LIVE_PAGE, timeout=120).status_code == 200  # a cap per viewer


def _kernel_answers_widgets_but_not_code(hub, session, html: str) -> None:
    """The page's kernel answers a kernel_info_request over the websocket; an execute_request gets nothing."""
    import re

    import websocket

    kernel = re.search(r'"kernelId":\s*"([0-9a-f-]{36})"', html) or re.search(r"kernel_id=([0-9a-f-]{36})", html)
    assert kernel, html[:2000]
    cookies = "; ".join(f"{c.name}={c.value}" for c in session.cookies)
    ws = websocket.create_connection(
        f"ws://127.0.0.1:{hub.port}/services/live/api/kernels/{kernel.group(1)}/channels",
        header=[f"Cookie: {cookies}"], timeout=30)
    try:
        def ask(kind: str, content: dict) -> str:
            msg_id = uuid.uuid4().hex
            ws.send(json.dumps({"header": {"msg_id": msg_id, "msg_type": kind, "username": "bob",
                                           "session": uuid.uuid4().hex, "version": "5.3"},
                                "parent_header": {}, "metadata": {}, "channel": "shell", "content": content}))
            return msg_id

        info = ask("kernel_info_request", {})
        code = ask("execute_request", {"code": "print('viewer code')", "silent": False})
        replies, deadline = [], time.time() + 20
        ws.settimeout(5)
        while time.time() < deadline:
            try:
                msg = json.loads(ws.recv())
            except websocket.WebSocketTimeoutException:
                break
            replies.append((msg.get("parent_header", {}).get("msg_id"), msg.get("msg_type")))
        assert (info, "kernel_info_reply") in replies
        assert not [kind for parent, kind in replies if parent == code]  # Voilà dropped the execute request
    finally:
        ws.close()


# --- the live Voilà's defences: a Content-Security-Policy and capped kernels ------------------------------
# One Voilà per module, started with live.voila_arguments as the service starts it, with a token instead of
# the hub's login: TokenViewers (below) notes each viewer as LiveViewers does (an anonymous name per login).
def _mark(name: str) -> str:
    """The JavaScript a payload runs: it writes data-pwn-<name> on the page (no quotes: it goes anywhere)."""
    return f"document.documentElement.dataset.pwn{name.capitalize()}=1"


WIDGETS = """import ipywidgets as W
from IPython.display import display
s, o = W.IntSlider(value=3, min=0, max=10, description="n"), W.Output()
def show(change=None):
    o.clear_output()
    with o:
        print(f"square is {s.value ** 2}")
s.observe(show, "value"); show(); display(W.VBox([s, o]))"""
HTML_OUT = "from IPython.display import HTML, display\ndisplay(HTML('{}'))"
# every way the audit found, markdown, and a script the publisher put elsewhere on the hub's origin
# (their server's /files/, which the teacher may open)
PAYLOADS = {
    "script": HTML_OUT.format(f"<script>{_mark('script')}</script>"),
    "img": HTML_OUT.format(f"<img src=x onerror={_mark('img')}>"),
    "widget": f"import ipywidgets as W\nW.HTML(value='<img src=x onerror={_mark('widget')}>')",
    "js": f"from IPython.display import Javascript, display\ndisplay(Javascript('{_mark('js')}'))",
    "samesite": HTML_OUT.format('<script src="/user/alice/files/x.js"></script>'),
}
MARKDOWN = f'<img src="x" onerror="{_mark("md")}">'
VIEWERS = """from jupyter_core.utils import ensure_async
from voila.app import PasswordIdentityProvider

from sampan.hub.live import note_viewer


class TokenViewers(PasswordIdentityProvider):
    async def get_user(self, handler):
        user = await ensure_async(super().get_user(handler))
        note_viewer(handler, user)
        return user
"""
@pytest.fixture(scope="module")
def voila(tmp_path_factory):
    """The live Voilà (2 kernels a viewer, 3 in all, unconnected ones stopped after 20 idle s) on alice's app."""
    import psutil

    from sampan.utils.net import free_port

    root = tmp_path_factory.mktemp("live")
    folder = root / "dashboards" / "alice"
    nb = new_notebook(cells=[new_markdown_cell("# Alice's app"), new_code_cell(WIDGETS),
                             *[new_code_cell(code) for code in PAYLOADS.values()], new_markdown_cell(MARKDOWN)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / "app.ipynb")
    _notebook(folder / "plain.ipynb", "import os\nprint('plain', os.environ.get('QUERY_STRING'), "
                                      "os.environ.get('VOILA_REQUEST_URL'))")
    # a cell that never ends, deaf to the interrupt too (it sleeps in its loop: a busy one would take a core from
    # the tests beside it for the ~25 s it lives, and the limits below do not depend on what the cell does)
    _notebook(folder / "runaway.ipynb", "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                        "print('started', flush=True)\nwhile True:\n    time.sleep(0.1)")
    (root / "viewers.py").write_text(VIEWERS)
    # Voilà and its kernels print every thread's stack on SIGUSR1 (into the log): what a page that never came waits on
    (root / "sitecustomize.py").write_text("import faulthandler, signal\n"
                                           "faulthandler.register(signal.SIGUSR1, all_threads=True)\n")
    port, token = free_port(), uuid.uuid4().hex
    args = [a for a in live.voila_arguments(root / "dashboards", f"http://127.0.0.1:{port}", "/services/live/")
            if not a.startswith(("--Voila.identity_provider", "--Voila.authorizer", "--MappingKernelManager.cull_int",
                                 "--VoilaExecutor.timeout"))]
    args += ["--Voila.identity_provider_class=viewers.TokenViewers", "--LiveKernelManager.per_viewer=2",
             "--LiveKernelManager.max_kernels=3", "--LiveKernelManager.unconnected_timeout=20",
             "--MappingKernelManager.cull_interval=1", "--VoilaExecutor.timeout=4"]  # a cell's longest run
    env = {**os.environ, "JUPYTER_TOKEN": token, "OMP_NUM_THREADS": "1", "JUPYTER_DATA_DIR": str(root / "data"),
           "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    log = root / "voila.log"
    proc = subprocess.Popen([sys.executable, "-c", VOILA_BOOT, *args], env=env, cwd=root,  # as LIVE_BOOT
                            stdout=open(log, "w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/services/live/"
    deadline = time.time() + 120
    while time.time() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            if requests.get(url + "voila/static/voila.js", timeout=5).status_code == 200:
                break
        except requests.RequestException:
            time.sleep(0.3)
    else:
        pytest.fail(f"Voilà did not answer:\n{log.read_text()}")

    def kernels() -> int:
        """Live kernels: a stopped one may linger a moment as a zombie (or be gone) before Voilà reaps it."""
        count = 0
        for child in psutil.Process(proc.pid).children(recursive=True):
            try:
                count += child.status() != psutil.STATUS_ZOMBIE and "ipykernel" in " ".join(child.cmdline())
            except psutil.Error:  # ended between the listing and the look
                pass
        return count

    def stacks() -> str:
        """The log's end after Voilà and each of its kernels printed their threads' stacks."""
        for each in [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]:
            try:
                each.send_signal(signal.SIGUSR1)
            except psutil.Error:
                pass
        time.sleep(2)
        return log.read_text()[-20000:]

    yield type("Voila", (), {"url": url, "token": token, "port": port, "log": log, "kernels": staticmethod(kernels),
                             "stacks": staticmethod(stacks)})
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_cell_that_never_ends_ends_its_page_with_a_message_and_its_kernel_is_stopped(voila):
    """A publisher's cell that loops for ever (and ignores the interrupt) would keep the viewer on "Running ..."
    and hold a kernel, busy, for ever: a few views would fill the class's live kernels. The page ends after the
    cell's time (here 4 s) with a message for the viewer; the kernel, busy, is stopped once no page connected to it
    (here 20 s after the page)."""
    assert voila.kernels() == 0, "the first test of the live Voilà (the cap test counts on its kernel's end)"
    opened = requests.get(voila.url + "voila/render/alice/runaway.ipynb", params={"token": voila.token}, timeout=120)
    assert opened.status_code == 200, opened.text[-2000:]
    assert "the most a cell of a live dashboard may run" in opened.text, opened.text[-3000:]  # the cell's output
    assert voila.kernels() == 1  # still running the cell
    deadline = time.time() + 90
    while voila.kernels() and time.time() < deadline:
        time.sleep(1)
    assert voila.kernels() == 0, voila.log.read_text()[-3000:]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_live_kernels_are_capped_per_viewer_and_in_all_and_unconnected_ones_stopped(voila):
    """A loop of plain GETs cannot fill the memory: the 3rd page of one viewer gets 429, the 4th kernel in all
    503, each saying what to do; kernels that no page connected to are stopped (here after 20 idle s)."""
    page = voila.url + "voila/render/alice/plain.ipynb"
    before = voila.kernels()
    assert before == 0, "run before the browser test (its kernels count towards the 3)"
    first, second = requests.Session(), requests.Session()  # two viewers (a login each)
    opened = first.get(page, params={"token": voila.token, "x": "1"}, timeout=120)
    assert opened.status_code == 200 and "plain x=1 http" in opened.text
    assert voila.token not in opened.text  # the publisher's kernel never sees the viewer's token
    assert first.get(page, timeout=120).status_code == 200  # the login's cookie: the same viewer
    refused = first.get(page, timeout=120)
    assert refused.status_code == 429 and "You have 2 live dashboards open" in refused.text, refused.text[-2000:]
    assert "close another live dashboard" in refused.text and voila.kernels() == 2
    assert second.get(page, params={"token": voila.token}, timeout=120).status_code == 200  # another viewer
    full = requests.get(page, params={"token": voila.token}, timeout=120)  # a third viewer: 3 kernels in all
    assert full.status_code == 503 and "live dashboards are full (3 running" in full.text, full.text[-2000:]
    assert voila.kernels() == 3
    assert "frame-ancestors 'self'" in full.headers["Content-Security-Policy"]  # error pages too

    deadline = time.time() + 90
    while voila.kernels() and time.time() < deadline:  # never connected: stopped
        time.sleep(1)
    assert voila.kernels() == 0, voila.log.read_text()[-3000:]
    assert first.get(page, timeout=120).status_code == 200  # room again


@pytest.mark.browser
@pytest.mark.timeout(300)
def test_a_publishers_scripts_do_not_run_in_the_viewers_browser_and_the_widgets_still_work(voila):
    """Headless Chromium opens alice's app: the slider drives its output, and none of the payloads (an inline
    <script>, <img onerror> in an HTML output and in a W.HTML widget, Javascript(), a script from elsewhere
    on the origin, <img onerror> in markdown) runs. The same page with its policy
    stripped runs them all: the payloads are real."""
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    class NeverRendered(AssertionError):
        pass

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    page_url = f"{voila.url}voila/render/alice/app.ipynb?token={voila.token}"
    origin = f"http://127.0.0.1:{voila.port}"

    def visit(browser, strip_policy: bool) -> tuple[set[str], str, list[str]]:
        context = browser.new_context()
        page = context.new_page()
        page.set_default_timeout(90_000)
        console: list[str] = []
        page.on("console", lambda m: console.append(m.text))
        # the publisher's file on the origin outside the live service (their server would serve it)
        page.route(f"{origin}/user/alice/files/x.js", lambda r: r.fulfill(
            status=200, content_type="text/javascript", body=_mark("samesite")))
        unfetched: list[str] = []
        try:
            if strip_policy:  # log in first (the page comes through Playwright, its cookie would not)
                page.goto(f"{voila.url}?token={voila.token}")

                def without_policy(route):
                    try:
                        response = route.fetch(timeout=90_000)  # the page's wait ceiling: a loaded machine is slow
                    except PlaywrightError as error:  # the page never came: the browser's request fails with it
                        unfetched.append(str(error))
                        route.abort()
                        return
                    headers = {k: v for k, v in response.headers.items() if k.lower() != "content-security-policy"}
                    route.fulfill(response=response, headers=headers)
                # the page alone: its payloads' own requests (<img src=x>) go to Voilà as they would
                page.route(page_url.split("?")[0], without_policy)
            # "commit": the text below is what the test waits for, not the load event (which waits on every image)
            response = page.goto(page_url if not strip_policy else page_url.split("?")[0], wait_until="commit")
            policy = response.headers.get("content-security-policy", "")
            page.get_by_text("square is 9").wait_for()  # the widgets rendered: Voilà's own scripts ran
            if not strip_policy:
                page.locator(".widget-readout").click()
                page.keyboard.press("Control+A")
                page.keyboard.type("7")
                page.keyboard.press("Enter")
                page.get_by_text("square is 49").wait_for()  # and the slider drives the output through the kernel
            page.wait_for_timeout(1500)  # the payloads' chance to run
            ran = set(page.evaluate("Array.from(document.documentElement.attributes).map(a => a.name)"))
        except PlaywrightError as error:  # what the page showed and said, what Voilà and its kernels were doing
            try:
                text = page.evaluate("document.body ? document.body.innerText.slice(0, 1500) : ''")
            except PlaywrightError as unreadable:
                text = f"(unreadable: {unreadable})"
            evidence = [str(error), *unfetched, "--- the page's text ---", text, "--- its console ---", *console,
                        "--- Voilà's log, then its and its kernels' stacks ---", voila.stacks()]
            raise NeverRendered("\n".join(evidence)) from error
        finally:
            page.close(run_before_unload=True)  # Voilà stops the page's kernel
            context.close()
        return {name[len("data-pwn-"):] for name in ran if name.startswith("data-pwn-")}, policy, console

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run", "--disable-quic",
            "--disable-features=LocalNetworkAccessChecks"])  # a page Playwright fulfils counts as a public one
        try:
            ran, policy, console = visit(browser, strip_policy=False)
            unguarded, _, _ = visit(browser, strip_policy=True)
        finally:
            browser.close()
    assert ran == set(), (ran, policy)
    assert unguarded == {*PAYLOADS, "md"}, unguarded  # without the policy every payload runs
    assert f"script-src 127.0.0.1:{voila.port}/services/live/voila/ 'sha256-" in policy, policy
    assert "unsafe" not in policy and "object-src 'none'" in policy and "base-uri 'none'" in policy
    blocked = " ".join(console)
    assert "Executing inline script violates" in blocked and "Executing inline event handler violates" in blocked


def test_the_live_folder_keeps_jupyters_data_folder_read_only_to_the_service(tmp_path):
    """Voilà serves lab extensions from Jupyter's data folder under the service's own path, which the page's
    policy trusts: a kernel (the service user) must not be able to put a script there."""
    root = live.make_live_dir(tmp_path, "nobody" if os.geteuid() == 0 else None)
    try:
        data = root / "data"
        assert data.stat().st_uid == os.geteuid() and stat.S_IMODE(data.stat().st_mode) == 0o755
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_kernel_whose_page_still_renders_is_never_taken_for_an_unconnected_one():
    """On a loaded machine Voilà may pause between a page's cells longer than the unconnected timeout: the
    kernel counts as unconnected only from the moment its page was sent (make test once lost a page so)."""
    from datetime import datetime, timezone
    from types import SimpleNamespace

    manager = live.LiveKernelManager(unconnected_timeout=60)
    page = live._Page()
    manager._kernels["k"] = SimpleNamespace(execution_state="idle", last_activity=datetime(2000, 1, 1,
                                                                                         tzinfo=timezone.utc))
    manager._pages["k"] = page
    assert manager._unconnected_for("k") == 0  # still rendering, however long ago it last spoke
    page.finished = time.monotonic() - 100
    assert manager._unconnected_for("k") > 60  # sent 100 s ago, never connected: stopped at the next cull
    manager._kernels["k"].execution_state = "busy"  # a cell past the page's timeout, its output going nowhere
    assert manager._unconnected_for("k") > 60
    page.finished = time.monotonic() - 5
    assert manager._unconnected_for("k") < 60  # its page has just been sent: the browser may still connect
    manager._connected.add("k")
    assert manager._unconnected_for("k") == 0


def test_the_live_voila_reads_no_config_its_kernels_could_write(tmp_path):
    """The kernels run the publishers' code as the service's account: a `voila.py` they planted in a config
    folder Voilà searches would run at its next start (the hub restarts a service that exits) and could drop
    the Content-Security-Policy. Voilà reads no config file, Jupyter's folders are the hub's, and the service's
    Python skips the user site its kernels could write."""
    root = live.make_live_dir(tmp_path, None)
    code = ("import json; from sampan.hub.live import prepare_process; args = prepare_process(); "
            "from jupyter_core.paths import jupyter_config_path, jupyter_path; import site, sys; "
            "print(json.dumps([args, jupyter_config_path(), jupyter_path(), site.ENABLE_USER_SITE]))")
    env = {**os.environ, "SAMPAN_LIVE_DIR": str(root), "JUPYTERHUB_SERVICE_URL": "http://127.0.0.1:9",
           "JUPYTER_CONFIG_DIR": str(tmp_path / "planted"), "JUPYTER_CONFIG_PATH": str(tmp_path / "planted")}
    done = subprocess.run([sys.executable, "-s", "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    args, config_path, data_path, user_site = json.loads(done.stdout.strip().splitlines()[-1])
    assert "--Voila.config_file_paths=[]" in args and user_site is False
    assert str(root / "config") in config_path and str(root / "data") in data_path
    assert not [p for p in config_path + data_path if p.startswith((str(root / "home"), str(tmp_path / "planted")))]
    from sampan.hub.config import LIVE_BOOT, live_service

    assert live_service(live.LivePlan(True, None, "test"), root)["command"][1:3] == ["-s", "-c"]
    assert LIVE_BOOT in live_service(live.LivePlan(True, None, "test"), root)["command"]
