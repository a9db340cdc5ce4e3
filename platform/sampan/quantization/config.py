"""``QuantConfig``: what to quantize and what to keep in float."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from sampan.errors import bad_argument, check_int


@dataclass(frozen=True)
class QuantConfig:
    """Settings shared by :class:`~sampan.quantization.PTQ` and :class:`~sampan.quantization.QAT`.

    Args:
        skip: layer names (``"fc3"``) or layer types (``torch.nn.Linear``) kept in float: put the
            layers that :func:`~sampan.quantization.sensitivity` ranks most sensitive here.
        calibration_batches: how many batches :meth:`PTQ.calibrate` reads at most.
        weight_bits: 8, or 7 for weights in -64..63. ``None`` (the default) picks 7 on a CPU without
            VNNI (AVX2-only x86, many AMD EPYC), whose int8 kernels saturate on full 8-bit weights
            (``compile_int8`` would then disagree with the model), and 8 elsewhere. A model quantized
            with 7 bits runs correctly everywhere; one with 8 bits runs best on a CPU with VNNI.

    Example:
        >>> from sampan.quantization import QuantConfig
        >>> QuantConfig(skip=["fc3"]).skip
        ('fc3',)
    """

    skip: Sequence[Any] = ()
    calibration_batches: int = 32
    weight_bits: int | None = None

    def __post_init__(self):
        skip = self.skip
        if skip is None:
            skip = ()
        elif isinstance(skip, (str, type)):  # one name or type: a string would otherwise split into letters
            skip = (skip,)
        try:
            object.__setattr__(self, "skip", tuple(skip))
        except TypeError:
            raise TypeError(bad_argument("skip", skip, "a list of layer names or layer types",
                                         "write skip=['fc3', torch.nn.LSTM]")) from None
        check_int("calibration_batches", self.calibration_batches, fix="pass e.g. calibration_batches=32")
        if self.weight_bits not in (None, 7, 8):
            raise ValueError(bad_argument("weight_bits", self.weight_bits, "7, 8 or None (chosen for this CPU)"))
