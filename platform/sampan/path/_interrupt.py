"""Ctrl-C during a lesson: the kernels it started are ended before the ``KeyboardInterrupt`` unwinds papermill.

Example:
    >>> with kernels_stopped_on_interrupt():  # doctest: +SKIP
    ...     execute_notebook("lesson.ipynb", "out.ipynb")
"""
from __future__ import annotations

import contextlib
from typing import Iterator


@contextlib.contextmanager
def kernels_stopped_on_interrupt() -> Iterator[None]:
    """On Ctrl-C, ends the kernel started meanwhile before the ``KeyboardInterrupt`` unwinds papermill.

    The kernel runs in a session of its own, so the terminal's Ctrl-C never reaches it; papermill would shut it down
    gracefully while its cell still runs (the kernel then prints a traceback of its own), or, when the interrupt
    comes while it starts, leave it running until this interpreter exits (for ever, in a notebook).
    """
    import signal
    import threading

    import psutil

    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}

    def stop_kernels() -> None:
        from sampan.utils import forkkernels

        keep = before | {server.process.pid for server in forkkernels._CLIENTS.values()}
        started = [p for p in me.children(recursive=True) if p.pid not in keep]
        for proc in started:
            with contextlib.suppress(psutil.Error):
                proc.terminate()
        for proc in psutil.wait_procs(started, timeout=5)[1]:
            with contextlib.suppress(psutil.Error):
                proc.kill()

    def on_interrupt(signum, frame):
        stop_kernels()
        raise KeyboardInterrupt

    main = threading.current_thread() is threading.main_thread() and \
        signal.getsignal(signal.SIGINT) is signal.default_int_handler
    previous = signal.signal(signal.SIGINT, on_interrupt) if main else None
    try:
        yield
    except KeyboardInterrupt:
        stop_kernels()  # raised another way (not the main thread, or a SIGINT handler other than Python's own)
        raise
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)
