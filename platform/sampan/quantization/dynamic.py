"""Dynamic (weight) int8 quantization of Linear, LSTM and GRU layers.

Weights are stored as int8 with one float scale per output channel (symmetric), so the model is
about 4x smaller on disk and runs anywhere torch runs. For speed, compile it onto torch's int8
kernels with :func:`sampan.quantization.compile_int8`, or export it with
:func:`sampan.quantization.export_onnx`: ONNX Runtime's ``quantize_dynamic`` then runs int8
kernels (``MatMulInteger``) where they beat fp32 (``layout="auto"`` times them). Why not
torchao's eager layers here: on the 2-core AVX-512 machine of ``BENCHMARKS.md`` torchao's
``Int8WeightOnlyConfig`` ran 2.1x and ``Int8DynamicActivationInt8WeightConfig`` 5x *slower* than
fp32 in eager mode (batch 1, 4x1024 MLP) and neither covers LSTM / GRU; ONNX Runtime int8 ran at
0.42x of fp32.
Mirrors ``paddle.quantization`` / PaddleSlim ``quant_post_dynamic``.
"""
from __future__ import annotations

import copy
from typing import Any, Iterable

import torch
from torch import nn
from torch.nn import functional as F

from sampan.errors import bad_argument
from sampan.pruning._checks import is_skipped, split_skip

DYNAMIC_TYPES = (nn.Linear, nn.LSTM, nn.GRU)


def quantize_per_channel(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per output channel (dim 0): returns ``(int8 values, float scales)``."""
    w = weight.detach().float()
    scale = w.abs().reshape(w.shape[0], -1).amax(1).clamp_min(1e-12) / 127.0
    q = torch.round(w / scale.reshape(-1, *([1] * (w.dim() - 1)))).clamp(-127, 127).to(torch.int8)
    return q, scale


def _dequantize(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return q.to(dtype) * scale.to(dtype).reshape(-1, *([1] * (q.dim() - 1)))


class Int8Linear(nn.Module):
    """A ``Linear`` whose weight is stored in int8 (per-channel scales); the bias stays float.

    ``weight`` reads back the dequantized float weight (read-only, rebuilt from the int8 values on
    each access, never stored): code that reads a Linear's ``.weight`` instead of calling it, such as
    ``nn.TransformerEncoderLayer``'s fused inference path, gets the same rounded weights that ``forward``
    uses.

    ``forward`` computes in the input's dtype, as ``nn.Linear`` in a model of that dtype does: a bf16 input gives a bf16
    output, with the weights dequantized to bf16 and the bias cast to it.
    """

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        q, scale = quantize_per_channel(linear.weight)
        self.register_buffer("weight_int8", q)
        self.register_buffer("weight_scale", scale)
        self.bias = nn.Parameter(linear.bias.detach().clone(), requires_grad=False) if linear.bias is not None else None

    @property
    def weight(self) -> torch.Tensor:
        """The dequantized weight ``[out_features, in_features]`` in the scales' dtype (not a parameter)."""
        return _dequantize(self.weight_int8, self.weight_scale, self.weight_scale.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the bias stays in the dtype it was built in (float32 unless the model was converted): follow the input
        bias = None if self.bias is None else self.bias.to(x.dtype)
        return F.linear(x, _dequantize(self.weight_int8, self.weight_scale, x.dtype), bias)

    def dequantize(self) -> nn.Linear:
        """A float ``nn.Linear`` with the (rounded) weights, e.g. for ONNX export."""
        linear = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None)
        linear.weight.data.copy_(_dequantize(self.weight_int8, self.weight_scale, torch.float32))
        if self.bias is not None:
            linear.bias.data.copy_(self.bias)
        return linear

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, weight=int8"


class Int8RNN(nn.Module):
    """An ``LSTM`` / ``GRU`` whose weight matrices are stored in int8; biases stay float.

    ``forward`` runs the original layer through ``torch.func.functional_call`` with the
    dequantized weights, so every LSTM / GRU option (layers, bidirectional, batch_first) works. It computes in the
    input's dtype, as ``Int8Linear`` does: a bf16 input (or ``PackedSequence`` of one) gives bf16 outputs, with the
    weights dequantized to bf16 and the biases cast to it.
    """

    def __init__(self, rnn: nn.LSTM | nn.GRU):
        super().__init__()
        template = copy.deepcopy(rnn)
        self._weights, self._biases = [], []
        for name, p in rnn.named_parameters():
            if name.startswith("weight"):
                q, scale = quantize_per_channel(p)
                self.register_buffer(f"{name}_int8", q)
                self.register_buffer(f"{name}_scale", scale)
                self._weights.append(name)
                setattr(template, name, nn.Parameter(torch.empty(0), requires_grad=False))
            else:
                self.register_parameter(name, nn.Parameter(p.detach().clone(), requires_grad=False))
                self._biases.append(name)
        object.__setattr__(self, "_template", template)  # not a submodule: no float copy in state_dict

    def _params(self, dtype: torch.dtype) -> dict[str, torch.Tensor]:
        params = {n: _dequantize(getattr(self, f"{n}_int8"), getattr(self, f"{n}_scale"), dtype) for n in self._weights}
        params.update({n: getattr(self, n).to(dtype) for n in self._biases})
        return params

    def forward(self, *args: Any, **kwargs: Any):
        x = args[0] if args else kwargs.get("input")
        x = x.data if isinstance(x, nn.utils.rnn.PackedSequence) else x
        # the biases stay in the dtype they were built in (float32 unless the model was converted): follow the input
        dtype = x.dtype if isinstance(x, torch.Tensor) and x.is_floating_point() else torch.float32
        return torch.func.functional_call(self._template, self._params(dtype), args, kwargs)

    def dequantize(self) -> nn.Module:
        rnn = copy.deepcopy(self._template)
        for name, value in self._params(torch.float32).items():
            setattr(rnn, name, nn.Parameter(value.detach().clone()))
        return rnn

    def extra_repr(self) -> str:
        return f"{type(self._template).__name__}, weight=int8"


def _replace(model: nn.Module, name: str, new: nn.Module) -> nn.Module:
    """Puts ``new`` in place of ``model``'s submodule ``name``; returns the model, or ``new`` where ``name`` is
    ``""`` (the model itself, which no parent holds: ``setattr(model, "", new)`` would add a child named "")."""
    if not name:
        return new
    parent_name, _, attr = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, attr, new)
    return model


def quantize_dynamic(model: nn.Module, *, skip: Iterable[Any] = (),
                     layer_types: Iterable[type] = DYNAMIC_TYPES) -> nn.Module:
    """Returns a copy of ``model`` whose Linear / LSTM / GRU weights are int8.

    Weight-only, like PaddleSlim's ``quant_post_dynamic``: the activations stay float and the weights
    are dequantized on every call. What PyTorch calls dynamic quantization (activations rounded to
    int8 at run time, int8 kernels) is what :func:`~sampan.quantization.compile_int8` makes of the result.

    Args:
        model: the network (not modified).
        skip: layer names or types kept in float, e.g. the most sensitive ones from
            :func:`sampan.quantization.sensitivity`.
        layer_types: which layer types to quantize (a subset of Linear, LSTM, GRU).

    Returns:
        The quantized copy, in eval mode (an ``Int8Linear`` / ``Int8RNN`` when ``model`` itself is a
        Linear / LSTM / GRU). ``nn.Transformer`` layers keep working: their feed-forward Linear layers
        become int8, the attention's own projections (``out_proj``, a ``NonDynamicallyQuantizableLinear``,
        and the packed ``in_proj_weight``) stay float, as in ``torch.ao.quantization.quantize_dynamic``.

    Raises:
        ValueError: an unknown layer name in ``skip``, or no layer of ``layer_types`` in ``model``;
        TypeError: an unsupported layer type.

    Example:
        >>> import torch
        >>> from sampan.quantization import quantize_dynamic
        >>> net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
        >>> qnet = quantize_dynamic(net, skip=["2"])
        >>> type(qnet[0]).__name__, type(qnet[2]).__name__
        ('Int8Linear', 'Linear')
    """
    if not isinstance(model, nn.Module):
        raise TypeError(bad_argument("model", model, "a torch.nn.Module"))
    if isinstance(layer_types, type):
        raise TypeError(bad_argument("layer_types", layer_types, "a tuple of layer types",
                                     f"write layer_types=({layer_types.__name__},) for one type"))
    kinds = tuple(layer_types)
    for kind in kinds:
        if kind not in DYNAMIC_TYPES:
            raise TypeError(bad_argument("layer_types", kinds, "a subset of (nn.Linear, nn.LSTM, nn.GRU)"))
    names, types = split_skip(skip, model)
    if not any(type(m) in kinds for m in model.modules()):
        done = any(isinstance(m, (Int8Linear, Int8RNN)) for m in model.modules())
        raise ValueError(bad_argument(
            "model", f"<{type(model).__name__} without {[k.__name__ for k in kinds]} layers>",
            "a model with Linear / LSTM / GRU layers (nothing else would be quantized: the copy would stay float)",
            "it is quantized already" if done else
            "quantize a convolutional network with sampan.quantization.PTQ, which covers Conv2d"))
    qmodel = copy.deepcopy(model).eval()
    targets = [(n, m) for n, m in qmodel.named_modules()
               if type(m) in kinds and not is_skipped(n, m, names, types)]
    for name, module in targets:  # name "": the model itself is a Linear / LSTM / GRU
        qmodel = _replace(qmodel, name, Int8Linear(module) if isinstance(module, nn.Linear) else Int8RNN(module))
    return qmodel.eval()


def dequantize(model: nn.Module) -> nn.Module:
    """A float copy: every ``Int8Linear`` / ``Int8RNN`` becomes the plain layer with the rounded weights."""
    fmodel = copy.deepcopy(model)
    for name, module in list(fmodel.named_modules()):
        if isinstance(module, (Int8Linear, Int8RNN)):
            fmodel = _replace(fmodel, name, module.dequantize())
    return fmodel
