"""The int8 ONNX layouts :func:`~sampan.quantization.export_onnx` can write, as graph rewrites.

Every layout starts from the model's *float graph*: its weights on the int8 grid, stored as float
initializers (for a pt2e model: its Q/DQ export with the activation pairs removed and the weight
DequantizeLinear nodes folded). ``weights`` maps each int8 initializer to its values, scales and
channel axis.

* ``qdq``: the pt2e export as is; ONNX Runtime fuses its QuantizeLinear / DequantizeLinear pairs
  into QLinearConv / QGemm (int8 activations with the calibrated scales).
* ``dynamic``: Linear layers as ONNX Runtime's dynamic int8 ``MatMulInteger`` (activations
  rounded to int8 on every call); any other int8 weight as in ``weight_only``.
* ``weight_only``: int8 weight initializers, turned back into float by ``Cast`` and ``Mul``
  (per-channel scales). ONNX Runtime folds those constant nodes when it loads the session, so the
  model runs the fp32 kernels from a file about 4x smaller. A weight ``DequantizeLinear`` would
  not do: ONNX Runtime keeps it for its Q/DQ fusions and runs it on every call (1.65x fp32 for LeNet).
"""
from __future__ import annotations

import copy
import os
from pathlib import Path

import numpy as np

from sampan.utils.imports import require

Weight = tuple  # (int8 values, float32 scales, channel axis or None for one scale)
MATMULS = ("MatMul", "Gemm")


def _consumers(graph) -> dict[str, list]:
    users: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            users.setdefault(name, []).append(node)
    return users


def _attr(node, name: str, default: int) -> int:
    return next((a.i for a in node.attribute if a.name == name), default)


def _rename_inputs(graph, rename: dict[str, str]) -> None:
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in rename:
                node.input[i] = rename[name]


def _drop_unused_initializers(graph) -> None:
    used = {name for node in graph.node for name in node.input} | {o.name for o in graph.output}
    for init in [i for i in graph.initializer if i.name not in used]:
        graph.initializer.remove(init)


def _scales_for(values: np.ndarray, scales: np.ndarray, axis: int | None) -> np.ndarray:
    """float32 ``scales`` shaped to broadcast over ``values`` along ``axis`` (a scalar for one scale)."""
    shape = [1] * values.ndim
    if axis is not None:
        shape[axis] = scales.size
    return scales.astype(np.float32).reshape(shape if axis is not None else ())


def dequantized(values: np.ndarray, scales: np.ndarray, axis: int | None) -> np.ndarray:
    return values.astype(np.float32) * _scales_for(values, scales, axis)


def float_graph_of_qdq(qdq):
    """The float graph of a pt2e Q/DQ export, and its int8 weights (values and scales exactly as exported)."""
    numpy_helper = require("onnx").numpy_helper
    model = copy.deepcopy(qdq)
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    users, outputs = _consumers(graph), {o.name for o in graph.output}
    drop, rename, weights = [], {}, {}
    for node in graph.node:
        if node.op_type == "QuantizeLinear" and node.input[0] not in inits and node.output[0] not in outputs:
            pairs = users.get(node.output[0], [])
            if pairs and all(d.op_type == "DequantizeLinear" and d.output[0] not in outputs for d in pairs):
                drop += [node, *pairs]
                rename.update({d.output[0]: node.input[0] for d in pairs})
        elif node.op_type == "DequantizeLinear" and node.input[0] in inits:
            values = numpy_helper.to_array(inits[node.input[0]])
            scales = numpy_helper.to_array(inits[node.input[1]])
            zero = numpy_helper.to_array(inits[node.input[2]]) if len(node.input) > 2 and node.input[2] else 0
            if values.dtype == np.int8 and not np.any(zero):  # symmetric int8: what Sampan's quantizers make
                weights[node.output[0]] = (values, scales, _attr(node, "axis", 1) if scales.ndim else None)
                drop.append(node)
    for node in drop:
        graph.node.remove(node)
    _rename_inputs(graph, rename)
    for name, (values, scales, axis) in weights.items():
        graph.initializer.append(numpy_helper.from_array(dequantized(values, scales, axis), name))
    _drop_unused_initializers(graph)
    return model, weights


def input_ranges(qdq) -> dict[str, tuple[float, float]]:
    """The range each graph input was calibrated to (its QuantizeLinear's scale and zero point)."""
    numpy_helper = require("onnx").numpy_helper
    graph = qdq.graph
    inits = {i.name: i for i in graph.initializer}
    inputs = {i.name for i in graph.input}
    ranges = {}
    for node in graph.node:
        if node.op_type == "QuantizeLinear" and node.input[0] in inputs and len(node.input) > 2:
            scale = float(numpy_helper.to_array(inits[node.input[1]]))
            zero = numpy_helper.to_array(inits[node.input[2]])
            info = np.iinfo(zero.dtype)
            ranges[node.input[0]] = ((info.min - float(zero)) * scale, (info.max - float(zero)) * scale)
    return ranges


def _channel_axis(node, ndim: int) -> int:
    if node.op_type == "Gemm":
        return 0 if _attr(node, "transB", 0) else 1
    if node.op_type == "MatMul":
        return ndim - 1
    return 0  # Conv: output channels first


def weights_of(graph_model, names: set[str]) -> dict[str, Weight]:
    """Symmetric per-channel int8 of the float initializers ``names`` (weights already on that grid
    come back as the same int8 values)."""
    numpy_helper = require("onnx").numpy_helper
    graph = graph_model.graph
    users = _consumers(graph)
    weights = {}
    for init in graph.initializer:
        if init.name in names and users.get(init.name):
            w = numpy_helper.to_array(init).astype(np.float32)
            axis = _channel_axis(users[init.name][0], w.ndim)
            peak = np.moveaxis(np.abs(w), axis, 0).reshape(w.shape[axis], -1).max(1)
            scales = (np.maximum(peak, 1e-12) / 127.0).astype(np.float32)
            shape = [1] * w.ndim
            shape[axis] = -1
            values = np.clip(np.round(w / scales.reshape(shape)), -127, 127).astype(np.int8)
            weights[init.name] = (values, scales, axis)
    return weights


def weight_only(float_model, weights: dict[str, Weight]):
    """Each int8 weight as an int8 initializer + Cast + Mul, which ONNX Runtime folds at session load."""
    onnx = require("onnx")
    model = copy.deepcopy(float_model)
    graph = model.graph
    present = {i.name for i in graph.initializer}
    nodes = []
    for name, (values, scales, axis) in weights.items():
        if name not in present:
            continue
        graph.initializer.append(onnx.numpy_helper.from_array(values, f"{name}__int8"))
        graph.initializer.append(onnx.numpy_helper.from_array(_scales_for(values, scales, axis), f"{name}__scale"))
        nodes += [onnx.helper.make_node("Cast", [f"{name}__int8"], [f"{name}__float"], to=onnx.TensorProto.FLOAT,
                                        name=f"{name}__cast"),
                  onnx.helper.make_node("Mul", [f"{name}__float", f"{name}__scale"], [name], name=f"{name}__mul")]
    for init in [i for i in graph.initializer if i.name in weights]:
        graph.initializer.remove(init)
    for node in reversed(nodes):  # constants first: the graph stays topologically sorted
        graph.node.insert(0, node)
    return model


def cast_nodes(model) -> set[str]:
    """Names of the Cast nodes :func:`weight_only` added (gone from the graph once ONNX Runtime folded them)."""
    return {n.name for n in model.graph.node if n.op_type == "Cast" and n.name.endswith("__cast")}


def matmul_nodes(model, weight_names: set[str]) -> list[str]:
    """MatMul / Gemm nodes whose weight initializer is one of ``weight_names``."""
    return [n.name for n in model.graph.node if n.op_type in MATMULS and any(i in weight_names for i in n.input[1:])]


def dynamic(float_model, weights: dict[str, Weight], folder: Path):
    """ONNX Runtime's dynamic int8 ``MatMulInteger`` for the Linear layers, ``weight_only`` for the rest;
    None when no int8 weight feeds a MatMul / Gemm."""
    onnx = require("onnx")
    quantization = require("onnxruntime.quantization")
    nodes = matmul_nodes(float_model, set(weights))
    if not nodes:
        return None
    source, target = folder / "float.onnx", folder / "dynamic.onnx"
    onnx.save(float_model, os.fspath(source))
    # ONNX Runtime first splits a Gemm into `<name>_MatMul` + Add, then matches the names
    names = nodes + [f"{n}_MatMul" for n in nodes]
    quantization.quantize_dynamic(os.fspath(source), os.fspath(target), nodes_to_quantize=names,
                                  weight_type=quantization.QuantType.QInt8, per_channel=False,
                                  reduce_range=True)  # 7-bit weights: no u8 x s8 saturation
    model = onnx.load(os.fspath(target))
    done = sum(n.op_type == "MatMulInteger" for n in model.graph.node)
    assert done == len(nodes), f"ONNX Runtime quantized {done} of {len(nodes)} MatMul nodes"
    return weight_only(model, weights)
