"""The recording service: a fitting process sends its writes to one shared process instead of importing MLflow;
the store gets the same runs, and without the service a process writes itself."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import psutil
import pytest
from service_helpers import Sandbox, run_of

from sampan.experiments import service


@pytest.fixture
def sandbox(tmp_path):
    box = Sandbox(tmp_path / "mlflow.db")
    yield box
    box.close()


def _check_full_run(uri: str, run_id: str) -> None:
    client, run = run_of(uri, run_id)
    assert run.info.status == "FINISHED"
    assert [m.step for m in client.get_metric_history(run_id, "loss")] == [1, 2, 3]
    assert run.data.params["epochs"] == "3" and run.data.tags["sampan.kind"] == "fit"
    assert run.data.params["optimizer.betas"] == "(0.9, 0.999)"  # as MLflow keeps a tuple, whoever wrote it


def test_fits_record_through_one_shared_service(sandbox, monkeypatch):
    first, second = sandbox.fit(), sandbox.fit()
    assert len(sandbox.sockets()) == 1  # one service served both fits (it stays 30 s idle: $SAMPAN_RECORDER_IDLE)
    pid = _ping(sandbox, monkeypatch)
    assert os.getsid(pid) == pid  # a session of its own, child of no fitting process: stopping a job's or a
    assert psutil.Process(pid).ppid() != os.getpid()  # kernel's process tree leaves it be
    assert first["mlflow"] is False and second["mlflow"] is False  # the 3-4 CPU-seconds not paid
    for out in (first, second):
        _check_full_run(sandbox.uri, out["run_id"])
    # (the sandbox's teardown removes the socket's folder: the service sees its socket gone and leaves at once)


def test_an_idle_service_leaves_and_takes_its_socket_with_it(sandbox):
    """The service as a fitting process starts it (``python -m sampan.experiments.service``, returning once it
    listens), with $SAMPAN_RECORDER_IDLE at 2 seconds; nobody writes to it."""
    sandbox.folder().mkdir(mode=0o700)
    path = sandbox.folder() / "idle.sock"
    started = subprocess.run([sys.executable, "-m", "sampan.experiments.service", str(path)],
                             env=sandbox.env(SAMPAN_RECORDER_IDLE="2"), timeout=120)
    assert started.returncode == 0  # it listened (the launcher returns 0 only then)
    deadline = time.time() + 120
    while path.exists():
        assert time.time() < deadline, "the service did not leave when idle"
        time.sleep(0.2)


def test_when_the_service_dies_mid_fit_the_process_writes_the_rest_itself(sandbox):
    """(A service that dies while a new one may start is simply started again by the next write.)"""
    out = sandbox.fit(KILL_SERVICE="1")
    assert out["mlflow"] is True  # it fell back to writing in-process after the service died
    _check_full_run(sandbox.uri, out["run_id"])  # nothing lost: epochs 2 and 3 too, and the end
    client, run = run_of(sandbox.uri, out["run_id"])
    assert len(client.search_runs([run.info.experiment_id])) == 1  # the run the service began, not a second one


def test_switched_off_the_process_writes_itself(sandbox):
    out = sandbox.fit(SAMPAN_RECORDER_SERVICE="0")
    assert out["mlflow"] is True and not sandbox.sockets()
    _check_full_run(sandbox.uri, out["run_id"])


def test_only_local_sqlite_stores_go_through_the_service(monkeypatch, tmp_path):
    with pytest.raises(service.Unavailable, match="not a local SQLite store"):
        service.call("ping", uri="http://tracking.example:5000")
    with pytest.raises(service.Unavailable, match="relative SQLite path"):  # the service's folder is not ours
        service.call("ping", uri="sqlite:///mlflow.db")
    monkeypatch.setenv(service.SWITCH_ENV, "off")
    with pytest.raises(service.Unavailable, match="switched off"):
        service.call("ping", uri=f"sqlite:///{tmp_path.as_posix()}/x.db")


def _ping(sandbox: Sandbox, monkeypatch) -> int:
    """The pid of the sandbox's service (this process asks it, with the sandbox's TMPDIR)."""
    monkeypatch.setenv("TMPDIR", str(sandbox.tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads $TMPDIR again
    return service.call("ping", uri=sandbox.uri)["pid"]
