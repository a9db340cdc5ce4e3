"""Background jobs: a separate process, its folder, its run; cancelled and killed jobs are marked."""
from __future__ import annotations

import os
import signal
import time

import psutil

import sampan.experiments as ex
from sampan.cli import main
from sampan.experiments.jobs import get_job, list_jobs


def _wait_for(pred, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_a_job_runs_the_notebook_with_its_parameters_and_keeps_its_outputs(sleeper, fresh_store, capsys):
    assert main(["job", "run", str(sleeper), "-p", "seconds=0.5"]) == 0
    job = list_jobs()[0]
    assert job.parameters == {"seconds": 0.5} and job.status == "running"
    job.wait(timeout=300)
    assert job.status == "finished", job.logs()
    assert job.output.is_file() and "seconds = 0.5" in job.output.read_text()
    assert "started" in job.logs()  # the cells' output streams into the log
    run = ex.client().get_run(job.run_id)
    assert run.info.status == "FINISHED" and run.data.params == {"seconds": "0.5"}
    assert run.data.tags["sampan.kind"] == "job" and run.data.tags["sampan.job"] == job.id
    capsys.readouterr()
    assert main(["job", "list"]) == 0
    assert f"{job.id}  finished" in capsys.readouterr().out
    assert main(["job", "logs", job.id]) == 0
    assert "started" in capsys.readouterr().out


def test_cancelled_and_killed_jobs_are_marked_not_left_running(sleeper, fresh_store, capsys):
    cancelled, killed = ex.submit(sleeper, {"seconds": 120}), ex.submit(sleeper)  # both run at once
    _wait_for(lambda: "started" in cancelled.logs() and "started" in killed.logs())
    # cancel: the job's process and its kernel (papermill started it in a session of its own) stop
    procs = [psutil.Process(cancelled.pid), *psutil.Process(cancelled.pid).children(recursive=True)]
    assert main(["job", "cancel", cancelled.id]) == 0
    assert f"job {cancelled.id}: cancelled" in capsys.readouterr().out
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in procs)
    assert get_job(cancelled.id).status == "cancelled"
    assert ex.client().get_run(cancelled.run_id).info.status == "KILLED"
    # killed from outside: the next look at the jobs marks it
    kernel = psutil.Process(killed.pid).children(recursive=True)
    os.kill(killed.pid, signal.SIGKILL)
    _wait_for(lambda: get_job(killed.id).status != "running", timeout=10)
    assert main(["job", "list"]) == 0
    out = capsys.readouterr().out
    assert f"{killed.id}  killed" in out and f"{cancelled.id}  cancelled" in out
    assert get_job(killed.id).error["ename"] == "Killed"
    assert ex.client().get_run(killed.run_id).info.status == "KILLED"
    for proc in kernel:  # the orphaned kernel notices its parent is gone (ipykernel's parent poller)
        proc.wait(timeout=30)


def test_job_refuses_a_parameter_the_notebook_does_not_define(sleeper, fresh_store, capsys):
    assert main(["job", "run", str(sleeper), "-p", "minutes=3"]) == 2
    err = capsys.readouterr().err
    assert "'minutes', which it does not define; it defines: seconds" in err
    assert "Expected every job parameter (-p)" in err and "HINT: set one of those names" in err
    assert "sweep" not in err
    assert list_jobs() == []


def test_unknown_job_id_lists_the_known_ones(fresh_store, capsys):
    assert main(["job", "logs", "nope"]) == 2
    assert "Expected `job_id` to be the id of one job" in capsys.readouterr().err


def test_job_refuses_a_kernel_that_is_not_installed(sleeper, fresh_store, capsys):
    assert main(["job", "run", str(sleeper), "--kernel", "no-such-kernel"]) == 2
    assert "Expected `kernel` to be an installed Jupyter kernel" in capsys.readouterr().err
    assert list_jobs() == []
