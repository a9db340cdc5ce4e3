# jupyterhub-idle-culler configuration of `sampan hub` (passed with --config=...): culling stops servers idle
# longer than --timeout, but never a server that is working while it looks idle to the hub:
# - a kernel that is executing (a training in progress sends no messages) or a running `sampan job`: the learner's
#   server reports them to the hub as activity itself (the jupyter_server extension sampan.hub.busy), so the hub's
#   records say so. The culler never asks a learner's server: that process is the learner's, and the culler's token
#   would reach it. Its role has no `access:servers` (sampan.hub.config.roles).
# - on one machine, the hook below also counts the learner's running jobs from their files (job.json under the
#   learner's $SAMPAN_DATA/jobs, with a live process), for a server whose extension was turned off.
# The culler stays a small process: the sampan modules it loads (sampan.experiments.jobs, sampan.hub.service) import
# no torch, NumPy or MLflow.
import os
from pathlib import Path

USERS = os.environ.get("SAMPAN_HUB_USERS", "")  # learners' homes (one machine); unset on Kubernetes


def _job_states(home, limit=1 << 20):
    """The job.json texts of a learner's jobs (the culler may run as root; the learner controls the home): read
    with sampan.hub.service's readers (no link followed, no FIFO, bounded), imported on first use."""
    from sampan.hub.service import learner_folder, read_learner_file

    texts = (read_learner_file(home, f".sampan/jobs/{name}/job.json", limit) for name in
             learner_folder(home, ".sampan/jobs"))
    return [text.decode("utf-8", "replace") for text in texts if text is not None]


def running_jobs(user, users_dir=None):
    """How many of ``user``'s `sampan job`s are running (status "running" and their process alive)."""
    root = users_dir or USERS  # unset on Kubernetes: the jobs live in the learner's pod (its server reports them)
    if not root or not user or "/" in user or user in (".", ".."):
        return 0
    from sampan.experiments.jobs import running_count

    return running_count(_job_states(Path(root) / user))


async def busy_aware_arbiter(inactive, inactive_limit, server):
    if inactive is None or inactive.total_seconds() < inactive_limit:
        return False
    return not running_jobs(server.get("full_name", "").split("/")[0])


c = get_config()  # noqa: F821 - provided by the culler
c.IdleCuller.cull_arbiter_hook = busy_aware_arbiter
