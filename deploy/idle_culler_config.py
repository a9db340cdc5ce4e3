# jupyterhub-idle-culler configuration of `sampan hub` (passed with --config=...): culling stops servers idle
# longer than --timeout, but never a server that is working while it looks idle to the hub:
# - a running `sampan job` of the learner (one machine: its job.json under the learner's $SAMPAN_DATA/jobs,
#   with a live process), or
# - a kernel that is executing (a training in progress sends no messages): the hook asks the server's
#   Jupyter API for its kernels. The culler's token needs `access:servers` (sampan.hub.config).
# Deliberately free of `import sampan` (which imports torch): the culler stays a small process.
import json
import os
import stat
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


def _open_beneath(home, parts, flags):
    """A descriptor of ``home/parts...`` opened without following any link on the way (the culler may run as
    root, and the learner controls their home), or None."""
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    try:
        folder = os.open(home, os.O_RDONLY | os.O_DIRECTORY | nofollow)
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | nofollow, dir_fd=folder)
            os.close(folder)
            folder = inner
        return os.open(parts[-1], flags | nofollow, dir_fd=folder)
    except OSError:
        return None
    finally:
        os.close(folder)


def _job_states(home, limit=1 << 20):
    """The job.json texts of a learner's jobs: regular files of at most ``limit`` bytes, opened without
    blocking (a FIFO would stop the culler for everyone) and without following a link."""
    jobs = _open_beneath(home, [".sampan", "jobs"], os.O_RDONLY | os.O_DIRECTORY)
    if jobs is None:
        return []
    try:
        names = os.listdir(jobs)
    finally:
        os.close(jobs)
    texts = []
    for name in names:
        fd = _open_beneath(home, [".sampan", "jobs", name, "job.json"], os.O_RDONLY | os.O_NONBLOCK)
        if fd is None:
            continue
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fh.fileno())
            if stat.S_ISREG(info.st_mode) and info.st_size <= limit:
                texts.append(fh.read(limit).decode("utf-8", "replace"))
    return texts


def running_jobs(user, users_dir=None):
    """How many of ``user``'s `sampan job`s are running (status "running" and their process alive)."""
    home = Path(users_dir or USERS or "/nonexistent") / user
    count = 0
    for text in _job_states(home) if user and "/" not in user and user not in (".", "..") else []:
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
