"""An eavesdropper on a Jupyter kernel's iopub channel that knows only the port (what a port scan of 127.0.0.1
finds): ``python _spy.py PORT OUT SECONDS``. It subscribes to everything, writes ``OUT.ready`` once connected, and
after SECONDS writes the bytes of every message it received into OUT. Without transport encryption it reads each
output of the kernel (a ZMQ PUB socket asks no key); with CurveZMQ its handshake fails and it reads nothing."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import zmq


def listen(port: int, seconds: float, ready: Path | None = None) -> bytes:
    """Every message the kernel's iopub port at ``port`` sends in the next ``seconds``, joined."""
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.setsockopt(zmq.LINGER, 0)
    sub.connect(f"tcp://127.0.0.1:{port}")
    time.sleep(0.5)  # ZMQ's slow joiner: let the subscription reach the publisher
    if ready is not None:
        ready.write_text("connected")
    heard = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if sub.poll(100):
            heard.append(b"".join(sub.recv_multipart()))
    sub.close()
    ctx.term()
    return b"\n".join(heard)


if __name__ == "__main__":
    port, out, seconds = int(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
    out.write_bytes(listen(port, seconds, ready=out.with_suffix(".ready")))
