"""Notes that torch's C++ and its extension builder write under a learner's cell, though nothing went wrong, are
kept out: libkineto's ``USDT: ... profiler_start`` and ``ERROR: ... gpuGetDeviceCount failed`` around every
profile, and ``cpp_extension``'s "No CUDA runtime is found" on a machine with a CUDA toolkit and no GPU. Each test
runs a fresh interpreter, first without Sampan (the control: torch writes the note), then through Sampan."""
from __future__ import annotations

import os
import subprocess
import sys

PROFILE_WITH_TORCH = """
import torch
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
    torch.ones(8, 8) @ torch.ones(8, 8)
"""
PROFILE_WITH_SAMPAN = """
import torch
from sampan.profiler import Profiler
with Profiler(scheduler=(0, 2)) as prof:
    for _ in range(2):
        torch.ones(8, 8) @ torch.ones(8, 8)
        prof.step()
"""


def _stderr(code: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**environ, **env})
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_profiling_through_sampan_writes_no_kineto_lines():
    assert "profiler_start" in _stderr(PROFILE_WITH_TORCH)  # the control: this torch's libkineto logs
    said = _stderr(PROFILE_WITH_SAMPAN)
    assert "profiler_start" not in said and "gpuGetDeviceCount" not in said, said
    assert "profiler_start" in _stderr(PROFILE_WITH_SAMPAN, KINETO_LOG_LEVEL="0")  # the user's own level wins


def test_import_sampan_drops_the_cuda_home_note(tmp_path):
    assert "No CUDA runtime is found" in _stderr("import torch.utils.cpp_extension", CUDA_HOME=str(tmp_path))
    said = _stderr("import sampan, torch.utils.cpp_extension", CUDA_HOME=str(tmp_path))
    assert "No CUDA runtime is found" not in said, said


def test_import_sampan_quiets_kineto_for_torch_profiler_too():
    """A lesson that profiles with torch.profiler itself (large_models measures memory that way)."""
    said = _stderr("import sampan\n" + PROFILE_WITH_TORCH)
    assert "profiler_start" not in said and "gpuGetDeviceCount" not in said, said
