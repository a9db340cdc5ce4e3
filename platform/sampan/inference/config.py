"""``Config``: where the exported model is and how to run it (``paddle.inference.Config``)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from sampan.errors import bad_argument, check_int
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
            ``"out/lenet"``: every artifact of it is a candidate), or one of its files: ``.pt2``, ``.aoti.pt2``
            or ``.onnx`` serves that file (as ``sampan.jit.load`` does; :meth:`set_backend` still picks
            another), ``.meta.json`` is the prefix.
        params_file: Paddle's second file (``Config("lenet.pdmodel", "lenet.pdiparams")``). Sampan keeps the
            weights inside the one model file, so it is accepted and ignored when it names the same model
            (``out/lenet.pdiparams`` beside ``out/lenet.pt2``); another path is refused.

    Example:
        >>> import sampan
        >>> config = sampan.inference.Config("out/lenet")   # doctest: +SKIP
        >>> config.disable_gpu(); config.set_cpu_math_library_num_threads(2); config.set_backend("auto")  # doctest: +SKIP
        >>> predictor = sampan.inference.create_predictor(config)  # doctest: +SKIP
    """

    model_path: str | os.PathLike
    params_file: str | os.PathLike | None = field(default=None, repr=False)
    # settings are changed through the methods below, never as constructor arguments (Paddle's second
    # positional argument is the weights file: it must not land in _use_gpu)
    _use_gpu: bool = field(default=False, init=False, repr=False)
    _device_id: int = field(default=0, init=False, repr=False)
    _threads: int | None = field(default=None, init=False, repr=False)
    _backend: str = field(default="auto", init=False, repr=False)
    _warmup: int = field(default=2, init=False, repr=False)
    _bf16_max_rel_error: float | None = field(default=None, init=False, repr=False)
    _winograd: bool | None = field(default=None, init=False, repr=False)  # None: on its own where it pays

    def __post_init__(self):
        if not isinstance(self.model_path, (str, os.PathLike)):
            raise TypeError(bad_argument("model_path", self.model_path, "a path (str or os.PathLike)",
                                         "pass the prefix used with sampan.jit.save, e.g. 'out/lenet'"))
        if self.params_file is not None:
            self._check_params_file()

    def _check_params_file(self) -> None:
        companion = f"{_stem(self.model_path)}.pdiparams"
        expected = f"left out, or the companion of model_path ({companion!r})"
        fix = (f"Sampan keeps the weights inside the model file: write Config({os.fspath(self.model_path)!r}) "
               "alone")
        if not isinstance(self.params_file, (str, os.PathLike)):
            raise TypeError(bad_argument("params_file", self.params_file, expected, fix))
        if _stem(self.params_file) != _stem(self.model_path):
            raise ValueError(bad_argument("params_file", os.fspath(self.params_file), expected, fix))

    @property
    def prefix(self) -> Path:
        return art.prefix_of(self.model_path)

    @property
    def file_format(self) -> str | None:
        """The format of the file ``model_path`` names by its suffix (``"pt2"``, ``"aoti"``, ``"onnx"``), or None
        for a prefix (or its ``.meta.json``)."""
        text = os.fspath(self.model_path)
        return next((fmt for fmt, suffix in art.SUFFIXES.items() if text.endswith(suffix)), None)

    # -- device ------------------------------------------------------------------------------------
    def enable_use_gpu(self, memory_pool_init_size_mb: int = 100, device_id: int = 0) -> None:
        """Run on CUDA device ``device_id`` (``memory_pool_init_size_mb`` is accepted for Paddle parity)."""
        check_int("device_id", device_id, minimum=0, fix="pass device_id=0 for the first GPU")
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
        check_int("num_threads", num_threads, fix="pass an int such as num_threads=4 (a count, not a string)")
        self._threads = num_threads

    def cpu_math_library_num_threads(self) -> int | None:
        return self._threads

    # -- reduced precision -------------------------------------------------------------------------
    def enable_mkldnn_bfloat16(self, *, max_rel_error: float = 2e-2) -> None:
        """Lets ``backend="auto"`` also try the model in bfloat16 (Paddle's ``Config.enable_mkldnn_bfloat16``).

        The bf16 candidate (``inductor-bf16``: the ``.pt2`` program compiled by inductor with freezing
        under ``torch.autocast("cpu", torch.bfloat16)``) runs only on CPUs with native bf16 (AVX-512 BF16
        or AMX); elsewhere, on a GPU or with a backend set by :meth:`set_backend`, it is refused with the
        reason in ``predictor.report()``. It is checked against the fp32 reference and chosen only when
        it is the fastest verified candidate. Off by default: its outputs differ from fp32 by about 1e-2
        relative, and compiling it takes seconds (tens of seconds for a ResNet).

        Args:
            max_rel_error: the largest accepted ``max|bf16 - fp32| / max|fp32|`` on the check sample, per
                output (default 2e-2; see :mod:`sampan.inference.bf16` for why), a float in (0, 1).

        Example:
            >>> import sampan
            >>> config = sampan.inference.Config("out/resnet18")  # doctest: +SKIP
            >>> config.enable_mkldnn_bfloat16()                     # doctest: +SKIP
        """
        hint = "the default 2e-2 suits bf16; a tighter bound rejects more models"
        if isinstance(max_rel_error, bool) or not isinstance(max_rel_error, (int, float)):
            raise TypeError(bad_argument("max_rel_error", max_rel_error, "a float in (0, 1)", hint))
        if not 0 < max_rel_error < 1:
            raise ValueError(bad_argument("max_rel_error", max_rel_error, "a float in (0, 1)", hint))
        self._bf16_max_rel_error = float(max_rel_error)

    def disable_mkldnn_bfloat16(self) -> None:
        """Only fp32 candidates (the default)."""
        self._bf16_max_rel_error = None

    def mkldnn_bfloat16_enabled(self) -> bool:
        return self._bf16_max_rel_error is not None

    @property
    def bf16_max_rel_error(self) -> float | None:
        """The bf16 tolerance set by :meth:`enable_mkldnn_bfloat16`, or None while bf16 is off."""
        return self._bf16_max_rel_error

    def enable_winograd(self) -> None:
        """Lets ``backend="auto"`` also try ``inductor-winograd``: the ``.pt2`` program compiled by inductor with
        freezing, its 3 x 3 stride-1 convolutions computed by Winograd (:mod:`sampan.inference.winograd`).

        It is verified against the fp32 reference and chosen only when it is the fastest. Worth it for
        convolutional networks on CPUs whose direct convolutions already run at their peak (resnet18 ran at
        0.66-0.77x ONNX Runtime's latency on AMD EPYC CPUs, with AVX2 or AVX-512); it costs a compile when the
        predictor is created (about 20 s for resnet18 on one core) and, the first time on a machine, the build of
        the F(4x4, 3x3) kernel (10-30 s; needs a C++ compiler, else F(2x2, 3x3) is used).

        Without a call to this or :meth:`disable_winograd`, the candidate is tried on its own for programs whose
        3 x 3 convolutions that F(4x4) takes carry at least 0.2 GFLOP at batch 1 (:meth:`winograd_auto`).

        Example:
            >>> from sampan.inference import Config, create_predictor
            >>> config = Config("out/resnet18")                 # doctest: +SKIP
            >>> config.enable_winograd()                        # doctest: +SKIP
            >>> print(create_predictor(config).report())        # doctest: +SKIP
        """
        self._winograd = True

    def disable_winograd(self) -> None:
        """Only the exported artifacts as they are, never the Winograd candidate (not even on its own)."""
        self._winograd = False

    def winograd_enabled(self) -> bool:
        """Whether :meth:`enable_winograd` was called (the candidate is then tried on any CPU)."""
        return self._winograd is True

    def winograd_auto(self) -> bool:
        """True until :meth:`enable_winograd` or :meth:`disable_winograd` is called: the predictor then tries
        ``inductor-winograd`` where :func:`sampan.inference.winograd.auto_refusal` finds nothing against it
        (a network with heavy 3 x 3 convolutions, such as resnet18, and the F(4 x 4) kernel built here)."""
        return self._winograd is None

    # -- backend and warm-up -----------------------------------------------------------------------
    def set_backend(self, backend: Backend | str) -> None:
        """``"auto"`` (the fastest verified artifact of the prefix for the device; the file itself when ``model_path``
        names one), ``"pt2"`` (exported program), ``"aoti"`` or ``"onnxruntime"``."""
        key = _ALIASES.get(str(backend).lower())
        if key is None:
            raise ValueError(bad_argument("backend", backend, "one of 'auto', 'pt2', 'aoti', 'onnxruntime'"))
        self._backend = key

    @property
    def backend(self) -> str:
        return self._backend

    def set_warmup(self, steps: int) -> None:
        """Runs the predictor ``steps`` times on a sample when it is created (default 2)."""
        check_int("steps", steps, minimum=0, fix="pass an int such as steps=2, or steps=0 for no warm-up")
        self._warmup = steps

    @property
    def warmup_steps(self) -> int:
        return self._warmup

    def summary(self) -> str:
        return (f"model: {os.fspath(self.prefix)}, device: {self.device}, backend: {self._backend}, "
                f"cpu threads: {self._threads or 'default'}, warm-up steps: {self._warmup}, "
                f"bf16: {'on' if self.mkldnn_bfloat16_enabled() else 'off'}, "
                f"winograd: {'auto' if self.winograd_auto() else 'on' if self.winograd_enabled() else 'off'}")


_PADDLE_SUFFIXES = (".pdiparams", ".pdmodel")


def _stem(path: str | os.PathLike) -> str:
    """``out/lenet`` for ``out/lenet.pt2``, ``out/lenet.pdiparams``, ``out/lenet.pdmodel``, ``out/lenet``."""
    text = os.fspath(art.prefix_of(path))
    for suffix in _PADDLE_SUFFIXES:
        if text.endswith(suffix):
            return os.path.normpath(text[: -len(suffix)])
    return os.path.normpath(text)
