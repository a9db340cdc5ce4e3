"""A kernel that dies before it answers (another process took one of its ports), or stays silent past the start
timeout, is started again; one that dies at every start is named after a few tries; a kernel that dies while a cell
runs is never started again."""
from __future__ import annotations

import json
import logging
import sys
import textwrap

import pytest

import sampan.path
from sampan.utils.notebooks import KERNEL_START_ATTEMPTS, KernelStartError, execute_notebook, with_kernel_restarts

# Dies (exit 1, as a kernel that lost its port to another process does) on its first DIES launches, then is a
# real ipykernel; with a negative DIES it stays silent (alive, never answering) on its first -DIES launches instead.
# Every launch appends its pid to LAUNCHES.
LAUNCHER = textwrap.dedent("""\
    import os, runpy, sys, time
    log, dies = sys.argv.pop(1), int(sys.argv.pop(1))
    with open(log, "a") as fh:
        fh.write(f"{os.getpid()}\\n")
    with open(log) as fh:
        if sum(1 for _ in fh) <= abs(dies):
            if dies < 0:
                time.sleep(600)
            sys.exit(1)
    sys.argv[0] = "ipykernel_launcher"
    runpy.run_module("ipykernel_launcher", run_name="__main__")
    """)


@pytest.fixture
def kernel_dying_at_start(tmp_path, monkeypatch):
    """``plant(dies)``: installs kernel 'dies-at-start' (in a JUPYTER_PATH of its own); returns its launch log."""
    def plant(dies: int):
        script, log = tmp_path / "launcher.py", tmp_path / "launches.txt"
        script.write_text(LAUNCHER)
        spec = tmp_path / "jupyter" / "kernels" / "dies-at-start"
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, str(script), str(log), str(dies), "-f", "{connection_file}"],
            "display_name": "dies at start", "language": "python"}))
        monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
        return log
    return plant


def launches(log) -> int:
    return len(log.read_text().splitlines())


def test_a_kernel_that_dies_once_while_starting_is_started_again_and_the_lesson_passes(
        planted, tmp_path, kernel_dying_at_start, caplog):
    log = kernel_dying_at_start(dies=1)
    planted.notebook("01-beginner/a.ipynb", "print(6 * 7)", kernel="dies-at-start")
    manifest = planted.manifest([{"id": "beginner", "lessons": [{"id": "a", "notebook": "01-beginner/a.ipynb"}]}])
    with caplog.at_level(logging.WARNING, logger="sampan.notebooks"):
        report = sampan.path.run(lesson="a", manifest=manifest, output_dir=tmp_path / "runs", progress=False)
    assert report.result("a").status == "passed", report.result("a").error
    assert launches(log) == 2
    assert "died while starting (try 1 of 3" in caplog.text


def test_a_kernel_silent_at_its_first_start_is_stopped_and_another_runs_the_notebook(tmp_path, kernel_dying_at_start,
                                                                                    caplog):
    import nbformat
    import psutil

    log = kernel_dying_at_start(dies=-1)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    nb.metadata["kernelspec"] = {"name": "dies-at-start", "display_name": "dies at start", "language": "python"}
    nbformat.write(nb, tmp_path / "in.ipynb")
    with caplog.at_level(logging.WARNING, logger="sampan.notebooks"):
        out = execute_notebook(str(tmp_path / "in.ipynb"), str(tmp_path / "out.ipynb"), kernel_name="dies-at-start",
                               progress_bar=False, start_timeout=5)
    assert out.cells[0].outputs[0]["text"] == "42\n"
    silent, _ = log.read_text().split()
    assert not psutil.pid_exists(int(silent)) or psutil.Process(int(silent)).status() == psutil.STATUS_ZOMBIE
    assert "did not answer while starting (try 1 of 3; Kernel didn't respond in 5 seconds" in caplog.text


def test_a_kernel_that_dies_at_every_start_is_named_after_the_tries(planted, tmp_path, kernel_dying_at_start):
    log = kernel_dying_at_start(dies=99)
    planted.notebook("01-beginner/a.ipynb", "print('never runs')", kernel="dies-at-start")
    manifest = planted.manifest([{"id": "beginner", "lessons": [{"id": "a", "notebook": "01-beginner/a.ipynb"}]}])
    report = sampan.path.run(lesson="a", manifest=manifest, output_dir=tmp_path / "runs", progress=False)
    result = report.result("a")
    assert result.status == "failed" and result.error["ename"] == "KernelStartError"
    assert f"died before it answered, {KERNEL_START_ATTEMPTS} times in a row" in result.error["evalue"]
    assert "HINT: `jupyter kernelspec list`" in result.error["evalue"]
    assert launches(log) == KERNEL_START_ATTEMPTS


def test_a_kernel_killed_in_a_cell_is_not_started_again(tmp_path, kernel_dying_at_start):
    import nbformat
    from nbclient.exceptions import DeadKernelError

    log = kernel_dying_at_start(dies=0)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "dies-at-start", "display_name": "dies at start", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")]
    nbformat.write(nb, tmp_path / "in.ipynb")
    with pytest.raises(DeadKernelError):
        execute_notebook(str(tmp_path / "in.ipynb"), str(tmp_path / "out.ipynb"), kernel_name="dies-at-start",
                         progress_bar=False)
    assert launches(log) == 1


@pytest.mark.parametrize("attempts", [0, -1, 1.5, True, "3"])
def test_attempts_that_is_not_a_positive_whole_number_is_refused(tmp_path, attempts):
    with pytest.raises(ValueError, match=r"Expected `attempts` to be a whole number of tries, at least 1\. "
                                         r"Received: attempts=.*HINT: pass attempts=1"):
        execute_notebook(str(tmp_path / "in.ipynb"), str(tmp_path / "out.ipynb"), attempts=attempts)


def test_another_runtime_error_is_raised_at_once(tmp_path):
    calls = []

    def run():
        calls.append(1)
        raise RuntimeError("something else")

    with pytest.raises(RuntimeError, match="something else") as info:
        with_kernel_restarts(run)
    assert len(calls) == 1 and not isinstance(info.value, KernelStartError)
