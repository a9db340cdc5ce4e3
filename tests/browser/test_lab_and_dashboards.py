"""`sampan lab` and `sampan dashboard NAME` in headless Chromium; writes the README screenshots.

Uses `chromium`, `page` and `server_env` from tests/browser/conftest.py; the servers are started through
Sampan's own commands (what `make lab` runs), each with a private data directory.
"""
from __future__ import annotations

import socket
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from lab_cells import run_the_check
from path_runs import planted_runs
from servers import stop, wait_until

from sampan.utils.net import free_port

REPO = Path(__file__).resolve().parents[2]
IMAGES = REPO / "docs" / "images"
WAIT = 240_000  # ms: the 2-core CI machine is shared; a lesson kernel imports torch
pytestmark = pytest.mark.browser


def _start(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sampan", *args], stdout=log.open("w"), stderr=subprocess.STDOUT,
                            env=env, cwd=str(REPO))


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def env(server_env, tmp_path):
    settings = tmp_path / "settings"
    # answer JupyterLab's one-time "news?" question up front: its toast would cover the screenshot
    notification = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notification.parent.mkdir(parents=True)
    notification.write_text('{"fetchNews": "false", "checkForUpdates": false}')
    env = dict(server_env, SAMPAN_DATA=str(tmp_path / "data"), OMP_NUM_THREADS="1",
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"), JUPYTERLAB_SETTINGS_DIR=str(settings))
    return env


def _errors(page) -> list[str]:
    found: list[str] = []
    page.on("pageerror", lambda exc: found.append(str(exc)))
    return found


def test_sampan_lab_opens_the_course_index(env, page, tmp_path):
    import sampan.path

    first = sampan.path.load_path().lessons[0]
    port, token = free_port(), uuid.uuid4().hex
    log = tmp_path / "lab.log"
    proc = _start(["lab", "--no-browser", "--port", str(port)], dict(env, SAMPAN_LAB_TOKEN=token), log)
    try:
        status = f"http://127.0.0.1:{port}/api/status?token={token}"
        wait_until(lambda: urllib.request.urlopen(status, timeout=5).status == 200, proc, log)
        # the token is required: without it the API refuses
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents", timeout=10)
        errors = _errors(page)
        page.goto(f"http://127.0.0.1:{port}/?token={token}", timeout=WAIT)  # default_url: the course index
        page.wait_for_url("**/lab/tree/index.ipynb**", timeout=WAIT)
        listing = page.locator(".jp-RenderedMarkdown", has_text="The learning path")
        listing.wait_for(timeout=WAIT)
        assert listing.locator(f"a:has-text('{first.title}')").count() == 1
        kernel = page.locator(".jp-NotebookPanel-toolbar", has_text="Sampan (Python 3)")
        kernel.first.wait_for(state="attached", timeout=WAIT)  # the index names the Sampan kernel
        # open the first lesson from the index, as a learner would
        listing.locator(f"a:has-text('{first.title}')").click()
        page.locator(".jp-NotebookPanel .jp-RenderedMarkdown h1").filter(has_text=first.title.split()[0]) \
            .first.wait_for(timeout=WAIT)
        # the status bar shows the active notebook's kernel: the lesson names the Sampan kernel too
        page.locator(".jp-StatusBar-Widget", has_text="Sampan (Python 3)").first.wait_for(timeout=WAIT)
        # the news question was answered in the settings (see `env`): no toast asks it
        assert page.get_by_text("official Jupyter news").count() == 0
        # the lesson's first cells run in its kernel: README's picture shows the check's report
        run_the_check(page, idle="Idle", first_item="cpu: forward + backward", ready="Sampan is ready.", wait=WAIT)
        IMAGES.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(IMAGES / "lab-lesson.png"))
        assert not errors, errors
    finally:
        stop(proc)


def _serve(name: str, env: dict, tmp_path: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    log = tmp_path / f"{name}.log"
    token = uuid.uuid4().hex
    proc = _start(["dashboard", name, "--port", str(port)], dict(env, SAMPAN_DASHBOARD_TOKEN=token), log)
    wait_until(lambda: _port_open(port), proc, log)
    return proc, f"http://127.0.0.1:{port}/?token={token}"


def test_digit_playground_classifies_a_drawn_zero(env, page, tmp_path):
    from sklearn.datasets import load_digits

    digits = load_digits()
    zero = digits.images[digits.target == 0].mean(0) > 6  # the mean "0", as 8x8 on/off cells
    proc, url = _serve("digit_playground", env, tmp_path)
    try:
        errors = _errors(page)
        page.goto(url, timeout=WAIT)
        page.locator(".sampan-canvas").wait_for(timeout=WAIT)
        assert "def classify" not in page.content()  # sources are stripped
        # the buttons are as wide as their labels (at ipywidgets' default width the Chinese one was cut: 154 px of
        # label in 148)
        assert page.locator("button.sampan-sample").evaluate("b => b.scrollWidth <= b.clientWidth")
        for r, c in zip(*zero.nonzero()):
            page.locator(f".pixel-{r}-{c}").click()
        page.locator(".sampan-prediction .digit", has_text="0").wait_for(timeout=WAIT)  # a ceiling: one kernel call per click
        assert page.locator(".sampan-probabilities").inner_text().count("%") == 10
        page.locator(".pixel-0-0").wait_for()
        assert not errors, errors
    finally:
        stop(proc)


def test_training_monitor_trains_and_draws_curves(env, page, tmp_path):
    proc, url = _serve("training_monitor", env, tmp_path)
    try:
        errors = _errors(page)
        page.goto(url, timeout=WAIT)
        page.locator(".sampan-train").wait_for(timeout=WAIT)
        assert "def on_train" not in page.content()
        page.locator(".sampan-model select").select_option("MLP")
        page.locator(".sampan-train").click()
        page.locator(".sampan-done").wait_for(timeout=WAIT)
        assert "val accuracy" in page.locator(".sampan-status").inner_text()
        page.locator(".sampan-live-curves svg").first.wait_for(timeout=WAIT)
        page.locator(".sampan-resource-monitor").first.wait_for(timeout=WAIT)
        IMAGES.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(IMAGES / "dashboard.png"), full_page=True)
        assert not errors, errors
    finally:
        stop(proc)


def test_path_report_browser_switches_runs(env, page, tmp_path):
    runs = planted_runs(tmp_path / "course")
    older, newer = sorted(p.name for p in runs.iterdir())
    env = dict(env, SAMPAN_RUNS_DIR=str(runs))
    proc, url = _serve("path_report", env, tmp_path)
    try:
        errors = _errors(page)
        page.goto(url, timeout=WAIT)
        report = page.locator(".sampan-report")
        report.locator("#summary").wait_for(timeout=WAIT)
        assert "1 passed" in report.inner_text() and "0 failed" in report.inner_text()  # newest run first
        page.locator(".sampan-run-picker select").select_option(index=1)
        report.locator("#failure-broken", has_text="in cell 1").wait_for(timeout=WAIT)
        assert "planted" in report.inner_text() and older in page.locator(".sampan-run-picker select").input_value()
        page.locator(".sampan-only-failed input").check()
        report.locator("tr[data-lesson='warm_up']").wait_for(state="detached", timeout=WAIT)
        page.locator(".sampan-only-failed input").uncheck()
        report.locator("tr[data-lesson='warm_up']").wait_for(timeout=WAIT)
        assert not errors, errors
        # the report page itself, for the README
        page.goto((runs / older / "report.html").as_uri())
        page.locator("#failure-broken").wait_for()
        IMAGES.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(IMAGES / "path-report.png"), full_page=True)
    finally:
        stop(proc)
    assert newer > older
