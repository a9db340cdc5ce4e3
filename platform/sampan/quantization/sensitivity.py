"""Which layers lose most when quantized: each layer quantized alone, the rest kept in float.

The quantization counterpart of :func:`sampan.pruning.sensitivity` (PaddleSlim's
``analysis_qat`` / "quant sensitivity"). Put the top of the ranking in ``QuantConfig(skip=...)``
or ``quantize_dynamic(skip=...)``.
"""
from __future__ import annotations

import copy
import itertools
from typing import Any, Callable, Iterable, Literal

import torch
from torch import nn

from sampan.errors import bad_argument, check_int
from sampan.pruning._checks import as_names, check_eval_fn, check_layer_name, example_inputs as _example_inputs, score
from sampan.pruning.sensitivity import SensitivityTable
from sampan.quantization._pt2e import drop_unused_state, export_for_quantization, pt2e, quiet_annotation, run_batch
from sampan.quantization.dynamic import DYNAMIC_TYPES, quantize_dynamic
from sampan.utils.modes import eval_mode

STATIC_TYPES = (nn.Conv2d, nn.Linear)


def _layers(model: nn.Module, kinds: tuple, layers: Iterable[str] | None) -> list[str]:
    found = [n for n, m in model.named_modules() if n and type(m) in kinds]
    if not found:
        raise ValueError(bad_argument("model", f"<{type(model).__name__} without {[k.__name__ for k in kinds]} "
                                      "layers>", "a model with layers to quantize",
                                      None if nn.Conv2d in kinds else "use method='static' for Conv2d layers"))
    if layers is None:
        return found
    chosen = list(as_names(layers))
    for name in chosen:
        check_layer_name("layers", name, found)
    return chosen


def _calibration_batches(calib_data: Iterable[Any], count: int) -> list[Any]:
    """The first ``count`` batches of ``calib_data``, read once: every layer calibrates on the same ones,
    even when ``calib_data`` is an iterator or a generator."""
    check_int("calibration_batches", count)
    try:
        batches = list(itertools.islice(iter(calib_data), count))
    except TypeError:
        raise TypeError(bad_argument("calib_data", calib_data, "an iterable of batches (tensors or tuples)",
                                     "pass calib_data=DataLoader(val_set, batch_size=32)")) from None
    if not batches:
        raise ValueError(bad_argument("calib_data", calib_data, "at least one calibration batch",
                                      "pass calib_data=DataLoader(val_set, batch_size=32), not an empty or "
                                      "exhausted iterator"))
    return batches


def _static_one(graph: torch.fx.GraphModule, layer: str, batches: list[Any]) -> nn.Module:
    ns = pt2e()
    quantizer = ns.Quantizer()
    quantizer.set_module_name_qconfig(layer, ns.default_config())
    with quiet_annotation():
        observed = ns.prepare(copy.deepcopy(graph), quantizer)
    with torch.no_grad():
        for batch in batches:
            run_batch(observed, batch, argument="calib_data", source="sensitivity(example_inputs=...)")
    return drop_unused_state(ns.convert(observed))


def sensitivity(model: nn.Module, eval_fn: Callable[[nn.Module], float], *,
                method: Literal["dynamic", "static"] = "dynamic", calib_data: Iterable[Any] | None = None,
                example_inputs: Any = None, input_spec: Any = None, layers: Iterable[str] | None = None,
                calibration_batches: int = 8) -> SensitivityTable:
    """Quantizes one layer at a time and records how much ``eval_fn`` drops.

    Args:
        model: the trained float network (not modified).
        eval_fn: ``eval_fn(model) -> float``, higher is better.
        method: ``"dynamic"`` (int8 weights of Linear / LSTM / GRU, as :func:`quantize_dynamic`) or
            ``"static"`` (int8 weights and activations of Conv2d / Linear, as :class:`PTQ`).
        calib_data: batches for static calibration (a ``DataLoader``, a list of tensors, or an iterator:
            the first ``calibration_batches`` are read once and every layer calibrates on them).
        example_inputs / input_spec: inputs for ``torch.export`` (static only).
        layers: only these layers (default: every quantizable one).
        calibration_batches: how many batches of ``calib_data`` to calibrate on.

    Returns:
        A :class:`~sampan.pruning.SensitivityTable` with ``losses[layer] == {"int8": loss}``;
        ``.ranked()`` lists the most sensitive first.

    Example:
        >>> table = sensitivity(net, lambda m: accuracy(m, val))  # doctest: +SKIP
        >>> qnet = quantize_dynamic(net, skip=[table.ranked()[0][0]])  # doctest: +SKIP
    """
    if not isinstance(model, nn.Module):
        raise TypeError(bad_argument("model", model, "a torch.nn.Module"))
    check_eval_fn(eval_fn)
    if method not in ("dynamic", "static"):
        raise ValueError(bad_argument("method", method, "'dynamic' or 'static'"))
    baseline = score(eval_fn, model, baseline=True)
    table = SensitivityTable(baseline, kind="quantize")
    if method == "dynamic":
        for layer in _layers(model, DYNAMIC_TYPES, layers):
            others = [n for n, m in model.named_modules() if n and n != layer and type(m) in DYNAMIC_TYPES]
            table.losses[layer] = {"int8": baseline - score(eval_fn, quantize_dynamic(model, skip=others))}
        return table
    if calib_data is None:
        raise ValueError(bad_argument("calib_data", None, "calibration batches for method='static'",
                                      "pass calib_data=DataLoader(val_set, batch_size=32)"))
    batches = _calibration_batches(calib_data, calibration_batches)
    inputs = _example_inputs(model, example_inputs, input_spec, what="static quantization")
    with eval_mode(model):
        graph = export_for_quantization(model, inputs)
    for layer in _layers(model, STATIC_TYPES, layers):
        qmodel = _static_one(graph, layer, batches)
        table.losses[layer] = {"int8": baseline - score(eval_fn, qmodel)}
    return table
