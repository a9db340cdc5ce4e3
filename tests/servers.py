"""Starting and stopping the real servers the tests use (JupyterLab, Voilà, the hub): one wait, one stop."""
from __future__ import annotations

import subprocess
import time
import urllib.error
from pathlib import Path
from typing import Callable


def wait_until(check: Callable[[], bool], proc: subprocess.Popen, log: Path, timeout: float = 120.0,
               what: str = "server", pause: float = 0.5) -> None:
    """Polls ``check()`` until it is true; fails with the server's log when it exits or ``timeout`` runs out.
    Connection errors count as "not yet"."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if check():
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        time.sleep(pause)
    raise TimeoutError(f"{what} did not answer within {timeout:.0f} s:\n{log.read_text()[-3000:]}")


def stop(proc: subprocess.Popen, grace: float = 20.0) -> None:
    """Terminates ``proc`` (a server stops its kernels on SIGTERM); kills it if it lingers."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
