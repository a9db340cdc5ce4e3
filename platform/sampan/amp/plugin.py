"""The AMP precision plugin that ``Model.prepare(amp=...)`` puts into the training loop.

Every hook is the torch idiom: ``torch.autocast`` around the forward pass,
``GradScaler.scale(loss).backward()``, ``unscale_`` before clipping,
``scaler.step`` + ``scaler.update``. For bf16 the scaler is disabled
(``enabled=False`` turns its methods into pass-throughs), so one code path
serves both dtypes.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import warnings
from typing import Any, Iterable, Literal

import torch

from sampan.amp.autocast import as_dtype, auto_cast, check_level
from sampan.amp.scaler import GradScaler, decorate, load_master_state, master_state
from sampan.errors import bad_argument
from sampan.amp.precision import PrecisionPlugin

_SHORT = {"bf16": "bfloat16", "fp16": "float16", "bfloat16": "bfloat16", "float16": "float16"}


@dataclasses.dataclass
class AmpConfig:
    """Mixed-precision settings for ``Model.prepare(amp=AmpConfig(...))``.

    Args:
        dtype: ``"bfloat16"`` (CPU and CUDA; no loss scaling needed) or ``"float16"`` (CUDA; loss-scaled).
        level: ``"O1"`` autocast per op; ``"O2"`` also makes parameters half with fp32 master weights.
        custom_white_list: op names to run in ``dtype`` although autocast keeps them in fp32.
        custom_black_list: op names, module class names, or qualified module names of the network
            (``"head.norm"``) to keep in fp32.
        init_loss_scaling, incr_every_n_steps: the fp16 loss scaler's start value and growth interval.
        master_weight: keep fp32 master weights at O2.
        doctor: diagnose a non-finite loss (see :class:`sampan.amp.NanDoctor`).

    Example:
        >>> from sampan.amp import AmpConfig
        >>> cfg = AmpConfig(dtype="float16", custom_black_list=["softmax"])
    """

    dtype: Literal["bfloat16", "float16", "bf16", "fp16"] = "bfloat16"
    level: Literal["O1", "O2"] = "O1"
    custom_white_list: tuple = ()
    custom_black_list: tuple = ()
    init_loss_scaling: float = 2.0**16
    incr_every_n_steps: int = 2000
    master_weight: bool = True
    doctor: bool = True

    def __post_init__(self):
        self.dtype = _SHORT.get(str(self.dtype).replace("torch.", ""), self.dtype)
        as_dtype(self.dtype)
        check_level(self.level)
        self.custom_white_list = tuple(self.custom_white_list or ())
        self.custom_black_list = tuple(self.custom_black_list or ())


class AmpPrecision(PrecisionPlugin):
    """Autocast + (for fp16) dynamic loss scaling, + (at O2) half parameters with fp32 masters."""

    def __init__(self, config: AmpConfig, device: torch.device):
        self.config = config
        self.device = torch.device(device)
        self.dtype = as_dtype(config.dtype)
        self.scaler = GradScaler(enable=self.dtype == torch.float16, init_loss_scaling=config.init_loss_scaling,
                                 incr_every_n_steps=config.incr_every_n_steps, device=self.device.type)
        self.skipped_steps = 0
        self.optimizer_steps = 0
        self.scale_history: collections.deque = collections.deque(maxlen=32)
        if self.scaler.is_enabled():
            self.scale_history.append((0, float(config.init_loss_scaling)))
        self._black: tuple = config.custom_black_list
        self._optimizer = None
        self.last_inputs: list | None = None  # the last training batch's inputs, for the NaN doctor's replay

    def autocast(self) -> contextlib.AbstractContextManager:
        return auto_cast(True, self.config.custom_white_list, self._black, self.config.level, self.dtype,
                         device_type=self.device.type)

    def setup(self, network: torch.nn.Module, optimizer: Any) -> tuple[torch.nn.Module, Any]:
        modules = dict(network.named_modules())
        self._black = tuple(modules[e] if isinstance(e, str) and e in modules else e
                            for e in self.config.custom_black_list)
        if self.config.level == "O2":
            network.to(_placement(self.device))
            decorate(network, optimizer, "O2", self.dtype, master_weight=self.config.master_weight)
        self._optimizer = optimizer
        return network, optimizer

    def convert_input(self, inputs: list) -> list:
        self.last_inputs = inputs
        return inputs

    def backward(self, loss: torch.Tensor) -> None:
        self.scaler.scale(loss).backward()

    def step(self, optimizer: torch.optim.Optimizer, params: Iterable[torch.Tensor], grad_clip: float | None) -> bool:
        if grad_clip is not None:
            self.scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(params, grad_clip)
        before = self.scaler.get_scale() if self.scaler.is_enabled() else 1.0
        self.scaler.step(optimizer)
        self.scaler.update()
        self.optimizer_steps += 1
        if not self.scaler.is_enabled():
            return True
        after = self.scaler.get_scale()
        if after != before:
            self.scale_history.append((self.optimizer_steps, after))
        skipped = after < before
        self.skipped_steps += int(skipped)
        return not skipped

    def logs(self) -> dict:
        scale = self.scaler.get_scale() if self.scaler.is_enabled() else 1.0
        return {"loss_scale": float(scale), "skipped_steps": self.skipped_steps}

    def nan_check(self) -> Any:
        from sampan.amp.doctor import NanDoctor

        return NanDoctor(self) if self.config.doctor else super().nan_check()

    def state_dict(self) -> dict:
        masters = master_state(self._optimizer) if self._optimizer is not None else []
        return {"scaler": self.scaler.state_dict(), "skipped_steps": self.skipped_steps,
                "optimizer_steps": self.optimizer_steps, "masters": masters}

    def load_state_dict(self, state: dict) -> None:
        if state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self.skipped_steps = int(state.get("skipped_steps", 0))
        self.optimizer_steps = int(state.get("optimizer_steps", 0))
        if self._optimizer is not None:
            load_master_state(self._optimizer, state.get("masters") or [])


def cpu_has_native_bf16() -> bool:
    """Whether oneDNN has native bf16 kernels here (AVX-512 BF16 or AMX); without them bf16 is emulated."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def _placement(device: torch.device) -> torch.device:
    """The device this process trains on (under torchrun, CUDA device ``LOCAL_RANK``)."""
    if device.type == "cuda" and device.index is None and "LOCAL_RANK" in os.environ:
        return torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    return device


_PADDLE_KEYS = {"use_pure_fp16": "level='O2'", "use_fp16_guard": "custom_black_list=[...] (no fp16 guard in eager)",
                "incr_ratio": "sampan.amp.GradScaler(incr_ratio=...) in your own loop",
                "decr_ratio": "sampan.amp.GradScaler(decr_ratio=...) in your own loop",
                "decr_every_n_nan_or_inf": "sampan.amp.GradScaler(...) in your own loop",
                "use_dynamic_loss_scaling": "dtype='bfloat16' (it needs no loss scaling)",
                "custom_black_varnames": "custom_black_list=['module.name']"}


def _checked_keys(amp: dict) -> dict:
    """Refuses keys ``AmpConfig`` lacks with a ValueError naming ``amp`` and Sampan's spelling of Paddle's keys."""
    known = [f.name for f in dataclasses.fields(AmpConfig)]
    unknown = [k for k in amp if k not in known]
    if unknown:
        spelled = "; ".join(f"{k} -> {_PADDLE_KEYS[k]}" for k in unknown if k in _PADDLE_KEYS)
        raise ValueError(bad_argument("amp", amp, f"a dict whose keys are among {known}",
                                      f"unknown key(s) {unknown}" + (f"; in Sampan write {spelled}" if spelled else "")
                                      + "; see docs/MIGRATING_FROM_PADDLE.md (Mixed precision)"))
    return amp


def make_precision(amp: Any, device: torch.device) -> PrecisionPlugin:
    """``"bf16"``, ``"fp16"``, ``True`` (bf16), a dict of :class:`AmpConfig` fields or an ``AmpConfig``."""
    if isinstance(amp, PrecisionPlugin):
        return amp
    if amp is True:
        amp = "bf16"
    if isinstance(amp, str) and amp.lower() in _SHORT:
        config = AmpConfig(dtype=_SHORT[amp.lower()])
    elif isinstance(amp, str) and amp.upper() in ("O1", "O2"):
        config = AmpConfig(level=amp.upper())
    elif isinstance(amp, dict):
        config = AmpConfig(**_checked_keys(amp))
    elif isinstance(amp, AmpConfig):
        config = amp
    else:
        raise ValueError(bad_argument("amp", amp, "None, 'bf16', 'fp16' or sampan.amp.AmpConfig(...)",
                                      "write amp='bf16' (CPU or recent GPUs) or amp='fp16' (CUDA)"))
    device = torch.device(device)
    if device.type == "cuda" and config.dtype == "bfloat16" and not torch.cuda.is_bf16_supported():
        raise ValueError(bad_argument("amp", amp, "'fp16' on this GPU", "this GPU has no bfloat16 support"))
    if device.type == "cpu" and config.dtype == "bfloat16" and not cpu_has_native_bf16():
        warnings.warn("This CPU has no native bfloat16 (AVX-512 BF16 or AMX), so amp='bf16' runs matmuls in an "
                      "emulated path, slower than fp32 here. It still shows bf16's numerics; for speed use a "
                      "CPU with AVX-512 BF16 or a GPU.", RuntimeWarning, stacklevel=3)
    return AmpPrecision(config, device)
