"""This machine's and this process's figures from psutil, imported in this one place.

The profiler's memory timeline, the resource monitor's host reader and the monitor callback's
leak detector all read the host through these functions.

Example:
    >>> from sampan.utils.host import process_rss
    >>> process_rss() > 0
    True
"""
from __future__ import annotations

import os
import time

import psutil

# A CPU percent is CPU time over wall time since the previous reading, and the kernel counts CPU time in clock ticks
# (10 ms): over a millisecond (the monitor's thread, then the fit's end, reading one after the other) a process
# read 0 % or 984 % on 2 cores. A reading sooner than this after the last one repeats it; over 50 ms a tick is 20
# points at most, and a fit of a tenth of a second still gets a reading of its own.
MIN_CPU_INTERVAL = 0.05

_processes: dict[int, psutil.Process] = {}
_last_cpu: dict[int, tuple[float, float, float]] = {}  # pid -> (monotonic time, system %, process %) last read


def process() -> psutil.Process:
    """This process (one ``psutil.Process`` per pid, so a forked child gets its own)."""
    pid = os.getpid()
    if pid not in _processes:
        _processes[pid] = psutil.Process(pid)
    return _processes[pid]


def process_rss() -> int:
    """This process's resident memory in bytes."""
    return int(process().memory_info().rss)


def host_figures() -> dict:
    """RSS, system memory used / total (bytes), system and process CPU percent (:func:`cpu_percents`)."""
    vm = psutil.virtual_memory()
    cpu, proc_cpu = cpu_percents()
    return {"rss": process_rss(), "sys_used": int(vm.total - vm.available), "sys_total": int(vm.total),
            "cpu": cpu, "proc_cpu": proc_cpu}


def cpu_percents() -> tuple[float, float]:
    """(system, this process) CPU percent since the previous reading; within :data:`MIN_CPU_INTERVAL` of it, that
    reading again. The process may use up to 100 % of each core (200 % on 2 cores); the first reading is 0.0."""
    pid, now = os.getpid(), time.monotonic()
    last = _last_cpu.get(pid)
    if last is not None and now - last[0] < MIN_CPU_INTERVAL:
        return last[1], last[2]
    cpu = float(psutil.cpu_percent(None))
    proc_cpu = min(float(process().cpu_percent(None)), 100.0 * (psutil.cpu_count() or 1))
    _last_cpu[pid] = (now, cpu, proc_cpu)
    return cpu, proc_cpu
