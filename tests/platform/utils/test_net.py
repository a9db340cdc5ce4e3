"""free_port: a server's port, free now and below the ephemeral range that kernels and connections draw from."""
from __future__ import annotations

import socket

from sampan.utils import net


def test_a_port_below_the_ephemeral_range_that_is_free():
    low, _ = net.ephemeral_range()  # Linux: /proc/sys/net/ipv4/ip_local_port_range
    ports = {net.free_port() for _ in range(20)}
    assert all(net.LOWEST <= p < low for p in ports)
    assert len(ports) > 1  # random: parallel callers rarely try the same port
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_the_preferred_port_when_free_else_another():
    port = net.free_port()
    assert net.free_port(preferred=port) == port
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        other = net.free_port(preferred=port)
    assert other != port


def test_without_the_range_the_system_picks(monkeypatch, tmp_path):
    monkeypatch.setattr(net, "EPHEMERAL_RANGE", tmp_path / "missing")
    assert net.ephemeral_range() is None
    assert 0 < net.free_port() < 65536
    (tmp_path / "low").write_text("1024\t65535\n")  # a range that starts low leaves no room below it
    monkeypatch.setattr(net, "EPHEMERAL_RANGE", tmp_path / "low")
    assert net.ephemeral_range() == (1024, 65535) and 1024 <= net.free_port() <= 65535


def test_a_port_a_stopped_server_left_in_time_wait_is_free():
    """Restarting `sampan lab` within a minute keeps its port: tornado binds it with SO_REUSEADDR."""
    port = net.free_port()
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", port))
        server.listen()
        client = socket.create_connection(("127.0.0.1", port))
        conn, _ = server.accept()
        conn.close()  # the server closes first, as a stopping web server does: TIME_WAIT on its side
        client.recv(1)
        client.close()
    assert net.free_port(preferred=port) == port
    assert net.server_port(port, program="sampan lab") == port
