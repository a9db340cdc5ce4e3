# A university cluster: JupyterHub on a login node starts each learner's JupyterLab as a Slurm job
# (batchspawner, https://github.com/jupyterhub/batchspawner). Use it *instead of* the one-machine spawner:
#   pip install batchspawner            # on the hub node and in the environment the compute nodes run
#   jupyterhub -f deploy/jupyterhub_config.py -f deploy/batchspawner_config.py
# Learners log in with their university account (PAM or your SSO's authenticator), so each server runs
# as the learner's own Unix user on a compute node; the course copy and progress work as with `sampan hub`.
c = get_config()  # noqa: F821 - provided by JupyterHub

c.JupyterHub.spawner_class = "batchspawner.SlurmSpawner"
c.JupyterHub.hub_ip = "0.0.0.0"                 # compute nodes must reach the hub API
c.JupyterHub.authenticator_class = "pam"        # university accounts; replace with your SSO authenticator
c.Spawner.http_timeout = 300
c.Spawner.start_timeout = 600                   # a queued job may wait for a node
c.Spawner.default_url = "/lab/tree/course/index.ipynb"
# the kernels' channels encrypted (CurveZMQ): a compute node's other users cannot read a learner's outputs
c.Spawner.args = ["--KernelManager.transport_encryption=auto"]
c.SlurmSpawner.batch_script = """#!/bin/bash
#SBATCH --job-name=sampan-{{username}}
#SBATCH --partition={{partition}}
#SBATCH --time={{runtime}}
#SBATCH --mem={{memory}}
#SBATCH --cpus-per-task={{nprocs}}
{% if gres %}#SBATCH --gres={{gres}}{% endif %}
#SBATCH --output={{homedir}}/.sampan-hub-%j.log
#SBATCH --export={{keepvars}}
set -euo pipefail
module load sampan 2>/dev/null || source "$SAMPAN_HOME/.venv/bin/activate"
python -m sampan.hub.course "$SAMPAN_HOME/notebooks" "$HOME/course"
{{prologue}}
{{cmd}}
{{epilogue}}
"""
c.SlurmSpawner.req_partition = "teaching"
c.SlurmSpawner.req_runtime = "4:00:00"
c.SlurmSpawner.req_memory = "8G"
c.SlurmSpawner.req_nprocs = "4"
c.SlurmSpawner.req_gres = ""                    # "gpu:1" for a GPU per learner
c.Spawner.environment = {"SAMPAN_HOME": "/opt/sampan"}
