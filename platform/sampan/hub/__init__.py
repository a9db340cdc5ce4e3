"""The classroom: a learner's dashboard gallery (``sampan publish``) and JupyterHub for a class (``sampan hub``).

Everything here runs JupyterHub, Voilà or tornado in *separate processes* or
imports them inside functions: ``import sampan.hub`` stays cheap and headless.

- :mod:`sampan.hub.gallery`: publish / list / remove a learner's notebooks as Voilà dashboards.
- :mod:`sampan.hub.config`: the JupyterHub configuration that ``sampan hub`` and ``deploy/`` use.
- :mod:`sampan.hub.course`: each learner's own copy of the course, updated without overwriting edits.
- :mod:`sampan.hub.roster`: the class roster (CSV: ``username,role``).
- :mod:`sampan.hub.progress_store`: the teacher dashboard's SQLite store of progress events.
- :mod:`sampan.hub.service`: the teacher dashboard, a JupyterHub service behind hub login.
- :mod:`sampan.hub.client`: a learner's server posts progress events to that service.
- :mod:`sampan.hub.live`: published dashboards *live* for the class (Voilà as a hub-authenticated service,
  as an unprivileged user); :mod:`sampan.hub.live_auth`: its JupyterHub login (loaded by Voilà only).
- :mod:`sampan.hub.auth`, :mod:`sampan.hub.spawner`: the authenticator and spawner (loaded by JupyterHub only).
- :mod:`sampan.hub.bench`: the 20-learner rush (``python -m sampan.hub.bench``).

Example:
    >>> from sampan.hub import gallery
    >>> gallery.gallery_dir().name
    'gallery'
"""
from __future__ import annotations

__all__ = ["gallery", "config", "course", "roster", "progress_store", "client", "live"]
