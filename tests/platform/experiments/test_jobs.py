"""Background jobs: a separate process, its folder, its run; cancelled and killed jobs are marked."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
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


def test_a_job_listed_while_it_starts_is_not_judged_killed(sleeper, fresh_store, monkeypatch):
    import sampan.experiments.jobs as jobs

    seen, popen = [], jobs.subprocess.Popen

    def slow_start(*args, **kw):  # a busy machine: someone lists the jobs before the process exists
        seen.extend(j.status for j in list_jobs())
        return popen(*args, **kw)

    monkeypatch.setattr(jobs.subprocess, "Popen", slow_start)
    job = ex.submit(sleeper, {"seconds": 0.1})
    assert seen == ["starting"]
    assert job.wait(timeout=300).status == "finished" and job.error is None, job.logs()
    run = ex.client().get_run(job.run_id)
    assert run.info.status == "FINISHED" and "sampan.error" not in run.data.tags
    # a job with no process long after it was submitted (its submitter died) is killed, not "starting" forever
    stale = jobs.Job(id="20200101-000000-aaaaaa", notebook=str(sleeper), started="2020-01-01T00:00:00+00:00")
    stale.folder.mkdir(parents=True)
    jobs._write(stale)
    assert get_job("20200101").status == "killed"


def test_a_job_that_ends_finished_drops_an_error_a_lister_gave_it(fresh_store):
    import sampan.experiments.jobs as jobs

    job = jobs.Job(id="20200101-000000-bbbbbb", notebook="x.ipynb", run_id=ex.client().create_run(
        ex.store.experiment_id()).info.run_id)
    job.folder.mkdir(parents=True)
    job._end("killed", {"ename": "Killed", "evalue": "gone"})
    assert ex.client().get_run(job.run_id).data.tags["sampan.error"] == "Killed: gone"
    job._end("finished", None)
    run = ex.client().get_run(job.run_id)
    assert run.info.status == "FINISHED" and "sampan.error" not in run.data.tags


def test_a_stopped_job_marks_the_fits_it_left_running_killed(fresh_store):
    import sampan.experiments.jobs as jobs

    client = ex.client()
    job = jobs.Job(id="20200101-000000-cccccc", notebook="x.ipynb",
                   run_id=client.create_run(ex.store.experiment_id()).info.run_id)
    job.folder.mkdir(parents=True)
    parent = {"mlflow.parentRunId": job.run_id}
    running = [client.create_run(ex.store.experiment_id(name), tags=parent).info.run_id
               for name in (None, "another-experiment-of-the-notebook")]
    done = client.create_run(ex.store.experiment_id(), tags=parent).info.run_id
    client.set_terminated(done, "FINISHED")
    other = client.create_run(ex.store.experiment_id()).info.run_id  # not the job's
    job._end("cancelled", None)
    assert [client.get_run(r).info.status for r in running] == ["KILLED", "KILLED"]
    assert (client.get_run(done).info.status, client.get_run(other).info.status) == ("FINISHED", "RUNNING")


def test_job_folders_are_found_by_name_and_a_bad_one_is_skipped(fresh_store, data_home, capsys):
    import pytest

    import sampan.experiments.jobs as jobs

    for name in ("20200101-000000-dddddd", "20200102-000000-eeeeee"):
        job = jobs.Job(id=name, notebook="x.ipynb", status="finished", started="2020-01-01T00:00:00+00:00")
        job.folder.mkdir(parents=True)
        jobs._write(job)
    (jobs.jobs_dir() / "20200102-000000-eeeeee").rename(jobs.jobs_dir() / "20200102-000000-eeeeee-keep")
    (jobs.jobs_dir() / "20200103-broken").mkdir()
    (jobs.jobs_dir() / "20200103-broken" / "job.json").write_text("{not json")
    with pytest.warns(RuntimeWarning, match=r"skipped .*20200103-broken, whose job.json cannot be read"):
        assert [j.id for j in list_jobs()] == ["20200102-000000-eeeeee-keep", "20200101-000000-dddddd"]
    assert get_job("20200102").folder.name == "20200102-000000-eeeeee-keep"
    (data_home / "other").mkdir()
    jobs._write(jobs.Job(id="../other", notebook="evil.ipynb"))  # a job.json outside the jobs folder
    for bad in ("../other", "2020*", "", "2020?1"):
        assert main(["job", "logs", bad]) == 2
        assert f"Expected `job_id` to be a job id (or its start) of letters, digits and '-'. Received: " \
               f"job_id={bad!r}" in capsys.readouterr().err


def test_listing_jobs_and_reading_the_store_import_no_torch():
    """`sampan job list` / `logs` / `cancel` and a look at the store start in a fraction of a second: the recorder
    (which imports the callbacks, and so torch) loads only when a fit or a recorder name needs it."""
    code = ("import sys\nimport sampan.experiments as ex\nfrom sampan.experiments.jobs import list_jobs\n"
            "list_jobs(); ex.tracking_uri()\nbefore = 'torch' in sys.modules\nex.is_enabled()\n"
            "print(before, 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]  # no torch until a recorder name is used
