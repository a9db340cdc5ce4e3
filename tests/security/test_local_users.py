"""Another user of the same machine (a class machine, a shared Slurm node) cannot run code as you through the
processes Sampan starts for you, nor reach the store through which your training ranks meet.

- ``python -c`` puts its working folder first on ``sys.path``: the kernel fork server (``SAMPAN_FORK_KERNELS=1``)
  and multiprocessing's fork server (``spawn`` / ``notebook_launcher``) would import zmq, torch... from the folder
  the learner happened to be in (``/tmp``, a class's shared folder), where anyone may leave a ``torch.py``;
- ``python -c`` / ``-m`` again for every helper Sampan starts (the recording service, job and sweep workers, the
  servers of ``sampan lab`` / ``dashboard`` / ``hub``): ``sampan.utils.imports.python_command``;
- torch's TCP store listens on every interface, whatever ``MASTER_ADDR`` says, and lets anyone in: ``spawn``'s
  ranks meet through a file in their private folder instead, and a group of one through an in-memory store.
"""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

OTHER_UID = 65534  # nobody: the other learner
SYSTEM_PYTHON = "/usr/bin/python3"  # one the other user can run (this environment's may sit in a private home)
root_only = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                               reason="acting as another user needs root")
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


@pytest.fixture
def shared():
    """A folder every user may write to, as /tmp or a class's shared folder (sticky, mode 1777), where the other
    user can reach it (pytest's own folders are private)."""
    folder = Path(tempfile.mkdtemp(prefix="sampan-shared-"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _plant(folder: Path, module: str) -> Path:
    """The other user leaves ``<module>.py`` in ``folder``: imported, it notes who ran it, then steps aside (an
    ImportError, which the fork servers skip), so that the victim's work goes on and nothing looks wrong."""
    marker = folder / f"ran-{module}"
    code = textwrap.dedent(f"""\
        import os
        with open({str(marker)!r}, "a") as f:
            f.write(str(os.getuid()) + "\\n")
        raise ImportError("planted")
        """)
    target = folder / f"{module}.py"
    if os.geteuid() == 0 and os.path.exists(SYSTEM_PYTHON):
        subprocess.run([SYSTEM_PYTHON, "-c", f"open({str(target)!r}, 'w').write({code!r})"], user=OTHER_UID,
                       check=True)
        assert target.stat().st_uid == OTHER_UID
    else:
        target.write_text(code)
    return marker


@linux_only
def test_the_kernel_fork_server_imports_nothing_from_the_folder_it_was_started_in(shared, tmp_path, monkeypatch):
    from sampan.utils import forkkernels

    markers = [_plant(shared, name) for name in ("zmq", "tornado", "numpy")]
    monkeypatch.chdir(shared)  # the learner runs `sampan path run` from there
    own = tmp_path / "kernel"  # the kernel's own folder: its modules are the learner's own (as for any kernel)
    own.mkdir()
    # a hash seed of its own: a fresh fork server, started in the shared folder
    env = {**os.environ, "PYTHONHASHSEED": "271828"}
    kernel = forkkernels.launch([sys.executable, "-m", "ipykernel_launcher", "--version"], env=env, cwd=str(own),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert kernel.wait(timeout=120) == 0
    assert [m.name for m in markers if m.exists()] == []


@linux_only
def test_spawns_fork_server_imports_nothing_from_the_folder_it_was_started_in(shared, tmp_path):
    markers = [_plant(shared, name) for name in ("torch", "sampan")]
    mine = tmp_path / "mine"
    mine.mkdir()
    script = mine / "job.py"
    script.write_text(textwrap.dedent("""\
        from sampan.distributed import spawn

        def work(n):
            return n + 1

        if __name__ == "__main__":
            print(spawn(work, args=(41,), nprocs=1))
        """))
    out = subprocess.run([sys.executable, str(script)], cwd=shared, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[42]"
    assert [m.name for m in markers if m.exists()] == []


@linux_only
@root_only
def test_spawns_ranks_meet_where_no_other_user_can_connect():
    from sampan.distributed import spawn

    def probe(other_python):
        import subprocess

        import psutil
        import torch.distributed as dist

        from sampan.distributed import init_parallel_env

        init_parallel_env()
        dist.barrier()
        listening = sorted({c.laddr.ip for c in psutil.Process().net_connections("inet")
                            if c.status == psutil.CONN_LISTEN})
        reached = None
        if dist.get_rank() == 0:  # the other user tries the port the ranks were told to meet on
            code = "import socket, sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 3).close()"
            reached = subprocess.run([other_python, "-c", code, os.environ["MASTER_PORT"]], user=OTHER_UID,
                                     capture_output=True).returncode == 0
        dist.barrier()
        return listening, reached

    results = spawn(probe, args=(SYSTEM_PYTHON,), nprocs=2, threads=1)
    assert results[0][1] is False  # nothing answered the other user on the rendezvous port
    for listening, _ in results:  # gloo's own connections: on the loopback interface, never on all of them
        assert set(listening) <= {"127.0.0.1", "::1"}, listening


@linux_only
def test_a_group_of_one_opens_no_store_on_all_interfaces(tmp_path):
    code = textwrap.dedent("""\
        import psutil
        from sampan.distributed import init_parallel_env
        init_parallel_env()
        print(sorted({c.laddr.ip for c in psutil.Process().net_connections("inet") if c.status == psutil.CONN_LISTEN}))
        """)
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "RANK")}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    listening = ast.literal_eval(out.stdout.strip().splitlines()[-1])
    assert not set(listening) & {"0.0.0.0", "::", ""}, listening


@pytest.mark.parametrize("safe_path_flag", [True, False], ids=["-P", "python-3.10-way"])
@pytest.mark.parametrize("how", ["-c", "-m"])
def test_helpers_import_nothing_from_the_folder_they_are_started_in(shared, safe_path_flag, how):
    from sampan.utils.imports import python_command

    marker = _plant(shared, "json")
    args = ("-c", "import json, sys; print(json.dumps(sys.argv[1:]))", "a b") if how == "-c" else \
        ("-m", "json.tool", "--compact")
    out = subprocess.run(python_command(*args, safe_path_flag=safe_path_flag), cwd=shared, input='{"x": [1]}',
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ('["a b"]' if how == "-c" else '{"x":[1]}')  # the arguments still reach it
    assert not marker.exists()


def test_the_recording_service_imports_nothing_from_the_folder_it_was_started_in(shared, tmp_path):
    from service_helpers import FIT, Sandbox

    marker = _plant(shared, "sampan")  # `-m sampan.experiments.service` imports sampan first
    script = tmp_path / "train.py"  # the learner's script lives elsewhere: its folder, not theirs, is on sys.path
    script.write_text(FIT)
    box = Sandbox(tmp_path / "store.db")
    try:
        out = subprocess.run([sys.executable, str(script)], cwd=shared, env=box.env(), capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        assert box.sockets(), "the fit did not go through a recording service of its own"
    finally:
        box.close()
    assert not marker.exists()
