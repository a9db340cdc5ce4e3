# jupyterhub-idle-culler configuration of `sampan hub` (passed with --config=...): culling stops servers idle
# longer than --timeout, but never a server that is working while it looks idle to the hub:
# - a running `sampan job` of the learner (one machine: its job.json under the learner's $SAMPAN_DATA/jobs,
#   with a live process), or
# - a kernel that is executing (a training in progress sends no messages): the hook asks the server's
#   Jupyter API for its kernels. The culler's token needs `access:servers` (sampan.hub.config).
# Deliberately free of `import sampan` (which imports torch): the culler stays a small process; it reads learners'
# files with sampan.hub.service's readers, loaded without sampan's __init__.
import json
import os
from pathlib import Path

import psutil
from tornado.httpclient import AsyncHTTPClient, HTTPClientError

PUBLIC_URL = os.environ.get("SAMPAN_HUB_PUBLIC_URL", "http://127.0.0.1:8000/")
TOKEN = os.environ.get("JUPYTERHUB_API_TOKEN", "")
USERS = os.environ.get("SAMPAN_HUB_USERS", "")  # learners' homes (one machine); unset on Kubernetes


def _alive(pid, started):
    try:
        proc = psutil.Process(int(pid))
        return (started is None or abs(proc.create_time() - float(started)) < 1.0) \
            and proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, TypeError, ValueError):
        return False


def _learner_files():
    """sampan.hub.service's readers of a learner's files (no link followed, no FIFO, bounded); imported on first
    use (sampan imports no torch, so this stays light in the culler's process)."""
    from sampan.hub.service import learner_folder, read_learner_file

    return learner_folder, read_learner_file


def _job_states(home, limit=1 << 20):
    """The job.json texts of a learner's jobs (the culler may run as root; the learner controls the home)."""
    learner_folder, read_learner_file = _learner_files()
    texts = (read_learner_file(home, f".sampan/jobs/{name}/job.json", limit) for name in
             learner_folder(home, ".sampan/jobs"))
    return [text.decode("utf-8", "replace") for text in texts if text is not None]


def running_jobs(user, users_dir=None):
    """How many of ``user``'s `sampan job`s are running (status "running" and their process alive)."""
    root = users_dir or USERS  # unset on Kubernetes: the jobs live in the learner's pod
    if not root or not user or "/" in user or user in (".", ".."):
        return 0
    count = 0
    for text in _job_states(Path(root) / user):
        try:
            job = json.loads(text)
        except ValueError:
            continue
        if isinstance(job, dict) and job.get("status") == "running" and _alive(job.get("pid"), job.get("pid_started")):
            count += 1
    return count


async def busy_aware_arbiter(inactive, inactive_limit, server):
    if inactive is None or inactive.total_seconds() < inactive_limit:
        return False
    if running_jobs(server.get("full_name", "").split("/")[0]):
        return False
    url = PUBLIC_URL.rstrip("/") + server["url"] + "api/kernels"
    try:
        response = await AsyncHTTPClient().fetch(url, headers={"Authorization": f"token {TOKEN}"},
                                                  request_timeout=20, validate_cert=False)
    except (HTTPClientError, OSError):
        return True  # a server that cannot answer is not working on anything
    kernels = json.loads(response.body)
    return not any(k.get("execution_state") == "busy" for k in kernels)


c = get_config()  # noqa: F821 - provided by the culler
c.IdleCuller.cull_arbiter_hook = busy_aware_arbiter
