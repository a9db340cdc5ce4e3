"""Automatic mixed precision (``paddle.amp``) on ``torch.amp``.

``auto_cast`` wraps ``torch.autocast`` (with Paddle's white / black lists),
``GradScaler`` is ``torch.amp.GradScaler`` accepting Paddle's argument names,
``decorate`` makes parameters half precision with fp32 master weights (O2).
``Model.prepare(amp="bf16" | "fp16" | AmpConfig(...))`` uses all three.

Example:
    >>> import torch, sampan
    >>> net = torch.nn.Linear(8, 2)
    >>> with sampan.amp.auto_cast(dtype="bfloat16", device_type="cpu"):
    ...     out = net(torch.randn(4, 8))
    >>> out.dtype
    torch.bfloat16
"""
from __future__ import annotations

from sampan.amp.autocast import auto_cast
from sampan.amp.doctor import AmpNonFiniteError, NanDoctor
from sampan.amp.plugin import AmpConfig, AmpPrecision
from sampan.amp.precision import PrecisionPlugin
from sampan.amp.scaler import GradScaler, decorate

__all__ = ["AmpConfig", "AmpNonFiniteError", "AmpPrecision", "GradScaler", "NanDoctor", "PrecisionPlugin", "auto_cast",
           "decorate"]
