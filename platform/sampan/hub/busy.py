"""A learner's server tells the hub it is working while a kernel is busy or a ``sampan job`` runs.

A training cell can send nothing for many minutes, and jupyter_server counts only a kernel's messages as activity:
the hub would see the server idle and the idle culler would stop it in the middle of the training. This
jupyter_server extension (``sampan.hub.busy``; ``sampan hub``'s spawner and the Kubernetes images enable it) sets the
server's ``sampan_busy_last_activity`` setting every few seconds while a kernel is busy or one of the learner's jobs
runs. jupyter_server counts every setting whose name ends in ``_last_activity``, and jupyterhub-singleuser reports
the result to the hub with the server's own token (scope ``users:activity!user``).

So the culler decides from the hub's records alone. It never sends its token to a learner's server: the learner
controls that process, and a token that opens every server (``access:servers``) would let them into the teacher's.
This module imports no torch; jobs are counted by :func:`sampan.experiments.jobs.running_count`, as in the culler's
hook (``deploy/idle_culler_config.py``).

Example:
    jupyterhub-singleuser --ServerApp.jpserver_extensions=sampan.hub.busy=True
"""
from __future__ import annotations

import os
from pathlib import Path

SETTING = "sampan_busy_last_activity"  # ends in _last_activity: jupyter_server's ServerWebApplication.last_activity


def _jupyter_server_extension_points():
    return [{"module": "sampan.hub.busy"}]


def _own_job_states(jobs: Path, limit: int = 1 << 20) -> list[str]:
    """The ``job.json`` texts under this learner's ``$SAMPAN_DATA/jobs`` (their own files, read up to ``limit``)."""
    texts = []
    try:
        folders = list(jobs.iterdir())
    except OSError:
        return texts
    for folder in folders:
        state = folder / "job.json"
        try:
            if state.is_file():
                with open(state, "rb") as fh:
                    texts.append(fh.read(limit).decode("utf-8", "replace"))
        except OSError:
            continue
    return texts


def busy_reason(kernel_manager, jobs: Path) -> str | None:
    """Why the server is working (``"kernel <id> busy"``, ``"2 jobs running"``), or None when it is idle."""
    for kernel_id in list(kernel_manager.list_kernel_ids()):
        try:
            state = kernel_manager.get_kernel(kernel_id).execution_state
        except KeyError:  # shut down in between
            continue
        if state == "busy":
            return f"kernel {kernel_id} busy"
    from sampan.experiments.jobs import running_count

    count = running_count(_own_job_states(jobs))
    return f"{count} job{'s' if count > 1 else ''} running" if count else None


def mark_interval() -> float:
    """Seconds between two checks: half of jupyterhub-singleuser's reporting interval, 30 at most."""
    try:
        report = float(os.environ.get("JUPYTERHUB_ACTIVITY_INTERVAL", "300"))
    except ValueError:
        report = 300.0
    return min(30.0, max(1.0, report / 2))


def _load_jupyter_server_extension(serverapp) -> None:
    from jupyter_server._tz import utcnow
    from tornado.ioloop import PeriodicCallback

    from sampan.utils.io import data_home

    jobs = data_home() / "jobs"

    def mark() -> None:
        reason = busy_reason(serverapp.kernel_manager, jobs)
        if reason is not None:
            serverapp.web_app.settings[SETTING] = utcnow()
            serverapp.log.debug("sampan.hub.busy: %s, activity reported", reason)

    PeriodicCallback(mark, mark_interval() * 1000).start()
    serverapp.log.info("sampan.hub.busy: busy kernels and running jobs count as activity")
