"""Background jobs: a notebook executed by papermill in a separate process that outlives the kernel.

Each job has a folder under ``$SAMPAN_DATA/jobs/<id>/`` with ``job.json`` (its state), ``log.txt``
(the cells' output) and ``output.ipynb`` (the executed notebook, written as it runs), and an MLflow
run (``sampan.kind = job``) whose fits are its child runs. A job whose process died without
finishing is marked ``killed`` the next time the jobs are listed, and so are the fits it left running.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import re
import subprocess
import sys
import time
import uuid
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from sampan.errors import SampanError, bad_argument
from sampan.experiments import store
from sampan.utils.imports import python_command

FINAL = ("finished", "failed", "killed", "cancelled")
STARTUP_GRACE = 60.0  # seconds a job may have no process yet (submit writes its state, then starts the process)
_ID = re.compile(r"[0-9A-Za-z-]+")
_MLFLOW_STATUS = {"starting": "RUNNING", "running": "RUNNING", "finished": "FINISHED", "failed": "FAILED",
                  "killed": "KILLED", "cancelled": "KILLED"}


def jobs_dir() -> Path:
    """``$SAMPAN_DATA/jobs`` (``~/.cache/sampan/jobs``)."""
    from sampan.utils.io import data_home

    return data_home() / "jobs"


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass
class Job:
    """One background job, as ``job.json`` describes it.

    Attributes:
        id: the job's id (its folder name).
        notebook: the notebook executed.
        parameters: values for its ``parameters`` cell.
        status: ``"starting"`` (no process yet), ``"running"``, ``"finished"``, ``"failed"``, ``"killed"`` or
            ``"cancelled"``.
        pid, started, ended: the process and its times (UTC).
        run_id: the job's MLflow run.
        error: ``{"ename", "evalue", "cell_index"}`` when it failed.

    Example:
        >>> job = submit("train.ipynb", {"epochs": 20})  # doctest: +SKIP
        >>> job.wait().status  # doctest: +SKIP
        'finished'
    """

    id: str
    notebook: str
    parameters: dict = field(default_factory=dict)
    status: str = "starting"
    pid: int | None = None
    pid_started: float | None = None
    started: str = ""
    ended: str | None = None
    run_id: str | None = None
    error: dict | None = None
    tracking_uri: str = ""
    kernel: str | None = None

    @property
    def folder(self) -> Path:
        return jobs_dir() / self.id

    @property
    def output(self) -> Path:
        """The executed notebook (partial while the job runs)."""
        return self.folder / "output.ipynb"

    @property
    def log_file(self) -> Path:
        return self.folder / "log.txt"

    def logs(self) -> str:
        """The job's output so far."""
        return self.log_file.read_text(encoding="utf-8", errors="replace") if self.log_file.exists() else ""

    def refresh(self) -> "Job":
        """Re-reads ``job.json``; a job whose process is gone becomes ``killed`` (one still starting is left be)."""
        self.__dict__.update(_read(self.folder).__dict__)
        if self.status not in FINAL and not self._starting() and not _alive(self.pid, self.pid_started):
            time.sleep(0.2)  # the process may have written its final state just now
            self.__dict__.update(_read(self.folder).__dict__)
            if self.status not in FINAL:
                self._end("killed", {"ename": "Killed", "evalue": "the job's process ended without finishing "
                                                                  "(killed, or the machine restarted)"})
        return self

    def _starting(self) -> bool:
        """Submitted under :data:`STARTUP_GRACE` seconds ago and no process recorded yet: not to be judged dead."""
        try:
            age = (_dt.datetime.now(_dt.timezone.utc) - _dt.datetime.fromisoformat(self.started)).total_seconds()
        except (TypeError, ValueError):
            return False
        return self.pid is None and age < STARTUP_GRACE

    def wait(self, timeout: float | None = None, poll: float = 0.5) -> "Job":
        """Waits until the job ends; raises ``TimeoutError`` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.refresh().status not in FINAL:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {self.id} still running after {timeout} s")
            time.sleep(poll)
        return self

    def cancel(self) -> "Job":
        """Stops the job's process (and its kernel) and marks it ``cancelled``."""
        if self.refresh().status in FINAL:
            return self
        _terminate_tree(self.pid, self.pid_started)
        self._end("cancelled", None)
        return self

    def _own_store(self) -> str:
        """The store the job's run is in: the one recorded when it was submitted, and only if it is this process's
        store too. ``job.json`` is a file: one planted in the jobs folder (a data folder copied from someone else)
        must not choose where a plain ``sampan job list`` writes (a SQLite file anywhere) or sends the learner's
        MLflow token (a server of its author's)."""
        current = store.tracking_uri()
        if (self.tracking_uri or current) != current:
            raise store.StoreError(
                f"job {self.id} recorded its run in the store {self.tracking_uri!r}, not the current one "
                f"({current!r}); it is left as it is there. HINT: set {store.TRACKING_ENV} to that store (if it is "
                "yours) and list the jobs again")
        if not isinstance(self.run_id, str) or not re.fullmatch(r"[0-9a-f]{32}", self.run_id):
            raise store.StoreError(f"job {self.id}: {self.run_id!r} is not an MLflow run id")
        return current

    def _end(self, status: str, error: dict | None) -> None:
        self.status, self.ended, self.error = status, _now(), error
        if self.run_id:  # the store first: whoever sees the final state file finds the run ended too
            try:
                client = store.client(self._own_store())
                if error:
                    client.set_tag(self.run_id, "sampan.error", f"{error.get('ename')}: {error.get('evalue')}")
                elif "sampan.error" in client.get_run(self.run_id).data.tags:  # a lister wrongly judged it killed
                    client.delete_tag(self.run_id, "sampan.error")
                client.set_terminated(self.run_id, status=_MLFLOW_STATUS[status])
                if status in ("killed", "cancelled"):
                    _end_children(client, self.run_id)
            except Exception as exc:  # the state file is the record that matters; say why the store was not told
                print(f"sampan job {self.id}: could not mark run {self.run_id} {status} in the store: "
                      f"{type(exc).__name__}: {exc}", file=sys.stderr)
        _write(self)


def _end_children(client: Any, run_id: str) -> None:
    """Marks ``KILLED`` the fits a stopped job left ``RUNNING`` (its kernel died before they could end them)."""
    where = f"tags.mlflow.parentRunId = {store.quoted(run_id)} and attributes.status = 'RUNNING'"
    experiments = [e.experiment_id for e in client.search_experiments()]
    for child in client.search_runs(experiments, where, max_results=1000):
        client.set_terminated(child.info.run_id, status="KILLED")


def _terminate_tree(pid: int | None, started: float | None) -> None:
    """SIGTERM to the job's process and its children (papermill's kernel has its own session), then SIGKILL."""
    import psutil

    if not _alive(pid, started):
        return
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return
    for proc in procs:
        try:
            proc.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(procs, timeout=5)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            pass


def _write(job: Job) -> None:
    from sampan.utils.io import atomic_write_json

    atomic_write_json(job.folder / "job.json", asdict(job))


def _read(folder: Path) -> Job:
    """The job in ``folder``; its id is the folder's name (a learner may have renamed the folder)."""
    data = json.loads((folder / "job.json").read_text(encoding="utf-8"))
    return Job(**{k: v for k, v in data.items() if k in Job.__dataclass_fields__ and k != "id"}, id=folder.name)


def running_count(states: Iterable[str]) -> int:
    """How many of these ``job.json`` texts are jobs with status ``running`` whose process lives (the hub's idle
    culler and a learner's server, :mod:`sampan.hub.busy`, count them without loading a job or MLflow)."""
    count = 0
    for text in states:
        try:
            job = json.loads(text)
        except ValueError:
            continue
        if isinstance(job, dict) and job.get("status") == "running" and _alive(job.get("pid"), job.get("pid_started")):
            count += 1
    return count


def _alive(pid: int | None, started: float | None) -> bool:
    import psutil

    if not pid or started is None:  # never a pid alone: job.json is a file, and any live pid would do
        return False
    try:
        proc = psutil.Process(pid)
        same = abs(proc.create_time() - float(started)) < 1.0
        return same and proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, TypeError, ValueError):
        return False


def submit(notebook: str | os.PathLike, parameters: dict[str, Any] | None = None, *,
           kernel: str | None = None) -> Job:
    """Starts a background job: ``notebook`` executed by papermill in its own process.

    Args:
        notebook: the ``.ipynb`` to run.
        parameters: values for its ``parameters`` cell (each must be defined there).
        kernel: the Jupyter kernel (default: the notebook's own).

    Returns:
        The :class:`Job`, already running; it goes on when this kernel or the lab server stops.

    Example:
        >>> job = submit("notebooks/01-beginner/first_model.ipynb", {"QUICK": True})  # doctest: +SKIP
        >>> print(job.wait().logs())  # doctest: +SKIP
    """
    from sampan.experiments.sweeps import check_kernel, check_notebook_file, check_notebook_space

    if parameters is not None and not isinstance(parameters, dict):
        raise ValueError(bad_argument("parameters", parameters, "a dict of parameter name -> value, or None",
                                      "write submit(notebook, {\"epochs\": 20, \"lr\": 0.01})"))
    parameters = dict(parameters or {})
    check_notebook_file(notebook)
    if parameters:
        check_notebook_space(notebook, parameters, "job")
    check_kernel(notebook, kernel)
    uri = store.check_writable()
    job = Job(id=f"{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}",
              notebook=str(Path(notebook).resolve()), parameters=parameters, started=_now(), tracking_uri=uri,
              kernel=kernel)
    job.folder.mkdir(parents=True, exist_ok=False)
    job.run_id = _start_run(job)
    _write(job)  # "starting": a lister does not judge it before the process is recorded below
    with open(job.log_file, "ab") as log:
        proc = subprocess.Popen(python_command("-c", _MAIN, str(job.folder)), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=str(Path(notebook).resolve().parent),
                                env={**os.environ, store.TRACKING_ENV: uri, "SAMPAN_PARENT_RUN": job.run_id,
                                     store.NOTEBOOK_ENV: job.notebook},
                                start_new_session=True)  # its own session: it survives the kernel and the lab server
    job.pid, job.status = proc.pid, "running"
    try:
        import psutil

        job.pid_started = psutil.Process(proc.pid).create_time()
    except Exception:
        pass
    _write(job)
    return job


def _start_run(job: Job) -> str:
    from mlflow.entities import Param

    client = store.client(job.tracking_uri)
    run = client.create_run(store.experiment_id(uri=job.tracking_uri), run_name=f"job-{job.id}",
                            tags={"sampan.kind": "job", "sampan.job": job.id, "sampan.source": job.notebook,
                                  "mlflow.source.name": job.notebook})
    if job.parameters:
        client.log_batch(run.info.run_id, params=[Param(k, str(v)) for k, v in job.parameters.items()])
    return run.info.run_id


def get_job(job_id: str) -> Job:
    """The job with this id (a unique prefix is enough)."""
    if not isinstance(job_id, str) or not _ID.fullmatch(job_id):
        raise SampanError(bad_argument("job_id", job_id, "a job id (or its start) of letters, digits and '-'",
                                       "copy it from `sampan job list`"))
    matches = [p for p in _job_folders() if p.name.startswith(job_id)]
    if len(matches) != 1:
        known = ", ".join(j.id for j in list_jobs()[:10]) or "none"
        raise SampanError(bad_argument("job_id", job_id, "the id of one job" + (" (the prefix is ambiguous)"
                                                                                if matches else ""),
                                       f"known jobs: {known}; see `sampan job list`"))
    return _read(matches[0]).refresh()


def list_jobs() -> list[Job]:
    """Every job, newest first, with dead ones marked ``killed``.

    Example:
        >>> [(j.id, j.status) for j in list_jobs()]  # doctest: +SKIP
    """
    jobs = []
    for folder in sorted(_job_folders(), reverse=True):
        try:
            jobs.append(_read(folder).refresh())
        except (OSError, ValueError, TypeError) as exc:  # a hand-edited or half-copied folder: the others still list
            warnings.warn(f"sampan job: skipped {folder}, whose job.json cannot be read ({type(exc).__name__}: "
                          f"{exc}); fix or remove that folder", RuntimeWarning, stacklevel=2)
    return jobs


def _job_folders() -> list[Path]:
    """The folders under :func:`jobs_dir` holding a ``job.json``."""
    home = jobs_dir()
    return [p for p in home.iterdir() if (p / "job.json").is_file()] if home.is_dir() else []


def _execute(folder: str) -> None:
    """The job process: runs the notebook, then writes the final state."""
    import logging

    from papermill.exceptions import PapermillExecutionError

    from sampan.utils.notebooks import execute_notebook

    handler = logging.StreamHandler(sys.stdout)  # the cells' output, as it comes, into log.txt
    handler.setFormatter(logging.Formatter("%(message)s"))
    logging.getLogger("papermill").addHandler(handler)
    logging.getLogger("papermill").setLevel(logging.INFO)
    job = _read(Path(folder))
    job.pid, job.status = os.getpid(), "running"  # its own final write below keeps them, whenever it read the state
    status, error = "finished", None
    try:
        # one notebook a job: a fork server would cost more than it saves (execute_notebook's `fork`)
        execute_notebook(job.notebook, str(job.output), parameters=job.parameters, log_output=True,
                         kernel_name=job.kernel, progress_bar=False, request_save_on_cell_execute=True,
                         start_timeout=120, fork=False)
    except PapermillExecutionError as exc:
        status, error = "failed", {"ename": exc.ename, "evalue": exc.evalue, "cell_index": exc.cell_index}
    except Exception as exc:
        status, error = "failed", {"ename": type(exc).__name__, "evalue": str(exc), "cell_index": None}
    from sampan.experiments.recorder import flush

    flush()
    job._end(status, error)


_MAIN = "import sys; from sampan.experiments.jobs import _execute; _execute(sys.argv[1])"
