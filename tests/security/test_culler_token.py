"""The idle culler's hub token never reaches a learner's server, and it could not open one if it did.

The learner controls their own Jupyter server (its config in their home, or any process on its port): whatever is
sent to it, they read. The culler used to ask each idle server for its kernels with its own token, whose
``access:servers`` opened every server, the teacher's included. Busy servers now report themselves to the hub
(:mod:`sampan.hub.busy`), the culler reads the hub's records only, and its role has no ``access:servers``.
"""
from __future__ import annotations

import asyncio
import datetime
import json
import runpy
import socket
from pathlib import Path

import yaml
from tornado import web

from sampan.hub.config import CULLER, HubSettings, configure, roles

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
TOKEN = "culler-secret-token"


class _Config:
    class IdleCuller:
        pass


def test_the_culler_sends_nothing_to_an_idle_learners_server(tmp_path, monkeypatch):
    """A learner leaves a listener of their own where their server answers and waits to be culled."""
    received = []

    class Kernels(web.RequestHandler):  # what the learner runs in place of their server
        def get(self, *_):
            received.append(dict(self.request.headers))
            self.finish(json.dumps([]))

    async def attack():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = web.Application([(r"/(.*)", Kernels)]).listen(port, "127.0.0.1")
        try:
            # the culler's environment as the hub gives it, plus the proxy's address where the old hook found servers
            monkeypatch.setenv("JUPYTERHUB_API_TOKEN", TOKEN)
            monkeypatch.setenv("SAMPAN_HUB_PUBLIC_URL", f"http://127.0.0.1:{port}/")
            monkeypatch.setenv("SAMPAN_HUB_USERS", str(tmp_path / "users"))
            (tmp_path / "users" / "mallory").mkdir(parents=True)
            hook = runpy.run_path(str(DEPLOY / "idle_culler_config.py"), init_globals={"get_config": lambda: _Config})
            server_model = {"name": "", "full_name": "mallory/", "url": "/user/mallory/"}
            return await hook["busy_aware_arbiter"](datetime.timedelta(hours=2), 3600, server_model)
        finally:
            server.stop()

    cull = asyncio.run(attack())
    assert cull is True  # idle, no job: culled
    assert received == [], f"the culler sent {received} to the learner's server"


def test_the_cullers_token_opens_no_server():
    settings = HubSettings(hub_dir=Path("/nonexistent"))
    culler = next(r for r in roles(settings) if CULLER in r.get("services", []))
    assert not [s for s in culler["scopes"] if s.startswith(("access:servers", "admin:", "servers", "tokens"))]
    values = yaml.safe_load((DEPLOY / "values.yaml").read_text())
    helm = values["hub"]["loadRoles"]["idle-culler"]["scopes"]
    assert not [s for s in helm if s.startswith(("access:servers", "admin:", "servers", "tokens"))]
    assert "environment" not in values["hub"]["services"]["idle-culler"]  # no address of the servers to call


def test_learners_servers_report_their_busy_kernels_themselves(tmp_path):
    """What replaces the culler's question: each learner's server loads sampan.hub.busy (one machine and the
    Kubernetes images), which reports a busy kernel or a running job to the hub with the server's own token."""
    from traitlets.config import Config

    c = Config()
    configure(c, HubSettings(hub_dir=tmp_path / "hub", live="off", learner_user="root", course_dir=""))
    assert "--ServerApp.jpserver_extensions=sampan.hub.busy=True" in c.Spawner.args
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert dockerfile.count('{"ServerApp": {"jpserver_extensions": {"sampan.hub.busy": true}}}') == 2  # cpu, cuda
