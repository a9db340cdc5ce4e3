"""A one-row int8 Linear for CPUs without VNNI: :func:`linear_w8`, the C++ kernel ``int8_gemv.cpp``.

At batch 1 a Linear layer is a matrix-vector product: each weight is read once and used once, so the time goes
to reading weights and to the fixed cost per call. PyTorch's fbgemm int8 Linear, which :func:`compile_int8` runs on
CPUs without VNNI, costs about 20 us per call at one row (10 us of it calling an op with a packed-weight object
from Python) and ran the ``sampan bench compress`` MLP at 0.78-1.02x fp32 on an AVX2-only AMD EPYC. This kernel
reads the int8 weights (a quarter of fp32's bytes) with the Linear's own per-row scales and multiplies them by the
input row rounded to int16 (``vpmaddwd``; steps of max|x| / 16383, an error below 3e-5 of max|x| where fbgemm
rounds activations to 7 bits): the weight-only reference model of :func:`~sampan.quantization.quantize_dynamic`
within about 1e-4 of its largest output (fbgemm: 2-3e-2). A ReLU after the layer runs in the same pass.
:func:`compile_int8` sends it calls of one or two rows (``GEMV_MAX_ROWS``; at two rows 0.38x fp32 against fbgemm's
0.49x), larger ones to fbgemm.

It is built once per machine on first use (about 10 s; :mod:`sampan.utils.cpp_kernels`) and needs a C++
compiler and AVX2; where either is missing, :func:`gemv_unavailable` says why and :func:`compile_int8` keeps
fbgemm for every batch.
"""
from __future__ import annotations

from pathlib import Path

import torch

_SOURCE = Path(__file__).with_name("int8_gemv.cpp")
_NAME = "sampan_int8_gemv_v1"  # torch's extension cache rebuilds it when the source changes
OP = "sampan_int8::linear_w8"


def _shape(x, w, scale, bias, relu):
    return x.new_empty((*x.shape[:-1], w.shape[0]))


def gemv_unavailable() -> str | None:
    """Why the int8 GEMV kernel cannot run here, or None once it is built and loaded (the first call builds it;
    the answer is kept for the process)."""
    from sampan.utils import cpp_kernels

    return cpp_kernels.load(_NAME, _SOURCE, OP, "the int8 GEMV kernel", _shape)


def linear_w8(x: torch.Tensor, weight_int8: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None,
              relu: bool = False) -> torch.Tensor:
    """``F.linear(x, weight_int8 * scale[:, None], bias)`` (then ReLU if ``relu``) without dequantizing the weights;
    each row of ``x`` is rounded to int16 steps of its largest magnitude / 16383 (in float where it holds NaN,
    infinity or only values below 1e-34).

    Args:
        x: float32 ``[..., in_features]``, on the CPU; rows are computed one after another.
        weight_int8: int8 ``[out_features, in_features]``.
        scale: one float per output row.
        bias: ``out_features`` floats, or None.
        relu: apply ``max(y, 0)`` in the same pass.

    Raises:
        RuntimeError: the kernel cannot run here (the message says why), or the arguments do not fit (it names the
            argument and the shape it needs).

    Example:
        >>> import torch
        >>> from sampan.quantization.gemv import linear_w8
        >>> _ = torch.manual_seed(0)
        >>> w = torch.randint(-127, 128, (32, 64), dtype=torch.int8)
        >>> s, x = torch.rand(32) / 100, torch.randn(1, 64)
        >>> y, ref = linear_w8(x, w, s), x @ (w.float() * s[:, None]).T  # doctest: +SKIP
        >>> bool((y - ref).abs().max() <= 2e-4 * ref.abs().max())  # doctest: +SKIP
        True
    """
    reason = gemv_unavailable()
    if reason is not None:
        raise RuntimeError(f"The int8 GEMV kernel cannot run here: {reason}. HINT: compile_int8(..., "
                           f"backend='fbgemm') runs fbgemm's int8 Linear instead.")
    return torch.ops.sampan_int8.linear_w8(x, weight_int8, scale, bias, relu)
