"""Static int8: post-training quantization (PTQ) with calibration, and quantization-aware training (QAT).

Built on torchao's pt2e flow (``torch.export`` -> ``prepare_pt2e`` / ``prepare_qat_pt2e`` ->
``convert_pt2e``) with the ``X86InductorQuantizer`` (int8 activations per tensor, int8 weights
per channel). The converted model keeps int8 weights (about 4x smaller on disk), runs in torch
and exports to ONNX as QuantizeLinear / DequantizeLinear pairs that ONNX Runtime runs.
Mirrors ``paddle.quantization.PTQ`` / ``QAT``.
"""
from __future__ import annotations

from typing import Any, Iterable

import torch
from torch import nn

from sampan.errors import bad_argument, check_int
from sampan.pruning._checks import example_inputs as _example_inputs, split_skip
from sampan.quantization._pt2e import (allow_train_eval, drop_unused_state, export_for_quantization, pt2e,
                                      quiet_annotation, run_batch)
from sampan.quantization.config import QuantConfig
from sampan.utils.modes import train_mode


def _check_observed(observed: Any) -> None:
    if not isinstance(observed, torch.fx.GraphModule):
        raise TypeError(bad_argument("observed", type(observed).__name__,
                                     "the model returned by quantize()", "call quantize() first"))


def _batches(data: Any) -> Iterable[Any]:
    """``data`` when it yields batches; a clear error for what yields something else when iterated."""
    fix = "pass data=DataLoader(dataset, batch_size=32), or a list of batches such as [x]"
    if isinstance(data, torch.Tensor):
        raise TypeError(bad_argument("data", f"<a tensor of shape {tuple(data.shape)}>",
                                     "an iterable of batches (iterating a tensor yields its rows, not batches)", fix))
    if isinstance(data, torch.utils.data.Dataset) and not isinstance(data, torch.utils.data.IterableDataset):
        raise TypeError(bad_argument("data", f"<{type(data).__name__}>",
                                     "an iterable of batches (a Dataset yields single samples, without a batch "
                                     "dimension)", fix))
    try:
        return iter(data)
    except TypeError:
        raise TypeError(bad_argument("data", data, "an iterable of batches (tensors or (inputs, labels) pairs)",
                                     fix)) from None


class PTQ:
    """Post-training static quantization: ``quantize`` -> calibrate on real data -> ``convert``.

    Args:
        config: a :class:`QuantConfig` (skip list, calibration batches).

    Example:
        >>> import torch
        >>> from sampan.quantization import PTQ, QuantConfig
        >>> from sampan.vision.models import LeNet
        >>> net = LeNet()
        >>> ptq = PTQ(QuantConfig(skip=["fc.2"]))  # LeNet's output layer stays float
        >>> observed = ptq.quantize(net, example_inputs=torch.randn(2, 1, 28, 28))  # doctest: +SKIP
        >>> _ = ptq.calibrate(observed, [torch.randn(8, 1, 28, 28)])              # doctest: +SKIP
        >>> int8_net = ptq.convert(observed)                                      # doctest: +SKIP
    """

    qat = False

    def __init__(self, config: QuantConfig | None = None):
        if config is not None and not isinstance(config, QuantConfig):
            raise TypeError(bad_argument("config", config, "a sampan.quantization.QuantConfig or None"))
        self.config = config or QuantConfig()

    def _quantizer(self, model: nn.Module):
        ns = pt2e()
        quantizer = ns.Quantizer()
        quantizer.set_global(ns.default_config(is_qat=self.qat, weight_bits=self.config.weight_bits))
        names, types = split_skip(self.config.skip, model, argument="config.skip")
        for name in sorted(names):
            quantizer.set_module_name_qconfig(name, None)
        for kind in types:
            quantizer.set_module_type_qconfig(kind, None)
        return quantizer

    def quantize(self, model: nn.Module, example_inputs: Any = None, *, input_spec: Any = None) -> torch.fx.GraphModule:
        """Exports ``model`` and inserts observers; run data through the result, then :meth:`convert`.

        Args:
            model: the trained float network (not modified).
            example_inputs: a tensor or tuple the model accepts (the batch dimension stays dynamic).
            input_spec: ``sampan.InputSpec`` (or a list) used when ``example_inputs`` is None.
        """
        if not isinstance(model, nn.Module):
            raise TypeError(bad_argument("model", model, "a torch.nn.Module"))
        inputs = _example_inputs(model, example_inputs, input_spec, what="quantization (torch.export traces it)")
        quantizer = self._quantizer(model)
        with train_mode(model, self.qat):
            graph = export_for_quantization(model, inputs)
        with quiet_annotation():
            return pt2e().prepare(graph, quantizer)

    def calibrate(self, observed: nn.Module, data: Iterable[Any], *, batches: int | None = None) -> nn.Module:
        """Runs up to ``batches`` (default ``config.calibration_batches``) batches through the observers.

        ``data`` yields tensors or ``(inputs, labels)`` pairs (a ``DataLoader``); labels are ignored.
        """
        _check_observed(observed)
        limit = self.config.calibration_batches if batches is None else check_int("batches", batches)
        seen = 0
        with torch.no_grad():
            for batch in _batches(data):
                run_batch(observed, batch, argument="data")
                seen += 1
                if seen >= limit:
                    break
        if seen == 0:
            raise ValueError(bad_argument("data", data, "at least one batch for calibration"))
        return observed

    def convert(self, observed: nn.Module) -> torch.fx.GraphModule:
        """Replaces observers by int8 quantize / dequantize with int8 weights; returns the int8 model."""
        _check_observed(observed)
        if self.qat:
            pt2e().to_eval(observed)
        converted = drop_unused_state(pt2e().convert(observed))
        return allow_train_eval(converted).eval()


class QAT(PTQ):
    """Quantization-aware training: ``quantize`` -> train (``sampan.Model.fit``) -> ``convert``.

    The prepared model fakes int8 rounding in the forward pass so training learns around it;
    ``model.train()`` / ``model.eval()`` switch its BatchNorm and Dropout as usual.

    Example:
        >>> import sampan, torch
        >>> from sampan.quantization import QAT, QuantConfig
        >>> from sampan.vision.models import LeNet
        >>> net = LeNet()
        >>> qat = QAT(QuantConfig())
        >>> prepared = qat.quantize(net, example_inputs=torch.randn(2, 1, 28, 28))  # doctest: +SKIP
        >>> opt = torch.optim.SGD(prepared.parameters(), lr=0.01)                     # doctest: +SKIP
        >>> model = sampan.Model(prepared).prepare(opt, torch.nn.CrossEntropyLoss())  # doctest: +SKIP
        >>> train = torch.utils.data.TensorDataset(torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,)))
        >>> history = model.fit(train)                                               # doctest: +SKIP
        >>> int8_net = qat.convert(prepared)                                           # doctest: +SKIP
    """

    qat = True

    def quantize(self, model: nn.Module, example_inputs: Any = None, *, input_spec: Any = None) -> torch.fx.GraphModule:
        if not isinstance(model, nn.Module):
            raise TypeError(bad_argument("model", model, "a torch.nn.Module"))
        inputs = _example_inputs(model, example_inputs, input_spec, what="quantization (torch.export traces it)")
        quantizer = self._quantizer(model)
        with train_mode(model):
            graph = export_for_quantization(model, inputs)
        with quiet_annotation():
            prepared = pt2e().prepare_qat(graph, quantizer)
        return allow_train_eval(prepared)
