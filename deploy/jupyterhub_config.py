# JupyterHub configuration of `sampan hub` (one machine, one class). `sampan hub` runs
#   jupyterhub -f deploy/jupyterhub_config.py
# with SAMPAN_HUB_* environment variables; see platform/sampan/hub/config.py and docs/CLASSROOM.md.
# Add your own settings below the call; they override Sampan's.
from sampan.hub.config import configure

c = get_config()  # noqa: F821 - provided by JupyterHub
configure(c)
