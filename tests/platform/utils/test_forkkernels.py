"""Kernels forked from the fork server (``SAMPAN_FORK_KERNELS=1``, sampan.utils.forkkernels) behave as kernels started
as new interpreters: same folder, environment, thread count, plots; their own random draws; interrupts, exit codes
and the end of the process that started them reach them. A kernel command that cannot be forked starts as usual."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest

from sampan.utils import forkkernels
from sampan.utils.notebooks import execute_notebook

# the first cell imports nothing (a cell that names the plotting library makes the sampan kernel load a font first)
FIRST = 'import sys\npreloaded = "torch" in sys.modules  # a new interpreter has not loaded torch yet'
PROBE = """\
import json, os
import matplotlib.pyplot as plt
import numpy as np
import torch
plt.plot([0, 1], [1, 0]); plt.show()
print(json.dumps({"preloaded": preloaded, "cwd": os.getcwd(), "mark": os.environ.get("SAMPAN_TEST_MARK"),
                  "threads": torch.get_num_threads(), "pid": os.getpid(), "ppid": os.getppid(),
                  "argv0": os.path.basename(sys.argv[0]), "numpy": np.random.rand(), "torch": torch.rand(1).item(),
                  "backend": plt.get_backend(), "hash": hash("sampan")}))
"""


def probe_notebook(path: Path, kernel: str = "sampan") -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": kernel, "display_name": kernel, "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(FIRST), nbformat.v4.new_code_cell(PROBE)]
    nbformat.write(nb, path)
    return path


def run_probe(tmp_path: Path, name: str, kernel: str = "sampan", **kwargs) -> tuple[dict, list]:
    source = probe_notebook(tmp_path / "probe.ipynb", kernel)
    out = tmp_path / f"{name}.ipynb"
    workdir = tmp_path / name
    workdir.mkdir()
    execute_notebook(str(source), str(out), kernel_name=kernel, cwd=str(workdir), progress_bar=False, **kwargs)
    outputs = nbformat.read(out, as_version=4).cells[1].outputs
    text = "".join(o.get("text", "") for o in outputs if o.get("name") == "stdout")
    return json.loads(text.strip().splitlines()[-1]), outputs


def gone(pid: int) -> bool:
    """The process has ended (a zombie counts: it has exited, only its parent has not collected it yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


def wait_until(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def test_a_forked_kernel_runs_a_notebook_as_a_new_interpreter_does(tmp_path, monkeypatch):
    monkeypatch.setenv("SAMPAN_TEST_MARK", "from-the-test")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.setenv(forkkernels.FORK_KERNELS_ENV, "1")
    monkeypatch.setenv("PYTHONHASHSEED", "123")  # as seed_everything(123) leaves it for the kernels started next
    first, outputs = run_probe(tmp_path, "forked-1")
    second, _ = run_probe(tmp_path, "forked-2")
    monkeypatch.setenv("PYTHONHASHSEED", "7")
    other_seed, _ = run_probe(tmp_path, "forked-seed-7")
    monkeypatch.setenv("PYTHONHASHSEED", "123")
    monkeypatch.delenv(forkkernels.FORK_KERNELS_ENV)
    fresh, fresh_outputs = run_probe(tmp_path, "fresh")

    assert first["preloaded"] and second["preloaded"] and not fresh["preloaded"]
    assert first["ppid"] == second["ppid"] != os.getpid()  # both forked by this process's server for seed 123
    # strings hash as in a new interpreter with the kernel's PYTHONHASHSEED: one server per seed
    assert first["hash"] == second["hash"] == fresh["hash"]
    assert other_seed["preloaded"] and other_seed["ppid"] not in (first["ppid"], os.getpid())
    seven = subprocess.run([sys.executable, "-c", "print(hash('sampan'))"], capture_output=True, text=True,
                           env={**os.environ, "PYTHONHASHSEED": "7"}, check=True).stdout
    assert other_seed["hash"] == int(seven) != first["hash"]
    assert fresh["ppid"] == os.getpid()
    for run, name in ((first, "forked-1"), (second, "forked-2"), (fresh, "fresh")):
        assert Path(run["cwd"]).resolve() == (tmp_path / name).resolve()
        assert run["mark"] == "from-the-test" and run["threads"] == 2
        assert run["argv0"] == fresh["argv0"] == "ipykernel_launcher.py"
        assert run["backend"] == fresh["backend"] == "module://matplotlib_inline.backend_inline"
    # each kernel draws its own random numbers, as new interpreters do (the server's state is not shared)
    assert first["numpy"] != second["numpy"] and first["torch"] != second["torch"]
    for outs in (outputs, fresh_outputs):
        assert any("image/png" in o.get("data", {}) for o in outs)


def test_fork_false_starts_a_new_interpreter_though_the_switch_is_on(tmp_path, monkeypatch):
    """A process that runs one notebook (a job, a one-trial sweep worker, a one-lesson path run) passes fork=False:
    no fork server is started for that one kernel."""
    monkeypatch.setenv(forkkernels.FORK_KERNELS_ENV, "1")
    monkeypatch.setenv("PYTHONHASHSEED", "4242")  # a seed no other test's server has: none runs for it yet
    run, _ = run_probe(tmp_path, "not-forked", fork=False)
    assert not run["preloaded"] and run["ppid"] == os.getpid()
    assert "4242" not in forkkernels._CLIENTS  # and no server was started for it
    with pytest.raises(ValueError, match=r"Expected `fork` to be True or False.*Received: fork='no'"):
        execute_notebook("any.ipynb", str(tmp_path / "out.ipynb"), fork="no")


def test_an_interrupt_reaches_a_forked_kernel_and_shutdown_ends_it(monkeypatch):
    manager_class = forkkernels.ForkServerKernelManager

    async def scenario():
        km = manager_class(kernel_name="sampan")
        await km.start_kernel()
        kc = km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=60)
            process = km.provisioner.process
            assert isinstance(process, forkkernels.ForkedKernel)
            with pytest.raises(subprocess.TimeoutExpired):
                process.wait(timeout=0.1)
            msg_id = kc.execute("import time\nprint('running', flush=True)\nfor _ in range(600):\n    time.sleep(0.1)")
            while True:  # the kernel ignores an interrupt between cells: wait until the cell runs
                msg = await kc.get_iopub_msg(timeout=60)
                if msg["msg_type"] == "stream" and "running" in msg["content"]["text"]:
                    break
            await km.interrupt_kernel()
            while True:
                reply = await kc.get_shell_msg(timeout=30)
                if reply["parent_header"].get("msg_id") == msg_id:
                    break
            assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"
            # the kernel still runs cells; one sent in the instant after the error can come back "aborted" (ipykernel
            # drops what reaches it while it clears its queue after an error: stop_on_error), so ask again then
            for _ in range(20):
                status = (await kc.execute_interactive("x = 6 * 7", timeout=30))["content"]["status"]
                if status != "aborted":
                    break
                await asyncio.sleep(0.25)
            assert status == "ok"
        finally:
            kc.stop_channels()
            await km.shutdown_kernel()
        return process

    process = asyncio.run(scenario())
    assert process.poll() is not None and gone(process.pid)


def test_exit_codes_come_back_as_popen_gives_them(tmp_path):
    # an option ipykernel does not know: it prints its usage and exits with 2, forked or not
    cmd = [sys.executable, "-m", "ipykernel_launcher", "--no-such-option", "-f", str(tmp_path / "bad.json")]
    fresh = subprocess.run(cmd, capture_output=True, timeout=120, cwd=tmp_path)
    assert fresh.returncode == 2
    assert forkkernels.launch(cmd, cwd=str(tmp_path), stderr=subprocess.DEVNULL).wait(timeout=60) == 2
    alive = forkkernels.launch([sys.executable, "-m", "ipykernel_launcher", "-f", str(tmp_path / "kernel.json")],
                               cwd=str(tmp_path))
    assert wait_until(lambda: (tmp_path / "kernel.json").is_file(), 60)
    assert alive.poll() is None
    alive.kill()
    assert alive.wait(timeout=30) == -9
    alive.kill()  # a kernel that has ended is not signalled again (its pid may belong to another process by now)


def test_a_forked_kernel_ends_when_the_process_that_started_it_ends(tmp_path):
    conn = tmp_path / "kernel.json"
    script = textwrap.dedent(f"""\
        import os, sys, time
        from pathlib import Path
        from sampan.utils.forkkernels import launch
        kernel = launch([sys.executable, "-m", "ipykernel_launcher", "-f", {str(conn)!r}], cwd={str(tmp_path)!r})
        while not Path({str(conn)!r}).is_file():
            time.sleep(0.1)
        time.sleep(1)  # the kernel has started watching its parent
        print(kernel.pid, flush=True)
        os._exit(0)  # no shutdown: the kernel is left to notice on its own
        """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.split()[-1])
    assert wait_until(lambda: gone(pid), 30), f"kernel {pid} outlived the process that started it"


def test_a_kernel_command_that_cannot_be_forked_starts_as_a_new_interpreter(tmp_path, monkeypatch, caplog):
    spec = tmp_path / "jupyter" / "kernels" / "flagged"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-X", "utf8", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "flagged", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv(forkkernels.FORK_KERNELS_ENV, "1")
    with caplog.at_level(logging.INFO, logger="sampan.forkkernels"):
        run, _ = run_probe(tmp_path, "flagged", kernel="flagged")
    assert not run["preloaded"] and run["ppid"] == os.getpid()
    assert "not forked: its command is not `<python> -m ipykernel_launcher ...`" in caplog.text


@pytest.mark.parametrize("cmd, why", [
    (["python3", "-c", "print(1)"], "its command is not"),
    (["/nonexistent/python", "-m", "ipykernel_launcher", "-f", "k.json"], "it runs another Python"),
])
def test_a_command_the_server_cannot_fork_is_refused_with_the_reason(cmd, why):
    assert why in forkkernels.why_not_forked(cmd)
    with pytest.raises(ValueError, match=r"Expected a kernel command `<this Python> -m ipykernel_launcher \.\.\.`\. "
                                         r"Received: cmd=.*HINT: start it with jupyter_client's launch_kernel"):
        forkkernels.launch(cmd)


@pytest.mark.parametrize("value, on", [("1", True), ("true", True), ("On", True), ("", False), ("0", False),
                                       ("no", False)])
def test_the_switch(value, on):
    assert forkkernels.enabled({forkkernels.FORK_KERNELS_ENV: value}) is on


def test_a_forked_kernel_reads_its_own_time_zone_and_locale(monkeypatch):
    # the time module read TZ when the server imported it; the child must read the kernel's
    monkeypatch.setenv("TZ", "SPN-8")  # a POSIX rule: 8 hours east of UTC, no zone files needed
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    import locale

    ctype = locale.setlocale(locale.LC_CTYPE)  # this process's, put back below (other tests write files with it)
    locale.setlocale(locale.LC_CTYPE, "C")  # what the server may hold; the kernel's environment says UTF-8
    try:
        forkkernels._fresh_process_state()
        assert time.tzname[0] == "SPN" and time.timezone == -8 * 3600
        assert locale.setlocale(locale.LC_CTYPE).lower().replace("-", "") == "c.utf8"
    finally:
        monkeypatch.undo()
        time.tzset()
        locale.setlocale(locale.LC_CTYPE, ctype)


def test_a_zombie_kernel_counts_as_ended_and_is_collected_when_it_is_our_child():
    # a kernel orphaned by its server is re-parented to a subreaper (us, here): dead, it stays a zombie, which
    # os.kill(pid, 0) still finds
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
    assert wait_until(lambda: zombie(child.pid), 30)
    kernel = forkkernels.ForkedKernel(child.pid, None)
    assert kernel.poll() == 3 and kernel.wait(timeout=1) == 3
    assert not Path(f"/proc/{child.pid}").exists()  # collected
    child.returncode = 3  # Popen must not wait for a pid that is gone


def test_a_zombie_that_is_not_our_child_counts_as_ended():
    # a zombie whose parent never collects it (a subreaper that does not know it): os.kill(pid, 0) still finds it
    script = ("import os, subprocess, sys, time\n"
              "child = subprocess.Popen([sys.executable, '-c', 'pass'])\n"
              "print(child.pid, flush=True)\n"
              "time.sleep(30)")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(parent.stdout.readline())
        assert wait_until(lambda: zombie(pid), 30)
        kernel = forkkernels.ForkedKernel(pid, None)
        assert kernel.poll() == -9 and Path(f"/proc/{pid}").exists()
    finally:
        parent.kill()
        parent.wait()
    alive = forkkernels.ForkedKernel(os.getpid(), None)
    assert alive.poll() is None


def test_a_hash_seed_no_interpreter_accepts_is_refused_by_name_and_a_dead_server_is_said(monkeypatch):
    """seed_everything(-1) once wrote PYTHONHASHSEED=-1: the fork server started with it died at its start, and
    every later kernel start failed with a bare ConnectionResetError."""
    import sampan

    monkeypatch.delenv("PYTHONHASHSEED", raising=False)  # put back after the test: seed_everything sets it
    cmd = [sys.executable, "-m", "ipykernel_launcher", "-f", "k.json"]
    for value in ("-1", "4294967296", "abc"):
        with pytest.raises(ValueError, match=r"Expected `PYTHONHASHSEED` to be 'random' or an int from 0 to "
                                             rf"4294967295. Received: PYTHONHASHSEED='{value}'"):
            forkkernels.launch(cmd, env={"PYTHONHASHSEED": value})
    sampan.seed_everything(-1)
    assert os.environ["PYTHONHASHSEED"] == "4294967295"  # what Python accepts there, as numpy's seed is taken
    sampan.seed_everything(2**32 + 5)
    assert os.environ["PYTHONHASHSEED"] == "5"
    dead = forkkernels._Client("4294967296")  # a server whose interpreter refuses to start
    dead.process.wait(timeout=60)
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        with pytest.raises(RuntimeError, match=r"could not start the kernel: it ended \(exit code 1\)\. HINT"):
            dead.start(cmd, {}, os.getcwd(), (devnull, devnull, devnull))
    finally:
        os.close(devnull)
        dead.close()
