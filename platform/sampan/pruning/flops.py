"""Parameters and FLOPs of a network (``paddle.flops``): the counting lives in :mod:`sampan.utils.flops`,
shared with ``sampan.summary``, so both agree (quantized models included)."""
from sampan.utils.flops import count_params, flops

__all__ = ["count_params", "flops"]
