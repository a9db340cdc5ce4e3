"""The recording service: one process per user that writes the runs of every fitting process to SQLite stores.

Importing MLflow and its SQLAlchemy store costs a process 3-4 CPU-seconds, more than a small lesson's whole fit on
a 2-core machine. So a fitting process does not import MLflow: its :class:`~sampan.experiments.Recorder` sends each
write (start a run, a batch of metrics, end it) over a Unix socket to this service, which has MLflow loaded
already and writes to the store as before. The store is the same, so ``mlflow ui``, ``search_runs`` and the
dashboards see a run as it goes.

The service starts on the first write (``python -m sampan.experiments.service``) and exits after ``IDLE_S``
seconds without one. Its socket is in a folder only this user may enter (``$TMPDIR/sampan-recorder-<uid>``,
mode 0700, checked before every use), so no other user can read or forge runs. It serves ``sqlite:///`` stores
only: other stores (a class's tracking server) may take credentials from the writing process's environment, so
those writes stay in the process. Whenever the service cannot be used (no Unix sockets, a folder that is not
private, ``SAMPAN_RECORDER_SERVICE=0``, the service gone mid-run), the process writes itself, as it did before.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from sampan.utils.imports import python_command

SWITCH_ENV = "SAMPAN_RECORDER_SERVICE"
IDLE_ENV = "SAMPAN_RECORDER_IDLE"
IDLE_S = 300.0  # seconds without a request before the service exits
START_WAIT_S = 30.0  # the longest a client waits for a service it started to listen
MAX_SOCKET_PATH = 100  # bytes: Linux takes 107 in a Unix socket's address
REPLY_WAIT_S = 300.0  # a first write imports MLflow and may create the store (migrations): seconds on a busy machine


class Unavailable(RuntimeError):
    """The service cannot take this write; the caller writes in-process."""


# ---------------------------------------------------------------- where the socket is
def enabled() -> bool:
    return hasattr(socket, "AF_UNIX") and os.environ.get(SWITCH_ENV, "1").strip().lower() not in (
        "0", "false", "off", "no")


def private_dir() -> Path | None:
    """``$TMPDIR/sampan-recorder-<uid>``, created 0700; None when it exists but another user owns it or others
    may enter it (then the socket in it could be someone else's)."""
    folder = Path(tempfile.gettempdir()) / f"sampan-recorder-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.lstat()
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None
    return folder


def socket_path(folder: Path) -> Path:
    """One service per Python environment and version of this code (a service must run the caller's code)."""
    from sampan._version import __version__
    from sampan.experiments import recorder

    code = "\0".join(str(os.stat(f).st_mtime_ns) for f in (__file__, recorder.__file__))  # edited code: a new one
    key = hashlib.sha256(f"{sys.prefix}\0{__version__}\0{code}".encode()).hexdigest()[:12]
    return folder / f"{key}.sock"


# ---------------------------------------------------------------- the client side
_spawn_lock = threading.Lock()


def call(op: str, **payload: Any) -> Any:
    """Sends one request and returns the service's result; raises :class:`Unavailable` when it cannot be used
    (the request was then not applied, or the service died while applying it)."""
    if not enabled() or not str(payload.get("uri", "")).startswith("sqlite:///"):
        raise Unavailable("not a local SQLite store, or the service is switched off")
    if not Path(payload["uri"][len("sqlite:///"):]).is_absolute():
        raise Unavailable("a relative SQLite path (sqlite:///mlflow.db) is relative to this process's folder")
    folder = private_dir()
    if folder is None:
        raise Unavailable("no private folder for the service's socket")
    path = socket_path(folder)
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise Unavailable(f"the socket path {path} is too long for a Unix socket")
    try:
        conn = _connect(path)
    except OSError:
        conn = _start(folder, path)
    with conn:
        conn.settimeout(REPLY_WAIT_S)
        try:
            conn.sendall(json.dumps({"op": op, **payload}).encode() + b"\n")
            reply = _read_line(conn)
        except OSError as exc:
            raise Unavailable(f"the service stopped answering: {exc}") from exc
    if reply is None:
        raise Unavailable("the service closed the connection")
    answer = json.loads(reply)
    if not answer.get("ok"):
        raise RuntimeError(answer.get("error", "the recording service failed"))
    return answer.get("result")


def _connect(path: Path) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(5.0)
        conn.connect(str(path))
    except OSError:
        conn.close()
        raise
    return conn


def _start(folder: Path, path: Path) -> socket.socket:
    """Starts the service (one at a time across processes: a lock file) and connects to it."""
    from sampan.utils.io import file_lock

    with _spawn_lock, file_lock(folder / f"{path.stem}.lock"):
        try:
            return _connect(path)  # another process started it meanwhile
        except OSError:
            pass
        path.unlink(missing_ok=True)  # a service that died left its socket file
        # the launcher forks the service off and exits once it listens: the service is no child of this process
        # (stopping a job's process tree, or a kernel's, must not stop the service that every process shares)
        try:
            started = subprocess.run(python_command("-m", "sampan.experiments.service", str(path)),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     close_fds=True, timeout=START_WAIT_S).returncode == 0
        except subprocess.TimeoutExpired:
            started = False
        if not started:
            raise Unavailable("the recording service did not start")
        try:
            return _connect(path)
        except OSError as exc:
            raise Unavailable(f"the recording service did not answer: {exc}") from exc


def _read_line(conn: socket.socket) -> bytes | None:
    chunks = []
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        chunks.append(chunk)
        if chunk.endswith(b"\n"):
            return b"".join(chunks)


# ---------------------------------------------------------------- the service side
def _handle(request: dict) -> Any:
    from sampan.experiments import recorder

    op = request.pop("op")
    if op == "ping":
        return {"pid": os.getpid()}
    if op == "start":
        return recorder.start_run(**request)
    if op == "write":
        return recorder.write_metrics(**request)
    if op == "end":
        return recorder.end_run(**request)
    raise ValueError(f"unknown request {op!r}")


def serve(path: str, idle: float | None = None, ready: Callable[[], None] | None = None) -> None:
    """Listens on ``path`` until ``idle`` seconds pass without a request (``$SAMPAN_RECORDER_IDLE``, else 300);
    calls ``ready()`` once it listens."""
    idle = float(os.environ.get(IDLE_ENV, IDLE_S)) if idle is None else idle
    os.umask(0o077)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    inode = os.stat(path).st_ino
    server.listen(64)
    if ready is not None:
        ready()
    server.settimeout(0.5)
    lock = threading.Lock()  # one store write at a time: SQLite takes one writer anyway
    last = [time.monotonic()]
    busy = [0]

    def answer(conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(REPLY_WAIT_S)
                line = _read_line(conn)
                if line is None:
                    return
                with lock:
                    try:
                        reply = {"ok": True, "result": _handle(json.loads(line))}
                    except Exception as exc:  # the caller's write failed: it says so, the service goes on
                        reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
                conn.sendall(json.dumps(reply).encode() + b"\n")
            except OSError:
                pass
            finally:
                with lock:
                    busy[0] -= 1
                    last[0] = time.monotonic()

    try:
        while True:
            try:
                conn, _ = server.accept()
            except socket.timeout:
                with lock:
                    if not busy[0] and time.monotonic() - last[0] > idle:
                        return
                if not _still_ours(path, inode):
                    return
                continue
            with lock:
                busy[0] += 1
                last[0] = time.monotonic()
            threading.Thread(target=answer, args=(conn,), daemon=True).start()
    finally:
        server.close()
        if _still_ours(path, inode):
            Path(path).unlink(missing_ok=True)


def _still_ours(path: str, inode: int) -> bool:
    """Whether ``path`` is still this service's socket (a cleaned /tmp or a newer service replaces it)."""
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False


def _launch(path: str) -> int:
    """Forks the service into a session of its own; this launcher exits 0 once the service listens, else 1."""
    read_end, write_end = os.pipe()
    if os.fork():
        os.close(write_end)
        return 0 if os.read(read_end, 2) == b"ok" else 1
    os.close(read_end)
    os.setsid()

    def ready() -> None:
        os.write(write_end, b"ok")
        os.close(write_end)

    try:
        serve(path, ready=ready)
    finally:
        os._exit(0)


if __name__ == "__main__":
    sys.exit(_launch(sys.argv[1]))
