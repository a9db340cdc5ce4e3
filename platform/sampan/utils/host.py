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

import psutil

_processes: dict[int, psutil.Process] = {}


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
    """RSS, system memory used / total (bytes), system and process CPU percent since the previous call."""
    vm = psutil.virtual_memory()
    return {"rss": process_rss(), "sys_used": int(vm.total - vm.available), "sys_total": int(vm.total),
            "cpu": float(psutil.cpu_percent(None)), "proc_cpu": float(process().cpu_percent(None))}
