"""The torchao pt2e pieces Sampan uses, imported once, quietly, with an install hint when missing."""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import types
import warnings
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from sampan.errors import bad_argument
from sampan.utils.imports import require

_CACHE: dict[str, SimpleNamespace] = {}


def pt2e() -> SimpleNamespace:
    """``prepare_pt2e``, ``prepare_qat_pt2e``, ``convert_pt2e``, the X86 quantizer and helpers."""
    if "ns" not in _CACHE:
        logger = logging.getLogger("torch.utils._pytree")
        level = logger.level
        logger.setLevel(logging.ERROR)  # torchao registers an enum the way torch now warns about
        try:
            require("torchao")
            from torchao.quantization import pt2e as base
            from torchao.quantization.pt2e import quantize_pt2e as qp
            from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as x86
        finally:
            logger.setLevel(level)

        def default_config(is_qat: bool = False, weight_bits: int | None = None):
            config = x86.get_default_x86_inductor_quantization_config(is_qat=is_qat)
            if (weight_bits or (7 if reduce_range() else 8)) == 8:
                return config
            # 7-bit weights, not activations: ONNX's QuantizeLinear clamps activations to the full uint8
            # range, so a reduced activation range would make the exported model disagree with torch
            weight = dataclasses.replace(config.weight, quant_min=-64, quant_max=63)
            return dataclasses.replace(config, weight=weight)

        _CACHE["ns"] = SimpleNamespace(
            prepare=qp.prepare_pt2e, prepare_qat=qp.prepare_qat_pt2e, convert=qp.convert_pt2e,
            Quantizer=x86.X86InductorQuantizer, default_config=default_config,
            to_train=base.move_exported_model_to_train, to_eval=base.move_exported_model_to_eval)
    return _CACHE["ns"]


# oneDNN's ISA levels whose int8 kernels have no VNNI (``vpmaddubsw`` instead): a cap at one of these
# (``ONEDNN_MAX_CPU_ISA=AVX2``, as when emulating an AVX2-only CPU) makes a VNNI CPU behave like one without
_NO_VNNI_ISAS = frozenset({"SSE41", "AVX", "AVX2", "AVX512_CORE"})


def int8_vnni() -> bool:
    """Whether the x86 int8 kernels here multiply with VNNI: the CPU has it and oneDNN is not held below it."""
    if not torch.cpu._is_vnni_supported():
        return False
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA")  # oneDNN's own order
    return (cap or "").strip().upper() not in _NO_VNNI_ISAS


def reduce_range() -> bool:
    """Whether int8 weights here use 7 bits (-64..63; torchao's dynamic flow also halves activations).

    Without VNNI (AVX2-only CPUs such as many AMD EPYC, or oneDNN capped below it by
    ``ONEDNN_MAX_CPU_ISA``), oneDNN's and inductor's x86 int8 kernels multiply u8 x s8 pairs with
    ``vpmaddubsw``, whose 16-bit sums saturate: full 8-bit ranges gave a dynamic int8 MLP 30 % error
    and a 1.5-point accuracy drop there (40 % under ``ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2``
    on an AVX-512 VNNI CPU). Halving one side keeps every pair sum in 16 bits (torchao's
    ``should_reduce_range``; PyTorch's fbgemm qconfig does the same).
    """
    return not int8_vnni()


def allow_train_eval(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Lets ``gm.train()`` / ``gm.eval()`` switch the exported BatchNorm and Dropout ops *and* the
    ``training`` flags (torchao's own helper leaves the flags as they were)."""
    ns = pt2e()

    def train(self, mode: bool = True):
        (ns.to_train if mode else ns.to_eval)(self)
        return nn.Module.train(self, mode)

    gm.train = types.MethodType(train, gm)
    gm.eval = types.MethodType(lambda self: self.train(False), gm)
    return gm


@contextlib.contextmanager
def quiet_annotation():
    """Hides the X86 quantizer's note that a pooling next to a float (skipped) layer stays float."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"The input of \w+ is not quantized")
        yield


def export_for_quantization(model: nn.Module, inputs: tuple) -> torch.fx.GraphModule:
    """``torch.export`` with a dynamic batch dimension, returned as an (unlifted) GraphModule."""
    inputs = tuple(torch.cat([t, t]) if t.dim() and t.shape[0] == 1 else t for t in inputs)
    shapes = tuple({0: torch.export.Dim.AUTO} if t.dim() else None for t in inputs)
    return _split_reused_activations(torch.export.export(model, inputs, dynamic_shapes=shapes).module())


def _split_reused_activations(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Gives each call of an activation module used more than once (torchvision's ResNet blocks call
    ``self.relu`` twice) a source name of its own.

    The X86 quantizer groups nodes into patterns by the module that made them; two calls of one
    ReLU made one group with two outputs, which it refuses ("Input partition has more than one
    output node"). An activation module makes one node per call, so a node is a call.
    """
    calls: dict[str, list[torch.fx.Node]] = {}
    for node in gm.graph.nodes:
        stack = node.meta.get("nn_module_stack")
        if node.op == "call_function" and stack:
            fqn, cls = list(stack.values())[-1]
            kind = cls if isinstance(cls, str) else f"{cls.__module__}.{cls.__qualname__}"
            if kind.startswith("torch.nn.modules.activation."):
                calls.setdefault(fqn, []).append(node)
    for fqn, nodes in calls.items():
        for i, node in enumerate(nodes[1:], start=1):
            stack = dict(node.meta["nn_module_stack"])
            key, (_, cls) = list(stack.items())[-1]
            stack[key] = (f"{fqn}#{i}", cls)
            node.meta["nn_module_stack"] = stack
    return gm


def _input_shapes(gm: torch.fx.GraphModule) -> list[tuple]:
    """The shapes ``gm`` was exported for, the dynamic batch dimension written ``"N"``."""
    vals = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    return [tuple(d if isinstance(d, int) else "N" for d in v.shape) for v in vals if isinstance(v, torch.Tensor)]


def run_batch(observed: torch.fx.GraphModule, batch: Any, *, argument: str, source: str = "quantize()") -> None:
    """Runs one calibration batch (a tensor, or ``(inputs, labels)``) through ``observed``.

    A batch of the wrong shape fails inside ``torch.export``'s guards ("Guard failed: input.size()[1] == 1");
    this names ``argument`` and both shapes instead.
    """
    fix = f"pass a DataLoader (or a list) of batches shaped like the example inputs given to {source}"
    x = batch[0] if isinstance(batch, (list, tuple)) and batch else batch
    if not isinstance(x, torch.Tensor):
        raise TypeError(bad_argument(argument, f"<a batch of type {type(x).__name__}>",
                                     "batches that are tensors or (inputs, labels) pairs", fix))
    try:
        observed(x)
    except AssertionError as exc:
        if "Guard failed" not in str(exc):
            raise
        raise ValueError(bad_argument(argument, f"<a batch of shape {tuple(x.shape)}>",
                                      f"batches of shape {_input_shapes(observed) or '?'} (N: any batch size)",
                                      fix)) from exc


def drop_unused_state(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Deletes parameters and buffers the graph no longer reads (the float weights after convert)."""
    used = {n.target for n in gm.graph.nodes if n.op == "get_attr"}
    for name, _ in list(gm.named_parameters()) + list(gm.named_buffers()):
        if name not in used:
            owner_name, _, attr = name.rpartition(".")
            owner = gm.get_submodule(owner_name) if owner_name else gm
            delattr(owner, attr)
    gm.delete_all_unused_submodules()
    return gm
