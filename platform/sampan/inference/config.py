"""``Config``: where the exported model is and how to run it (``paddle.inference.Config``)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from sampan.errors import bad_argument
from sampan.jit import _artifacts as art

Backend = Literal["auto", "pt2", "aoti", "onnxruntime"]
_ALIASES = {"auto": "auto", "pt2": "pt2", "exported": "pt2", "exported_program": "pt2", "torch": "pt2",
            "aoti": "aoti", "aotinductor": "aoti", "onnxruntime": "onnxruntime", "onnx": "onnxruntime",
            "ort": "onnxruntime"}


@dataclass
class Config:
    """Settings for :func:`create_predictor`; method names follow ``paddle.inference.Config``.

    Args:
        model_path: the prefix given to ``sampan.jit.save`` / ``sampan.onnx.export`` (e.g.
            ``"out/lenet"``), or one of its files (``.pt2``, ``.aoti.pt2``, ``.onnx``, ``.meta.json``).

    Example:
        >>> config = sampan.inference.Config("out/lenet")   # doctest: +SKIP
        >>> config.disable_gpu(); config.set_cpu_math_library_num_threads(2); config.set_backend("auto")  # doctest: +SKIP
        >>> predictor = sampan.inference.create_predictor(config)  # doctest: +SKIP
    """

    model_path: str | os.PathLike
    _use_gpu: bool = field(default=False, repr=False)
    _device_id: int = field(default=0, repr=False)
    _threads: int | None = field(default=None, repr=False)
    _backend: str = field(default="auto", repr=False)
    _warmup: int = field(default=2, repr=False)

    def __post_init__(self):
        if not isinstance(self.model_path, (str, os.PathLike)):
            raise TypeError(bad_argument("model_path", self.model_path, "a path (str or os.PathLike)",
                                         "pass the prefix used with sampan.jit.save, e.g. 'out/lenet'"))

    @property
    def prefix(self) -> Path:
        return art.prefix_of(self.model_path)

    # -- device ------------------------------------------------------------------------------------
    def enable_use_gpu(self, memory_pool_init_size_mb: int = 100, device_id: int = 0) -> None:
        """Run on CUDA device ``device_id`` (``memory_pool_init_size_mb`` is accepted for Paddle parity)."""
        if not isinstance(device_id, int) or device_id < 0:
            raise ValueError(bad_argument("device_id", device_id, "an int >= 0"))
        self._use_gpu, self._device_id = True, device_id

    def disable_gpu(self) -> None:
        """Run on the CPU (the default)."""
        self._use_gpu = False

    def use_gpu(self) -> bool:
        return self._use_gpu

    def gpu_device_id(self) -> int:
        return self._device_id

    @property
    def device(self) -> str:
        return f"cuda:{self._device_id}" if self._use_gpu else "cpu"

    # -- CPU threads -------------------------------------------------------------------------------
    def set_cpu_math_library_num_threads(self, num_threads: int) -> None:
        """Threads for CPU math: ``torch.set_num_threads`` (process-wide) and ONNX Runtime's intra-op pool."""
        if not isinstance(num_threads, int) or num_threads < 1:
            raise ValueError(bad_argument("num_threads", num_threads, "an int >= 1"))
        self._threads = num_threads

    def cpu_math_library_num_threads(self) -> int | None:
        return self._threads

    # -- backend and warm-up -----------------------------------------------------------------------
    def set_backend(self, backend: Backend | str) -> None:
        """``"auto"`` (fastest verified for the device), ``"pt2"`` (exported program), ``"aoti"`` or ``"onnxruntime"``."""
        key = _ALIASES.get(str(backend).lower())
        if key is None:
            raise ValueError(bad_argument("backend", backend, "one of 'auto', 'pt2', 'aoti', 'onnxruntime'"))
        self._backend = key

    @property
    def backend(self) -> str:
        return self._backend

    def set_warmup(self, steps: int) -> None:
        """Runs the predictor ``steps`` times on a sample when it is created (default 2)."""
        if not isinstance(steps, int) or steps < 0:
            raise ValueError(bad_argument("steps", steps, "an int >= 0"))
        self._warmup = steps

    @property
    def warmup_steps(self) -> int:
        return self._warmup

    def summary(self) -> str:
        return (f"model: {os.fspath(self.prefix)}, device: {self.device}, backend: {self._backend}, "
                f"cpu threads: {self._threads or 'default'}, warm-up steps: {self._warmup}")
