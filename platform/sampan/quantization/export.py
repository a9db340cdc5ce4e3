"""Deploy a quantized model: ONNX with int8 kernels for ONNX Runtime, served by ``sampan.inference``.

* A :func:`quantize_dynamic` model is exported in float through ``sampan.onnx.export`` and its
  Linear layers are then quantized by ONNX Runtime's ``quantize_dynamic`` (``MatMulInteger``
  kernels): the measured-fastest int8 path on CPU (see ``sampan bench compress``). Layers kept in
  float (the skip list) stay float in the ONNX file too. LSTM / GRU stay float in ONNX (their
  weights pass through reshaping ops there); they are int8 in the torch model and ``jit.save``.
* A :class:`PTQ` / :class:`QAT` model exports its QuantizeLinear / DequantizeLinear pairs as is.

``sampan.jit.save`` works on both kinds of quantized model unchanged (int8 weights in the ``.pt2``).
"""
from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from sampan.quantization.dynamic import Int8Linear, dequantize
from sampan.utils.imports import require
from sampan.utils.io import atomic_path

_MATMULS = {"MatMul", "Gemm"}


@contextlib.contextmanager
def _quiet_root_logger():
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # onnxruntime.quantization logs advice on the root logger
    try:
        yield
    finally:
        root.setLevel(level)


def _nodes_of(onnx_model, layers: set[str]) -> list[str]:
    """Names of MatMul / Gemm nodes whose weight initializer is ``<layer>.weight`` of one of ``layers``.

    The exporter names initializers after the parameters (``fc1.weight``, or ``fc1.weight_Transposed``
    once its optimizer pre-transposes them), which ties ONNX nodes to torch layers.
    """
    weights = {f"{layer}.weight" for layer in layers}
    nodes = []
    for node in onnx_model.graph.node:
        if node.op_type in _MATMULS and any(i.split("_Transposed")[0] in weights for i in node.input[1:]):
            nodes.append(node.name)
    return nodes


def _ort_quantize_dynamic(file: Path, layers: set[str]) -> list[str]:
    onnx = require("onnx")
    quantization = require("onnxruntime.quantization")
    nodes = _nodes_of(onnx.load(os.fspath(file)), layers)
    # ONNX Runtime first splits a Gemm into `<name>_MatMul` + Add, then matches the names
    names = nodes + [f"{n}_MatMul" for n in nodes]
    if nodes:
        with _quiet_root_logger(), atomic_path(file) as tmp:
            out = tmp.with_suffix(".q.onnx")
            try:
                quantization.quantize_dynamic(os.fspath(file), os.fspath(out), nodes_to_quantize=names,
                                              weight_type=quantization.QuantType.QInt8, per_channel=False,
                                              reduce_range=True)  # 7-bit weights: no u8 x s8 saturation
                out.replace(tmp)
            finally:
                out.unlink(missing_ok=True)
        done = sum(n.op_type == "MatMulInteger" for n in onnx.load(os.fspath(file)).graph.node)
        assert done == len(nodes), f"ONNX Runtime quantized {done} of {len(nodes)} MatMul nodes"
    return nodes


def _session(file: Path, *, reference: bool):
    ort = require("onnxruntime")
    options = ort.SessionOptions()
    if reference:  # no int8 kernel fusion: runs the Q/DQ graph exactly as torch's reference does
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(os.fspath(file), sess_options=options, providers=["CPUExecutionProvider"])


def _verify(model: nn.Module, file: Path, specs, atol: float, examples, *, reference: bool) -> dict:
    from sampan.jit._specs import example_inputs

    sample = tuple(examples) if examples is not None else example_inputs(specs, batch=3, seed=1)
    with torch.no_grad():
        expected = model(*sample)
    got = _session(file, reference=reference).run(None, {s.name: t.numpy() for s, t in zip(specs, sample)})[0]
    diff = float(np.abs(np.asarray(got) - expected.detach().numpy()).max())
    scale = float(expected.abs().max()) or 1.0
    if diff > atol * scale:
        from sampan.jit.save_load import ExportMismatchError
        raise ExportMismatchError(f"The int8 ONNX model disagrees with the quantized torch model by {diff:.3g} "
                                  f"(allowed {atol} x max |output| = {atol * scale:.3g}).", format="onnx",
                                  max_abs_diff=diff)
    return {"max_abs_diff": diff, "atol": atol * scale, "int8": True, "reference_kernels": reference}


def export_onnx(model: nn.Module, path: str | os.PathLike, input_spec: Sequence[Any], *, atol: float = 0.05,
                examples: Sequence[torch.Tensor] | None = None) -> Path:
    """Exports a quantized model to ``path.onnx`` with int8 kernels, ready for ``sampan.inference``.

    Args:
        model: from :func:`quantize_dynamic`, :meth:`PTQ.convert` or :meth:`QAT.convert`.
        path: prefix such as ``"out/lenet_int8"`` (``.onnx`` and ``.meta.json`` are written).
        input_spec: one ``sampan.InputSpec`` per input.
        atol: for a dynamic model, the allowed ONNX-vs-torch difference relative to the largest
            output (ONNX Runtime also rounds the activations to int8). A static model is checked
            with ONNX Runtime's graph optimizations off, where it must match torch to 1e-3.
        examples: real inputs for that check (default: random ones from ``input_spec``; a
            statically quantized model is only accurate inside the range it was calibrated on).

    Returns:
        The ``.onnx`` path.

    Example:
        >>> export_onnx(quantize_dynamic(net), "out/mlp_int8", [sampan.InputSpec([None, 64], name="x")])  # doctest: +SKIP
        >>> sampan.inference.create_predictor(sampan.inference.Config("out/mlp_int8")).run([x])  # doctest: +SKIP
    """
    from sampan.jit import _artifacts as art
    from sampan.jit._specs import require_specs
    from sampan.onnx import export

    specs = require_specs(input_spec, what="export_onnx")
    model.eval()
    quantized = {n for n, m in model.named_modules() if isinstance(m, Int8Linear)}
    if quantized:  # float export (checked exactly), then ONNX Runtime's int8 MatMuls
        file = export(dequantize(model), path, specs)
        _ort_quantize_dynamic(file, quantized)
        check = _verify(model, file, specs, atol, examples, reference=False)
    else:  # a pt2e model: its Q/DQ pairs export as they are; checked without ORT's int8 fusion, because
        # the fused int8 kernels round differently from torch's reference (accuracy shows their effect)
        file = export(model, path, specs, verify=False)
        check = _verify(model, file, specs, 1e-3, examples, reference=True)
    meta = art.read_metadata(art.prefix_of(file))
    art.record_artifact(art.prefix_of(file), "onnx", specs=specs, output_names=meta["outputs"], device="cpu",
                        check=check, weights=meta["weights"])
    return file


class OnnxModel:
    """Runs an ONNX file in ONNX Runtime on torch tensors; for side-by-side reports.

    Example:
        >>> fast = OnnxModel("out/mlp_int8.onnx"); fast(torch.randn(1, 64)).shape  # doctest: +SKIP
    """

    def __init__(self, path: str | os.PathLike, *, threads: int | None = None):
        from sampan.onnx.export import ort_session

        self.path = Path(path)
        self.session = ort_session(self.path, threads=threads)
        self.names = [i.name for i in self.session.get_inputs()]

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor:
        feeds = {n: t.detach().cpu().numpy() for n, t in zip(self.names, inputs)}
        return torch.from_numpy(self.session.run(None, feeds)[0])

    def size_bytes(self) -> int:
        return self.path.stat().st_size
