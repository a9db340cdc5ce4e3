"""Browser fixtures: Voilà and JupyterLab servers on 127.0.0.1 (free port, token, timeouts) and headless
Debian Chromium driven by Playwright. Reusable by any browser test:

    def test_x(start_voila, page):
        url = start_voila(notebook_path)          # the page URL, token included
        page.goto(url)

    def test_y(start_lab, page):
        lab = start_lab(root_dir)                 # lab.url("name.ipynb") opens a notebook
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from servers import stop, wait_until

from sampan.utils.net import free_port  # below the ephemeral range: no kernel or connection takes it first
from sampan.utils.notebooks import VOILA_BOOT

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
START_TIMEOUT = 90.0


def _wait_http(url: str, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    def answers() -> bool:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status == 200

    wait_until(answers, proc, log, timeout, url)


def _wait_port(port: int, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    """Waits until the port accepts connections (a GET on Voilà's page would run the notebook)."""
    def open_() -> bool:
        with socket.socket() as s:
            s.settimeout(1)
            return s.connect_ex(("127.0.0.1", port)) == 0

    wait_until(open_, proc, log, timeout, f"port {port}", pause=0.3)


def _stop(proc: subprocess.Popen) -> None:
    stop(proc, grace=15)


@dataclass
class Server:
    base: str
    token: str
    proc: subprocess.Popen
    log: Path

    def url(self, path: str = "") -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base}{path}{sep}token={self.token}"


@pytest.fixture
def server_env(tmp_path):
    """Environment for servers and kernels: no network hooks, private runtime/config dirs, few threads."""
    env = dict(os.environ)
    env.update(JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
               JUPYTER_PLATFORM_DIRS="1")
    return env


@pytest.fixture
def start_voila(tmp_path, server_env):
    """``start_voila(notebook_path) -> url``: Voilà 0.5 serving one notebook; stopped after the test."""
    procs: list[subprocess.Popen] = []

    def start(notebook: str | os.PathLike, *, timeout: float = START_TIMEOUT) -> str:
        port, token = free_port(), uuid.uuid4().hex
        log = tmp_path / f"voila-{port}.log"
        # as `sampan dashboard` runs it: python -m voila with the mend for a cell's lost reply
        cmd = [sys.executable, "-c", VOILA_BOOT, str(notebook), "--no-browser", f"--port={port}", "--Voila.ip=127.0.0.1",
               f"--token={token}", "--show_tracebacks=True", "--Voila.port_retries=0"]
        proc = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, env=server_env,
                                cwd=str(Path(notebook).parent))
        procs.append(proc)
        server = Server(f"http://127.0.0.1:{port}/", token, proc, log)
        _wait_port(port, proc, log, timeout)
        return server.url("")

    yield start
    for p in procs:
        _stop(p)


@pytest.fixture
def start_lab(tmp_path, server_env):
    """``start_lab(root_dir) -> Server``: JupyterLab 4 on ``root_dir`` (no update checks, private settings and
    workspaces); ``server.url("lab/tree/x.ipynb")`` opens a notebook. Stopped after the test."""
    procs: list[subprocess.Popen] = []

    def start(root_dir: str | os.PathLike, *, timeout: float = START_TIMEOUT) -> Server:
        port, token = free_port(), uuid.uuid4().hex
        log = tmp_path / f"lab-{port}.log"
        state = tmp_path / f"lab-state-{port}"
        cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.root_dir={root_dir}", f"--IdentityProvider.token={token}", "--ServerApp.port_retries=0",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--LabApp.news_url=",
               f"--LabApp.workspaces_dir={state / 'workspaces'}", f"--LabApp.user_settings_dir={state / 'settings'}",
               "--LabApp.extension_manager=readonly", *(["--allow-root"] if os.geteuid() == 0 else [])]
        proc = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, env=server_env,
                                cwd=str(root_dir))
        procs.append(proc)
        server = Server(f"http://127.0.0.1:{port}/", token, proc, log)
        _wait_http(server.url("api/status"), proc, log, timeout)
        return server

    yield start
    for p in procs:
        _stop(p)


@pytest.fixture(scope="module")
def chromium():
    """Debian's Chromium, headless, through Playwright (never a downloaded browser)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium fonts-noto-cjk (.ci/run does this)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium, tmp_path):
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(60_000)
    yield pg
    context.close()
