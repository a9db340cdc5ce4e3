"""``QuantConfig``: what to quantize and what to keep in float."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from sampan.errors import bad_argument


@dataclass(frozen=True)
class QuantConfig:
    """Settings shared by :class:`~sampan.quantization.PTQ` and :class:`~sampan.quantization.QAT`.

    Args:
        skip: layer names (``"fc3"``) or layer types (``torch.nn.Linear``) kept in float: put the
            layers that :func:`~sampan.quantization.sensitivity` ranks most sensitive here.
        calibration_batches: how many batches :meth:`PTQ.calibrate` reads at most.

    Example:
        >>> QuantConfig(skip=["fc3"]).skip
        ('fc3',)
    """

    skip: Sequence[Any] = ()
    calibration_batches: int = 32

    def __post_init__(self):
        object.__setattr__(self, "skip", tuple(self.skip))
        if not isinstance(self.calibration_batches, int) or self.calibration_batches < 1:
            raise ValueError(bad_argument("calibration_batches", self.calibration_batches, "a positive int"))
