"""The recording service's socket lives in a folder only its user may enter: a folder another user made, or one
others may write to, is never used, so a planted socket cannot read the runs nor forge the replies."""
from __future__ import annotations

import os
import socket
import threading

import pytest
from service_helpers import Sandbox, run_of

from sampan.experiments import service

pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs Unix sockets, which this platform lacks")


@pytest.fixture
def sandbox(tmp_path):
    box = Sandbox(tmp_path / "mlflow.db")
    yield box
    box.close()


def _plant_listener(path) -> tuple[socket.socket, list]:
    """The attacker's socket where the service's would be; records every connection it gets."""
    spy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    spy.bind(str(path))
    spy.listen(8)
    spy.settimeout(0.2)
    got: list = []

    def watch():
        while True:
            try:
                conn, _ = spy.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            got.append(conn.recv(65536))
            conn.close()

    threading.Thread(target=watch, daemon=True).start()
    return spy, got


def test_a_folder_others_may_write_is_not_used_and_its_planted_socket_gets_nothing(sandbox):
    folder = sandbox.folder()
    folder.mkdir()
    folder.chmod(0o777)  # made by someone else, open to all: anyone could have put a socket in it
    spy, got = _plant_listener(service.socket_path(folder))
    try:
        out = sandbox.fit()
    finally:
        spy.close()
    assert got == []  # no request (params, tags, metrics) went to the planted socket
    assert out["mlflow"] is True  # the process wrote its run itself
    client, run = run_of(sandbox.uri, out["run_id"])
    assert run.info.status == "FINISHED" and len(client.get_metric_history(out["run_id"], "loss")) == 3


@pytest.mark.skipif(os.getuid() != 0, reason="making a folder another user owns needs root")
def test_a_folder_another_user_owns_is_not_used(sandbox):
    folder = sandbox.folder()
    folder.mkdir(mode=0o700)
    os.chown(folder, 65534, 65534)  # nobody's: that user could replace the socket at will
    out = sandbox.fit()
    assert out["mlflow"] is True and not list(folder.glob("*.sock"))
    assert run_of(sandbox.uri, out["run_id"])[1].info.status == "FINISHED"
