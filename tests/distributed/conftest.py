import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
SAMPAN = str(ROOT / ".venv" / "bin" / "sampan")


def launch(args: list[str], *, timeout: float = 300) -> tuple[subprocess.CompletedProcess, float]:
    """Runs `sampan launch ARGS` with one thread per process; returns the result and the wall time."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "sampan", "launch", *args]
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=str(ROOT))
    return proc, time.time() - start


@pytest.fixture(scope="session")
def train_script() -> str:
    return str(HERE / "_train_script.py")
