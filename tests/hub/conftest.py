"""A real JupyterHub + configurable-http-proxy on 127.0.0.1 (free port) started by ``sampan hub``, and HTTP helpers.

    def test_x(hub):
        teacher = hub.login("teacher", hub.teacher_password)   # a requests.Session with the hub cookies
        token = hub.token_for("alice")                          # an API token of alice (made by the teacher)
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import requests  # a JupyterHub dependency

from sampan.utils.net import free_port  # below the ephemeral range: no kernel or connection takes it first

PROXY = Path(sys.prefix) / "share" / "sampan-node" / "node_modules" / ".bin" / "configurable-http-proxy"
TEACHER_PASSWORD = "teach-" + uuid.uuid4().hex[:12]
START_TIMEOUT = 180.0  # s: a wait ceiling on a loaded 2-core machine (the hub imports torch), not a timing


class Hub:
    """One hub process (``sampan hub``) with its folder; :meth:`restart` keeps the folder."""

    teacher_password = TEACHER_PASSWORD

    def __init__(self, hub_dir: Path, roster: Path | None, env: dict[str, str]):
        self.dir, self.roster, self.extra_env = hub_dir, roster, env
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.proc: subprocess.Popen | None = None
        self.log = hub_dir.parent / "hub.log"
        self._admin_token: str | None = None

    def start(self) -> "Hub":
        # as root (CI), the learners' servers run as root: the account switch needs a Python the learner account
        # can run, and this one may lie in root's private home (tests/security/test_classroom_service.py checks it)
        env = {**os.environ, "SAMPAN_HUB_TEACHER_PASSWORD": TEACHER_PASSWORD, "SAMPAN_HUB_LEARNER_USER": "root",
               **self.extra_env}
        cmd = [sys.executable, "-m", "sampan", "hub", "--port", str(self.port), "--dir", str(self.dir), "--lang", "en"]
        if self.roster:
            cmd += ["--roster", str(self.roster)]
        self.proc = subprocess.Popen(cmd, env=env, stdout=open(self.log, "a"), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.time() + START_TIMEOUT
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"hub exited with {self.proc.returncode}:\n{self.log_errors()}")
            try:
                if requests.get(self.url + "hub/api/", timeout=3).status_code == 200 and self._service_up():
                    self._admin_token = None
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.5)
        raise TimeoutError(f"hub did not answer within {START_TIMEOUT:.0f} s:\n{self.log_tail()}")

    def _service_up(self) -> bool:
        r = requests.get(self.url + "services/progress/me", allow_redirects=False, timeout=3)
        return r.status_code in (302, 403)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the hub stops its servers, services and proxy
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.proc = None
        self._stop_orphaned_proxy()

    def _stop_orphaned_proxy(self) -> None:
        """A hub that died on its own leaves its proxy, services and servers (each in its own session) running:
        stop the proxy by its pid file, and the processes whose environment points into this hub's folder."""
        import psutil

        found = []
        try:
            proxy = psutil.Process(int((self.dir / "proxy.pid").read_text().strip()))
            if "configurable-http-proxy" in " ".join(proxy.cmdline()):
                found.append(proxy)
        except (OSError, ValueError, psutil.Error):
            pass
        users = str(self.dir / "users")
        found += [proc for proc, env in _environments()
                  if env.get("SAMPAN_HUB_USERS") == users or env.get("SAMPAN_LEARNER_HOME", "").startswith(users + os.sep)]
        for proc in found:
            try:
                proc.terminate()
            except psutil.Error:
                pass
        psutil.wait_procs(found, timeout=10)

    def restart(self) -> "Hub":
        self.stop()
        return self.start()

    def log_errors(self) -> str:
        """JupyterHub's critical and error lines (the proxy's 404s while the hub starts are left out)."""
        text = self.log.read_text(errors="replace") if self.log.is_file() else ""
        return "\n".join(line for line in text.splitlines() if line.startswith(("[C ", "[E ", "Traceback")))[-4000:]

    def log_tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.is_file() else ""

    # --- browser-like sessions -------------------------------------------------------------------------
    def _form(self, path: str, data: dict, session=None):
        s = session or requests.Session()
        s.get(self.url + path, timeout=10)
        return s, s.post(self.url + path, data={**data, "_xsrf": s.cookies.get("_xsrf", "")}, timeout=30,
                         allow_redirects=False)

    def signup(self, name: str, password: str) -> str:
        _, r = self._form("hub/signup", {"username": name, "signup_password": password,
                                         "signup_password_confirmation": password})
        assert r.status_code == 200, r.text[:500]
        return r.text

    def login(self, name: str, password: str):
        """A logged-in requests.Session; raises with the page's error when the login is refused."""
        s, r = self._form("hub/login", {"username": name, "password": password})
        if r.status_code != 302:
            raise PermissionError(_login_error(r.text))
        return s

    # --- API ---------------------------------------------------------------------------------------------
    def admin_token(self) -> str:
        if self._admin_token is None:
            s = self.login("teacher", TEACHER_PASSWORD)
            r = s.post(self.url + "hub/api/users/teacher/tokens", json={"note": "tests"},
                       headers={"X-XSRFToken": s.cookies.get("_xsrf", "")}, timeout=10)
            assert r.status_code == 201, r.text
            self._admin_token = r.json()["token"]
        return self._admin_token

    def api(self, method: str, path: str, token: str | None = None, **kw):
        headers = {"Authorization": f"token {token or self.admin_token()}"}
        return requests.request(method, self.url + path.lstrip("/"), headers=headers, timeout=60, **kw)

    def token_for(self, name: str) -> str:
        r = self.api("POST", f"hub/api/users/{name}/tokens", json={"note": "tests"})
        assert r.status_code == 201, r.text
        return r.json()["token"]

    def spawn(self, *names: str, timeout: float = 150.0) -> None:
        """Starts the servers of ``names`` at once and waits until each answers."""
        for name in names:
            r = self.api("POST", f"hub/api/users/{name}/server")
            assert r.status_code in (201, 202, 400), r.text  # 400: already running
        deadline = time.time() + timeout
        waiting = set(names)
        while waiting and time.time() < deadline:
            for name in sorted(waiting):
                server = self.api("GET", f"hub/api/users/{name}").json().get("servers", {}).get("", {})
                if server.get("ready"):
                    waiting.discard(name)
            time.sleep(1)
        assert not waiting, f"servers not ready: {waiting}\n{self.log_tail()}"

    def server_port(self, name: str) -> int:
        """The port ``name``'s running server listens on (read from its process's environment)."""
        from urllib.parse import urlsplit

        home = str(self.dir / "users" / name)
        for _, env in _environments():
            if env.get("SAMPAN_LEARNER_HOME") == home and env.get("JUPYTERHUB_SERVICE_URL"):
                return urlsplit(env["JUPYTERHUB_SERVICE_URL"]).port
        raise LookupError(f"no server of {name} is running")

    def execute(self, name: str, code: str, *, token: str, kernel: str = "sampan", timeout: float = 120.0) -> str:
        """Runs ``code`` in a new kernel of ``name``'s server over the Jupyter API; returns its stdout."""
        import websocket

        base = f"user/{name}/api/kernels"
        r = self.api("POST", base, token=token, json={"name": kernel})
        assert r.status_code == 201, r.text
        kid = r.json()["id"]
        ws = websocket.create_connection(f"ws://127.0.0.1:{self.port}/{base}/{kid}/channels",
                                         header=[f"Authorization: token {token}"], timeout=timeout)
        msg_id = uuid.uuid4().hex
        ws.send(json.dumps({"header": {"msg_id": msg_id, "msg_type": "execute_request", "username": name,
                                       "session": uuid.uuid4().hex, "version": "5.3"},
                            "parent_header": {}, "metadata": {}, "channel": "shell",
                            "content": {"code": code, "silent": False, "store_history": False,
                                        "user_expressions": {}, "allow_stdin": False}}))
        out, deadline = [], time.time() + timeout
        try:
            while time.time() < deadline:
                msg = json.loads(ws.recv())
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                kind = msg["msg_type"]
                if kind == "stream":
                    out.append(msg["content"]["text"])
                elif kind == "error":
                    raise AssertionError("\n".join(msg["content"]["traceback"]))
                elif kind == "status" and msg["content"]["execution_state"] == "idle":
                    return "".join(out)
        finally:
            ws.close()
        raise TimeoutError(f"no reply within {timeout} s; output so far: {''.join(out)}")


def _environments():
    """``(process, its environment)`` for every process whose environment can be read."""
    import psutil

    for proc in psutil.process_iter():
        try:
            yield proc, proc.environ()
        except psutil.Error:
            continue


def _login_error(html: str) -> str:
    import re

    found = re.search(r'<p class="login_error">\s*(.*?)\s*</p>', html, re.S)
    return found.group(1).strip() if found else html[:300]


@pytest.fixture(scope="module")
def hub_factory(tmp_path_factory):
    """Starts hubs (``make(roster=..., env=...)``); stops them all at the end of the module."""
    if not PROXY.is_file() and shutil.which("configurable-http-proxy") is None:
        pytest.fail("configurable-http-proxy is missing: run `make hub-proxy` (npm install)")
    hubs: list[Hub] = []

    def make(roster: str | None = None, env: dict[str, str] | None = None) -> Hub:
        root = tmp_path_factory.mktemp("hub")
        roster_file = None
        if roster is not None:
            roster_file = root / "roster.csv"
            roster_file.write_text(roster)
        data = root / "data"
        hub = Hub(root / "hub", roster_file, {"SAMPAN_DATA": str(data), **(env or {})})
        hubs.append(hub)
        return hub.start()

    yield make
    for hub in hubs:
        hub.stop()
        live = hub.dir / "live_dir.txt"  # the live dashboards' folder (outside the hub folder, sampan.hub.live)
        if live.is_file() and Path(live.read_text().strip()).name.startswith("sampan-live-"):
            shutil.rmtree(live.read_text().strip(), ignore_errors=True)
