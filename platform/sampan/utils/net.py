"""``free_port``: a port for a server Sampan starts, free now and kept out of the system's own picks.

A server's port is chosen a moment before the server binds it. In that moment any process may take it: a kernel
that starts binds five ports the system picks, and every outgoing connection takes one as its source port, all from
the ephemeral range (``/proc/sys/net/ipv4/ip_local_port_range``, 32768-60999 on Linux). A port picked below that
range is one the system never hands out on its own, so only another server started by hand can collide with it.
"""
from __future__ import annotations

import os
import random
import socket
import sys
from pathlib import Path

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 10000  # below: ports that well-known services (databases, dev servers) listen on
_pick = random.SystemRandom()


def ephemeral_range() -> tuple[int, int] | None:
    """The system's ephemeral port range (Linux), or None where it cannot be read."""
    try:
        low, high = (int(v) for v in EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        return None
    return low, high


def _bindable(port: int) -> bool:
    """Whether a server could bind ``port`` now. Like tornado (Jupyter, Voila), the probe sets ``SO_REUSEADDR`` on
    POSIX, where it only lets a port that a closed server's connections keep in TIME_WAIT be bound again (a live
    listener still refuses it); on Windows that option would steal a port in use, so it is left off there."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        if os.name == "posix":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(preferred: int | None = None) -> int:
    """``preferred`` when it is free on 127.0.0.1; else a free port below the ephemeral range (a random one, so
    parallel callers rarely try the same); else, where that range is unknown or starts low, one the system picks.

    Example:
        >>> from sampan.utils.net import free_port
        >>> 0 < free_port() < 65536
        True
    """
    if preferred and _bindable(preferred):
        return preferred
    span = ephemeral_range()
    if span is not None and span[0] - LOWEST >= 1000:
        for _ in range(64):
            port = _pick.randrange(LOWEST, span[0])
            if _bindable(port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_port(requested: int, *, program: str) -> int:
    """:func:`free_port` for a server the learner asked for on ``requested`` (0: any free port); when that port is
    taken, a line on stderr says so and names the port used instead (``sampan lab``, ``dashboard``, ``publish``).

    Example:
        >>> from sampan.utils.net import server_port
        >>> server_port(0, program="sampan lab") > 0
        True
    """
    port = free_port(requested)
    if requested and port != requested:
        print(f"{program}: port {requested} is busy; using port {port} instead", file=sys.stderr, flush=True)
    return port
