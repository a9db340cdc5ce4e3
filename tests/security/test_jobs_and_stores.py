"""What a planted ``job.json`` or a shared experiments store can make Sampan do: nothing to another process, no
store of its author's choosing, no checkpoint sent to its author.

A job's folder (``$SAMPAN_DATA/jobs/<id>/job.json``) is a file: a data folder copied from someone else can bring
one. ``sampan job list`` and ``cancel`` act on its pid (only with the start time that pid's process had) and end
its run in the current store only. A store (``mlflow.db``) from someone else can name any place for its
experiment's artifacts; Sampan records nothing into such an experiment.
"""
from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
import time

import psutil
import pytest

import sampan.experiments.jobs as jobs
from sampan.experiments import store

RUN_ID = "0123456789abcdef0123456789abcdef"


def _plant(data_home, job_id: str, **state) -> None:
    folder = data_home / "jobs" / job_id
    folder.mkdir(parents=True)
    (folder / "job.json").write_text(json.dumps({"id": job_id, "notebook": "x.ipynb", "status": "running",
                                                 "started": "2026-01-01T00:00:00+00:00", **state}))


@pytest.fixture
def victim():
    """A process of the learner's (their Jupyter server, say)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def listener():
    """A server of the attacker's: records every request and its Authorization header."""
    got = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_PUT(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            got.append((self.command, self.path, self.headers.get("Authorization")))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"{}")

        do_POST = do_GET = do_PUT

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", got
    server.shutdown()
    server.server_close()


def test_a_planted_job_without_its_processes_start_time_kills_nothing(data_home, victim):
    _plant(data_home, "20260101-000000-aaaaaa", pid=victim.pid, pid_started=None)
    listed = {j.id: j.status for j in jobs.list_jobs()}
    assert listed == {"20260101-000000-aaaaaa": "killed"}  # names no process: not running, never signalled
    _plant(data_home, "20260101-000000-bbbbbb", pid=victim.pid)  # no pid_started at all
    jobs.get_job("20260101-000000-bbbbbb").cancel()
    time.sleep(0.5)
    assert victim.poll() is None and psutil.Process(victim.pid).is_running(), "the learner's process was killed"
    # the job's own process, named with its start time, is still found (what `cancel` is for)
    started = psutil.Process(victim.pid).create_time()
    _plant(data_home, "20260101-000000-cccccc", pid=victim.pid, pid_started=started)
    assert jobs.get_job("20260101-000000-cccccc").status == "running"


def test_a_planted_job_cannot_choose_the_store_a_listing_writes_to(data_home, tmp_path, listener, monkeypatch,
                                                                    capsys):
    url, got = listener
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "class-secret-token")
    outside = tmp_path / "outside" / "new" / "planted.db"
    _plant(data_home, "20260101-000000-dddddd", pid=None, run_id=RUN_ID, tracking_uri=f"sqlite:///{outside}")
    _plant(data_home, "20260101-000000-eeeeee", pid=None, run_id=RUN_ID, tracking_uri=url)
    assert {j.status for j in jobs.list_jobs()} == {"killed"}  # judged as before; only the store is left alone
    assert not (tmp_path / "outside").exists(), "a listing created a store where job.json said"
    assert got == [], f"a listing sent {got} to the job file's server"
    err = capsys.readouterr().err
    assert "recorded its run in the store" in err and "HINT: set SAMPAN_TRACKING_URI to that store" in err


def test_a_shared_store_cannot_send_the_learners_checkpoints_elsewhere(tmp_path, listener, monkeypatch):
    import torch

    import sampan
    from sampan.callbacks import ModelCheckpoint
    from sampan.experiments import flush

    url, got = listener
    db = tmp_path / "shared" / "mlflow.db"
    db.parent.mkdir()
    uri = f"sqlite:///{db}"
    store.client(uri).create_experiment("sampan", artifact_location=f"{url}/steal")  # the author's store
    monkeypatch.setenv("SAMPAN_TRACKING_URI", uri)
    monkeypatch.setenv("SAMPAN_EXPERIMENT", "sampan")
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "class-secret-token")
    monkeypatch.setenv("SAMPAN_RECORDER_SERVICE", "0")  # written in this process: its warning is seen here
    with pytest.raises(store.StoreError, match=r"(?s)keeps its artifacts at 'http://127\.0\.0\.1:\d+/steal', "
                                               r"outside the store's folder.*HINT: record into a store of your own"):
        store.experiment_id()
    net = torch.nn.Linear(8, 2)
    model = sampan.Model(net)
    model.prepare(torch.optim.SGD(net.parameters(), lr=0.1), torch.nn.CrossEntropyLoss())
    data = torch.utils.data.TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,)))
    with pytest.warns(RuntimeWarning, match="could not write to the store .*keeps its artifacts at"):
        model.fit(data, epochs=1, batch_size=8, verbose=0, callbacks=[ModelCheckpoint(save_dir=tmp_path / "ckpt")])
        flush()
    assert got == [], f"the author's server received {got}"
    assert list((tmp_path / "ckpt").iterdir())  # the fit itself went on: its checkpoints are on disk
    # a store's own experiments (artifacts beside the database) are used as before
    assert store.experiment_id("mine", uri) == store.client(uri).get_experiment_by_name("mine").experiment_id
