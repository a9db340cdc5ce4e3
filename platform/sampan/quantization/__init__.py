"""Quantization: dynamic int8 weights, static int8 (PTQ) and quantization-aware training (QAT).

* :func:`quantize_dynamic` — int8 weights for Linear / LSTM / GRU; deploy with
  :func:`export_onnx`, which writes the int8 ONNX layout that ONNX Runtime runs fastest for the
  model (int8 kernels where they beat fp32, else int8 weights on fp32 kernels);
  :func:`layout_report` says which and why.
* :class:`PTQ` — ``quantize`` -> calibrate -> ``convert``: int8 weights and activations
  (torchao pt2e, ``X86InductorQuantizer``), for convolutional networks.
* :class:`QAT` — ``quantize`` -> train with ``sampan.Model.fit`` -> ``convert``.
* :func:`compile_int8` — run a quantized model on int8 kernels in torch itself (inductor lowers
  it to oneDNN / ``torch._int_mm`` int8 GEMMs and convolutions): the reference models above
  dequantize on every call and are slower than fp32 in eager torch; compiled, they are faster.
* :func:`sensitivity` — which layers lose most when quantized; keep them in float with
  ``skip=[...]`` / ``QuantConfig(skip=[...])``.

``torch.ao.quantization`` is deprecated and not used. Mirrors ``paddle.quantization``.

Example:
    >>> import torch, sampan
    >>> net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    >>> qnet = sampan.quantization.quantize_dynamic(net)
    >>> qnet[0].weight_int8.dtype
    torch.int8
"""
from __future__ import annotations

from sampan.pruning.report import CompressionReport, compression_report
from sampan.quantization.compiled import Int8Compiled, compile_int8
from sampan.quantization.config import QuantConfig
from sampan.quantization.dynamic import Int8Linear, Int8RNN, dequantize, quantize_dynamic
from sampan.quantization.export import OnnxModel, export_onnx, layout_report
from sampan.quantization.sensitivity import sensitivity
from sampan.quantization.static import PTQ, QAT

__all__ = [
    "CompressionReport",
    "Int8Compiled",
    "Int8Linear",
    "Int8RNN",
    "OnnxModel",
    "PTQ",
    "QAT",
    "QuantConfig",
    "compile_int8",
    "compression_report",
    "dequantize",
    "export_onnx",
    "layout_report",
    "quantize_dynamic",
    "sensitivity",
]
