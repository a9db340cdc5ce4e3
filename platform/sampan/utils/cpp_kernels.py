"""Sampan's small C++ CPU kernels, built once per machine on first use by ``torch.utils.cpp_extension``.

Each kernel is one ``.cpp`` file beside the Python module that calls it; it registers its ops with
``TORCH_LIBRARY`` and is compiled for AVX2 + FMA (``-O3 -mavx2 -mfma``). torch's extension cache
(``$TORCH_EXTENSIONS_DIR``, by default under ``~/.cache/torch_extensions``) keeps the build for later processes and
rebuilds it when the source changes. A machine without a C++ compiler or without AVX2 gets the reason back instead
of an exception, so the caller can fall back to a torch path and say why.
"""
from __future__ import annotations

import logging
import os
import shutil
import warnings
from pathlib import Path
from typing import Callable

import torch

_STATE: dict[str, str | None] = {}
_log = logging.getLogger("sampan.utils.cpp_kernels")


def load(name: str, source: Path, op: str, what: str, fake: Callable | None = None,
         fakes: dict[str, Callable] | None = None) -> str | None:
    """Builds and loads the kernel ``source`` as the extension ``name`` (once per process); returns None when
    its op ``op`` (``"namespace::op"``) is ready, else why it cannot run here.

    Args:
        name: the extension's name; change it with the source's interface so no stale build is loaded.
        source: the ``.cpp`` file.
        op: one op the file registers, to tell whether it is loaded already.
        what: the kernel in words, for the reasons ("the F(4x4) kernel").
        fake: its meta function for tracing (``torch.library.register_fake``), if it is traced.
        fakes: the meta functions of the file's other traced ops, by ``"namespace::op"``.
    """
    if name not in _STATE:
        _STATE[name] = _load(name, source, op, what, {op: fake, **(fakes or {})})
    return _STATE[name]


def failure(name: str) -> str | None:
    """Why an earlier :func:`load` of ``name`` in this process failed; None when it loaded or was not tried (this
    builds nothing)."""
    return _STATE.get(name)


def _load(name: str, source: Path, op: str, what: str, fakes: dict[str, Callable | None]) -> str | None:
    capability = torch.backends.cpu.get_cpu_capability()
    if capability not in ("AVX2", "AVX512"):
        return f"this CPU's vector instructions ({capability}) are not AVX2, which {what} is built for"
    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None:
        return f"no C++ compiler ({compiler!r} is not on PATH; install g++ or set CXX) to build {what}"
    namespace, op_name = op.split("::")
    if not hasattr(getattr(torch.ops, namespace), op_name):
        from torch.utils import cpp_extension

        _log.info("loading %s (built on first use, once per machine: 10-30 s)", what)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "no CUDA runtime is found" and the like
                cpp_extension.load(name=name, sources=[str(source)], extra_cflags=["-O3", "-mavx2", "-mfma"],
                                   is_python_module=False, verbose=False)
        except Exception as exc:  # noqa: BLE001 - any failed build means: the torch path instead, and say why
            from sampan.errors import first_line

            return f"building {what} failed: {first_line(exc)}"
        for traced, fake in fakes.items():
            if fake is not None:
                torch.library.register_fake(traced)(fake)
    return None
