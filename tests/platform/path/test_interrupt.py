"""Ctrl-C during ``sampan path run``: the report says which lesson was interrupted, the lesson's kernel is shut
down, and the command ends with exit code 130 and one line instead of a traceback."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import psutil
import pytest

import sampan.path
from sampan.cli import main
from sampan.path import runner
from sampan.path._interrupt import kernels_stopped_on_interrupt


@pytest.fixture
def ctrl_c_as_in_a_terminal():
    """Ctrl-C as a terminal gives it: Python's own handler here, and so the default in a child process. The worker
    may have had SIGINT ignored by something before (once, in fresh-ci), and a child inherits an ignored SIGINT."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def two_lessons(planted):
    planted.notebook("01-beginner/a.ipynb", "x = 1")
    planted.notebook("01-beginner/b.ipynb", "y = 2")
    return planted.manifest([{"id": "beginner", "lessons": [
        {"id": "a", "notebook": "01-beginner/a.ipynb"}, {"id": "b", "notebook": "01-beginner/b.ipynb"}]}])


def _ctrl_c(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize("lang, current, later", [
    ("en", "interrupted", "not run: the run was interrupted before this lesson"),
    ("zh", "已中断", "未运行：本次运行在这节课之前被中断")])
def test_an_interrupted_run_writes_a_report_naming_the_interrupted_lesson(two_lessons, tmp_path, monkeypatch,
                                                                          lang, current, later):
    monkeypatch.setattr(runner, "_execute", _ctrl_c)
    with pytest.raises(sampan.path.RunInterrupted) as info:
        sampan.path.run(manifest=two_lessons, output_dir=tmp_path / "runs", progress=False, lang=lang)
    assert isinstance(info.value, KeyboardInterrupt)  # a notebook's interrupt still stops the cell
    report = json.loads(info.value.report.json_path.read_text(encoding="utf-8"))
    assert report["interrupted"] is True and report["finished"]
    assert [(x["lesson"], x["status"], x["reason"]) for x in report["lessons"]] == [
        ("a", "not_run", current), ("b", "not_run", later)]
    page = info.value.report.html_path.read_text(encoding="utf-8")
    assert 'id="interrupted"' in page and current in page


def test_the_cli_says_interrupted_with_the_report_and_exits_130(two_lessons, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runner, "_execute", _ctrl_c)
    assert main(["path", "run", "--manifest", str(two_lessons), "--output", str(tmp_path / "runs")]) == 130
    err = capsys.readouterr().err
    [run_dir] = (tmp_path / "runs").iterdir()
    assert f"sampan path: interrupted; report: {run_dir / 'report.html'}" in err and "Traceback" not in err


def test_the_kernel_started_before_ctrl_c_is_ended(tmp_path, ctrl_c_as_in_a_terminal):
    """A process started in a session of its own (as jupyter_client starts kernels) inside the guard is ended."""
    with pytest.raises(KeyboardInterrupt):
        with kernels_stopped_on_interrupt():
            kernel = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
            os.kill(os.getpid(), signal.SIGINT)  # what the terminal sends on Ctrl-C
            kernel.wait()  # interrupted by the guard, which ends the process (and reaps it)
    assert not psutil.pid_exists(kernel.pid)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the usual Ctrl-C again


def test_ctrl_c_in_a_real_run_ends_with_one_line_and_no_kernel_left(planted, tmp_path, ctrl_c_as_in_a_terminal):
    started = tmp_path / "started"
    planted.notebook("01-beginner/slow.ipynb", f"open({str(started)!r}, 'w').close()\nimport time\ntime.sleep(600)")
    manifest = planted.manifest([{"id": "beginner", "lessons": [{"id": "slow", "notebook": "01-beginner/slow.ipynb"}]}])
    proc = subprocess.Popen([sys.executable, "-m", "sampan", "path", "run", "--manifest", str(manifest),
                             "--output", str(tmp_path / "runs"), "--lang", "en"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while not started.exists():  # the lesson's cell is running in its kernel
            assert proc.poll() is None, proc.communicate()
            psutil.wait_procs([psutil.Process(proc.pid)], timeout=0.2)
        kernels = psutil.Process(proc.pid).children(recursive=True)
        assert kernels
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "sampan path: interrupted; report: " in err and "Traceback" not in err, err
    assert not [k for k in kernels if k.is_running() and k.status() != psutil.STATUS_ZOMBIE]
    report = sampan.path.load_report(next((tmp_path / "runs").iterdir()))
    assert report["interrupted"] and report["lessons"][0]["reason"] == "interrupted"
