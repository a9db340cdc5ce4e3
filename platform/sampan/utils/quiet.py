"""Notes that torch's C++ side and its extension builder write under a learner's cell though nothing went wrong,
kept out from ``import sampan`` on (this module imports no torch; importing any ``sampan.*`` module runs
``sampan/__init__`` first, which calls :func:`quiet_torch_notes`):

- libkineto (``torch.profiler``'s tracer) writes ``USDT: ... profiler_start`` / ``profiler_stop`` for each
  profile and, with a CUDA build of torch on a machine without a GPU, ``ERROR: ... gpuGetDeviceCount failed with
  code 35``: :func:`quiet_kineto` sets ``KINETO_LOG_LEVEL`` (read when the first profile starts) unless the user
  did (``KINETO_LOG_LEVEL=0`` brings the lines back);
- ``torch.utils.cpp_extension`` logs "No CUDA runtime is found, using CUDA_HOME=..." when first imported (by
  Sampan's C++ kernels, by inductor compiling a CPU graph, by a lesson building its own operator) on a machine with
  a CUDA toolkit but no GPU, a CUDA container on a CPU node: :func:`quiet_cuda_home_note` drops that one record.
"""
from __future__ import annotations

import logging
import os

# libkineto's own log level (0 verbose ... 6 silent)
KINETO_LOG_LEVEL = "6"


def quiet_kineto() -> None:
    """``KINETO_LOG_LEVEL`` = :data:`KINETO_LOG_LEVEL` unless already set."""
    os.environ.setdefault("KINETO_LOG_LEVEL", KINETO_LOG_LEVEL)


class _NoCudaHomeNote(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("No CUDA runtime is found")


def quiet_cuda_home_note() -> None:
    """Drops cpp_extension's "No CUDA runtime is found" record (the logger's filter is installed once)."""
    logger = logging.getLogger("torch.utils.cpp_extension")
    if not any(isinstance(f, _NoCudaHomeNote) for f in logger.filters):
        logger.addFilter(_NoCudaHomeNote())


def quiet_torch_notes() -> None:
    """Both of the above (``import sampan`` calls it)."""
    quiet_kineto()
    quiet_cuda_home_note()
