"""tests/cpu_sampler.py: the CPU of processes that no test waits for is charged to the test whose worker started
them."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cpu_sampler import attribute, by_kind, probe

SAMPLER = Path(__file__).with_name("cpu_sampler.py")


def test_cpu_is_charged_to_the_test_its_workers_descendant_ran_in():
    timeline = [{"worker": "gw0", "pid": 100, "test": "a.py::t1", "start": 0.0, "end": 10.0},
                {"worker": "gw0", "pid": 100, "test": "a.py::t2", "start": 10.0, "end": 20.0},
                {"worker": "gw1", "pid": 200, "test": "b.py::t3", "start": 0.0, "end": 30.0}]
    samples = [{"t": 5.0, "pid": 101, "cpu": 1.5, "chain": [101, 100, 1], "cmd": "kernel"},  # gw0's kernel
               {"t": 15.0, "pid": 102, "cpu": 2.0, "chain": [102, 101, 100, 1], "cmd": None},  # its grandchild
               {"t": 25.0, "pid": 100, "cpu": 0.5, "chain": [100, 1], "cmd": None},  # gw0 after its last test
               {"t": 25.0, "pid": 200, "cpu": 0.25, "chain": [200, 1], "cmd": None},
               {"t": 25.0, "pid": 300, "cpu": 4.0, "chain": [300, 1], "cmd": "a daemon"},
               {"t": 25.0, "pid": 105, "cpu": 1.0, "chain": [105, 2], "cmd": None}]  # a kernel thread
    assert attribute(timeline, samples) == {"a.py::t1": 1.5, "a.py::t2": 2.0, "gw0:between-tests": 0.5,
                                            "b.py::t3": 0.25, "other: a daemon": 4.0,
                                            "other: kernel threads of the machine": 1.0}


def test_processes_are_told_apart_by_kind():
    serve = "/venv/bin/python -c from sampan.utils.forkkernels import serve; serve(19)"
    samples = [{"t": 1.0, "pid": 10, "cpu": 3.0, "chain": [10, 9, 1], "cmd": serve},  # the server
               {"t": 1.5, "pid": 11, "cpu": 5.0, "chain": [11, 10, 9, 1], "cmd": serve},  # a kernel forked from it
               {"t": 2.0, "pid": 11, "cpu": 2.0, "chain": [11, 10, 9, 1], "cmd": None},
               {"t": 2.0, "pid": 12, "cpu": 1.0, "chain": [12, 9, 1], "cmd": "/usr/lib/gcc/12/cc1plus -quiet"},
               {"t": 2.0, "pid": 13, "cpu": 0.5, "chain": [13, 9, 1], "cmd": "/venv/bin/python -m sampan path run"},
               {"t": 2.0, "pid": 14, "cpu": 0.25, "chain": [14, 2], "cmd": None}]
    assert by_kind(samples) == {"fork servers": (3.0, 1), "forked kernels": (7.0, 1), "C++ compiler": (1.0, 1),
                                "new interpreters: -m sampan": (0.5, 1), "kernel threads of the machine": (0.25, 1)}


def test_the_recorder_sees_a_busy_child_of_this_process(tmp_path):
    out = tmp_path / "samples.jsonl"
    recorder = subprocess.Popen([sys.executable, str(SAMPLER), "record", str(out)])
    spin = "import time\nend = time.time() + 2.5\nwhile time.time() < end: pass"
    busy = subprocess.Popen([sys.executable, "-c", spin])
    try:
        busy.wait(60)
        time.sleep(1.2)  # two more samples
    finally:
        recorder.kill()
        recorder.wait(10)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()]
    mine = [r for r in rows if r["pid"] == busy.pid]
    assert mine and all(r["chain"][:2] == [busy.pid, os.getpid()] for r in mine)
    assert 0.5 < sum(r["cpu"] for r in mine) < 4.0  # it spun for 2.5 s, charged by the samples that saw it
    assert "while time.time()" in next(r["cmd"] for r in mine if r["cmd"])


def test_the_probe_times_each_process_and_names_an_interpreter_without_torch(tmp_path):
    medians = probe(sys.executable, processes=1, calls=3, size=32)  # small: the suite's own figure is 224 x 224, 20
    assert len(medians) == 1 and 0 < medians[0] < 10_000
    bare = tmp_path / "bare-python"  # an interpreter that cannot import torch
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -I -S \"$@\"\n")
    bare.chmod(0o755)
    with pytest.raises(SystemExit, match=r"a probe failed \(exit codes \[1, 1\]\): .*bare-python needs torch and "
                                         r"torchvision \(make setup\)"):
        probe(str(bare))
