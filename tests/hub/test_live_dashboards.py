"""Live dashboards on the hub: a classmate opens what a learner published as a live Voilà page behind hub
login (the ``live`` service, :mod:`sampan.hub.live`); the service's copies, user and folders.

The hub test runs the service as ``nobody`` when that user can run this Python (JupyterHub's service
``user``); where the interpreter lies in a private folder (a Python under /root) it runs as the hub's own
account (``SAMPAN_HUB_LIVE_USER=`` empty), and the test checks the kernel's uid either way.
"""
from __future__ import annotations

import json
import os
import pwd
import shutil
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
    assert stat.S_IMODE(copy.stat().st_mode) == 0o644  # read-only to the service's user
    assert not (live_dir / "dashboards" / "mallory").exists()

    _gallery(users, "alice", [])  # alice removes her dashboard: its copy goes too
    assert live.sync(users, live_dir) == [] and not copy.exists()


def test_the_live_folder_belongs_to_the_hub_and_its_home_to_the_service_user(tmp_path):
    first = live.make_live_dir(tmp_path, "nobody")
    try:
        home = first / "home"
        assert (home.stat().st_uid, stat.S_IMODE(home.stat().st_mode)) == (NOBODY.pw_uid, 0o700)
        assert (first / "dashboards").stat().st_uid == os.geteuid()
        assert not first.is_relative_to(tmp_path)  # outside the hub folder
        second = live.make_live_dir(tmp_path, "nobody")  # the next hub start replaces it
        assert not first.exists() and second.is_dir()
    finally:
        shutil.rmtree(Path((tmp_path / "live_dir.txt").read_text().strip()), ignore_errors=True)


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
    home = hub.dir / "users" / "alice"  # alice runs `sampan publish` in her own environment, as her server does
    _notebook(home / "my_app.ipynb")
    env = {**os.environ, "SAMPAN_DATA": str(home / ".sampan"), "SAMPAN_LEARNER_HOME": str(home)}
    done = subprocess.run([sys.executable, "-m", "sampan", "publish", "my_app.ipynb", "--no-thumbnail"],
                          cwd=home, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr

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
