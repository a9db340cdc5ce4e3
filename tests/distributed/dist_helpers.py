"""Helpers for the distributed tests (a module of its own: `conftest` names collide across test folders)."""
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
ROOT = HERE.parents[1]


def launch(args: list[str], *, timeout: float = 300, module: bool = False) -> tuple[subprocess.CompletedProcess, float]:
    """Runs `sampan launch ARGS` (or `python -m sampan.distributed.launch ARGS` when ``module``) with one thread
    per process; returns the result and the wall time."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    entry = ["-m", "sampan.distributed.launch"] if module else ["-m", "sampan", "launch"]
    cmd = [sys.executable, *entry, *args]
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=str(ROOT))
    return proc, time.time() - start
