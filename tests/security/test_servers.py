"""The servers Sampan starts keep their token off command lines and refuse traversal and code execution
(issue 11, security items 3 and 4).

``/proc/PID/cmdline`` is readable by every local user: a token there hands the learner's kernels to anyone
on the machine. Each test starts the real server on 127.0.0.1 the way a learner does, and stops it after.
"""
from __future__ import annotations

import asyncio
import http.client
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import nbformat
import pytest
from servers import stop, wait_until

from sampan.cli._servers import free_port, server_env
from sampan.cli.dashboard import command as voila_command

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc (Linux)")


def _start(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen(args, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env, cwd=str(REPO))


def _status(port: int, path: str) -> tuple[int, bytes]:
    """GET with the path sent exactly as written (no client-side normalisation of '..')."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _follow(port: int, path: str, token: str, hops: int = 5) -> tuple[int, bytes, list[str]]:
    """GET ``path`` with the token, following redirects (Voilà sends unknown paths to /voila/files/)."""
    seen = [path]
    for _ in range(hops):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            sep = "&" if "?" in path else "?"
            conn.request("GET", f"{path}{sep}token={token}")
            response = conn.getresponse()
            status, body, location = response.status, response.read(), response.getheader("Location")
        finally:
            conn.close()
        if status not in (301, 302, 307) or not location:
            return status, body, seen
        path = location
        seen.append(path)
    return status, body, seen


def _wait_ready(port: int, path: str, proc: subprocess.Popen, log: Path, timeout: float = 120.0,
                ready: tuple[int, ...] = (200, 302)) -> None:
    wait_until(lambda: _status(port, path)[0] in ready, proc, log, timeout)


def _tree(pid: int) -> list[int]:
    """``pid`` and all its descendants, from /proc/*/stat."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(child for child, parent in parents.items() if parent == current)
    return found


def _cmdlines(pid: int) -> dict[int, str]:
    lines = {}
    for p in _tree(pid):
        try:
            lines[p] = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            pass
    return lines


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("lab")
    token, port = uuid.uuid4().hex, free_port()
    env = dict(os.environ, SAMPAN_LAB_TOKEN=token, OMP_NUM_THREADS="1",
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"), JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"))
    log = tmp_path / "lab.log"
    proc = _start([sys.executable, "-m", "sampan", "lab", "--no-browser", "--port", str(port)], env, log)
    try:
        _wait_ready(port, f"/api/status?token={token}", proc, log)
        yield proc, port, token
    finally:
        stop(proc)


def test_lab_token_is_not_on_any_command_line_and_is_required(lab):
    proc, port, token = lab
    # a kernel is a child process too: start one so its command line is checked as well
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/kernels?token={token}", data=b"{}",
                                     method="POST")
    kernel = json.loads(urllib.request.urlopen(request, timeout=60).read())
    lines = _cmdlines(proc.pid)
    assert len(lines) >= 2 and any("jupyterlab" in line for line in lines.values())
    assert not [line for line in lines.values() if token in line], lines
    assert f"token={token}" in Path(f"/proc/{proc.pid}/environ").read_bytes().decode(errors="replace") \
        .replace("\0", "\n").replace("JUPYTER_TOKEN=", "token=")  # it travelled in the environment
    assert _status(port, "/api/contents")[0] == 403
    assert _status(port, f"/api/contents?token={token}")[0] == 200
    assert _status(port, f"/api/kernels/{kernel['id']}?token={token}")[0] == 200


def _connection_file(pid: int, kernel_id: str) -> Path:
    """The connection file of the kernel ``kernel_id`` under ``pid`` (its ``-f`` argument)."""
    files = [Path(arg) for line in _cmdlines(pid).values() if "ipykernel_launcher" in line
             for arg in line.split() if arg.endswith(f"kernel-{kernel_id}.json")]
    assert len(files) == 1, _cmdlines(pid)
    return files[0]


def test_lab_kernels_outputs_are_unreadable_to_another_process(lab):
    """JupyterLab gives its kernels CurveZMQ keys: a local process on the iopub port reads nothing of what runs
    (tests/security/test_kernel_channels.py has the control: the same spy reads an unencrypted kernel)."""
    import threading

    from jupyter_client import BlockingKernelClient
    from _spy import listen

    proc, port, token = lab
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/kernels?token={token}", data=b"{}",
                                     method="POST")
    kernel = json.loads(urllib.request.urlopen(request, timeout=60).read())
    try:
        info = json.loads(_connection_file(proc.pid, kernel["id"]).read_text())
        assert info["curve_publickey"] and info["curve_secretkey"]
        heard: list[bytes] = []
        spy = threading.Thread(target=lambda: heard.append(listen(info["iopub_port"], 4.0)))
        spy.start()
        client = BlockingKernelClient()
        client.load_connection_info(info)
        client.start_channels(hb=False)  # no heartbeat verdict: under load a starting kernel misses its 1-s pings
        try:
            client.wait_for_ready(timeout=60)
            time.sleep(0.5)  # the spy has subscribed
            printed = []
            client.execute_interactive("print('-'.join(['lab', 'secret', '2718']))", timeout=60,
                                       output_hook=lambda msg: printed.append(msg["content"].get("text", "")))
        finally:
            client.stop_channels()
        spy.join()
        assert "lab-secret-2718" in "".join(printed)  # the owner, with the connection file, reads it
        assert heard == [b""]
    finally:
        urllib.request.urlopen(urllib.request.Request(
            f"http://127.0.0.1:{port}/api/kernels/{kernel['id']}?token={token}", method="DELETE"), timeout=60)


@pytest.mark.parametrize("path", ["/files/../../../../etc/passwd", "/files/..%2f..%2f..%2f..%2fetc%2fpasswd",
                                  "/api/contents/..%2f..%2f..%2f..%2fetc%2fpasswd",
                                  "/api/contents/%2fetc%2fpasswd", "/nbconvert/html/..%2f..%2f..%2f..%2fetc%2fpasswd"])
def test_lab_refuses_path_traversal(lab, path):
    _, port, token = lab
    status, body = _status(port, f"{path}?token={token}")
    assert status in (400, 403, 404) and b"root:x:0" not in body


def test_lab_tree_page_does_not_serve_files_outside_its_root(lab):
    _, port, token = lab
    status, body = _status(port, f"/lab/tree/..%2f..%2f..%2f..%2fetc%2fpasswd?token={token}")
    assert status in (200, 400, 403, 404) and b"root:x:0" not in body  # 200: the app shell, never the file


@pytest.fixture(scope="module")
def voila(tmp_path_factory):
    """The command line `sampan dashboard` runs, on a one-cell notebook (fast: no torch import)."""
    tmp_path = tmp_path_factory.mktemp("voila")
    notebook = tmp_path / "board.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, notebook)
    token, port = uuid.uuid4().hex, free_port()
    env = dict(server_env(token), JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"), OMP_NUM_THREADS="1")
    log = tmp_path / "voila.log"
    proc = _start(voila_command(notebook, port=port), env, log)
    try:
        _wait_ready(port, "/voila/static/", proc, log, ready=(404,))  # answers: up
        yield proc, port, token
    finally:
        stop(proc)


def test_sampan_dashboard_token_is_not_on_its_command_line(tmp_path):
    token, port = uuid.uuid4().hex, free_port()
    env = dict(os.environ, SAMPAN_DASHBOARD_TOKEN=token, JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"))
    log = tmp_path / "dashboard.log"
    proc = _start([sys.executable, "-m", "sampan", "dashboard", "path_report", "--port", str(port)], env, log)
    try:
        _wait_ready(port, "/voila/static/", proc, log, ready=(404,))  # answers: up
        lines = _cmdlines(proc.pid)
        assert any("voila" in line for line in lines.values())
        assert not [line for line in lines.values() if token in line], lines
        assert f"?token={token}" in log.read_text()  # the URL to open is printed for the learner
        status, _ = _status(port, "/")
        assert status in (302, 403)  # no token: the login page, not the dashboard
    finally:
        stop(proc)


@pytest.mark.parametrize("path", ["/voila/render/..%2f..%2f..%2f..%2fetc%2fpasswd",
                                  "/voila/files/..%2f..%2f..%2f..%2fetc%2fpasswd",
                                  "/voila/files/../../../../etc/passwd", "/voila/tree/..%2f..%2f..%2f.."])
def test_voila_refuses_path_traversal(voila, path):
    _, port, token = voila
    status, body, hops = _follow(port, path, token)
    assert status in (400, 403, 404) and b"root:x:0" not in body, hops


def test_voila_kernel_refuses_execute_requests_from_the_browser(voila, tmp_path):
    """Voilà forwards only widget (comm) and kernel-info messages: a page cannot run code in the kernel."""
    import re

    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    _, port, token = voila
    status, page = _status(port, f"/?token={token}")  # renders the notebook: starts its kernel
    assert status == 200
    kernel_id = re.search(rb'"kernelId": "([0-9a-f-]{36})"', page).group(1).decode()
    marker = tmp_path / "executed"

    def message(msg_type: str, content: dict) -> str:
        header = {"msg_id": uuid.uuid4().hex, "msg_type": msg_type, "session": uuid.uuid4().hex, "username": "x",
                  "version": "5.3", "date": "2026-01-01T00:00:00Z"}
        return json.dumps({"header": header, "parent_header": {}, "metadata": {}, "content": content,
                           "channel": "shell", "buffers": []})

    async def talk() -> list[str]:
        url = f"ws://127.0.0.1:{port}/api/kernels/{kernel_id}/channels?token={token}"
        ws = await websocket_connect(HTTPRequest(url, headers={"Origin": f"http://127.0.0.1:{port}"}))
        ws.write_message(message("execute_request", {"code": f"open({str(marker)!r}, 'w').close()",
                                                     "silent": False, "store_history": False,
                                                     "user_expressions": {}, "allow_stdin": False}))
        ws.write_message(message("kernel_info_request", {}))  # allowed: proves the channel itself works
        replies: list[str] = []
        deadline = time.time() + 60
        while "kernel_info_reply" not in replies and time.time() < deadline:
            raw = await asyncio.wait_for(ws.read_message(), timeout=60)
            if raw is None:
                break
            if isinstance(raw, str):
                replies.append(json.loads(raw)["header"]["msg_type"])
        await asyncio.sleep(1.0)  # give a (wrongly) forwarded execute_request time to run
        ws.close()
        return replies

    replies = asyncio.run(talk())
    assert "kernel_info_reply" in replies
    assert "execute_reply" not in replies and "execute_input" not in replies
    assert not marker.exists()


def test_voila_kernel_is_encrypted(voila):
    """The dashboard's kernel gets CurveZMQ keys too, as JupyterLab's do (the spy test above shows what they stop)."""
    import re

    proc, port, token = voila
    status, page = _status(port, f"/?token={token}")  # renders the notebook: starts its kernel
    assert status == 200
    kernel_id = re.search(rb'"kernelId": "([0-9a-f-]{36})"', page).group(1).decode()
    info = json.loads(_connection_file(proc.pid, kernel_id).read_text())
    assert info["curve_publickey"] and info["curve_secretkey"]


@pytest.mark.parametrize("command, variable", [("lab", "SAMPAN_LAB_TOKEN"), ("dashboard", "SAMPAN_DASHBOARD_TOKEN")])
def test_a_token_on_the_command_line_is_refused_with_the_way_to_pass_it(command, variable, capsys):
    from sampan.cli import main

    args = [command, "--token", "s3cret", "--dry-run"] + (["path_report"] if command == "dashboard" else [])
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--token is not accepted" in err and f"{variable}=" in err
