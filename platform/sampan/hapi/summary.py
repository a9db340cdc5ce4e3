"""``sampan.summary``: layers, output shapes, parameters and FLOPs (``paddle.summary``).

Accepts what ``paddle.summary`` accepts: a shape (``-1`` or ``None`` for the batch
dimension, which becomes 1), a bare int, nested shapes for nested inputs such as
an LSTM's ``(h0, c0)``, ``InputSpec`` objects, or example tensors (``input=``: one
tensor, or a list or dict passed to the network as one argument, as Paddle does).
FLOPs and parameters are counted by :mod:`sampan.utils.flops` (``FlopCounterMode``: a
multiply-add counts as two FLOPs, as torch counts them), as ``sampan.pruning`` counts them.
"""
from __future__ import annotations

import numbers
import threading
from typing import Any, Sequence

import torch

from sampan.errors import bad_argument, first_line
from sampan.spec import InputSpec, to_torch_dtype
from sampan.utils.flops import count_flops, count_params
from sampan.utils.modes import eval_mode

_EXPECTED = "a shape such as (1, 1, 28, 28) (None or -1 for the batch), a list of shapes, or an InputSpec"
_active = threading.local()


def running() -> bool:
    """True while a summary's example forward pass runs (so ``Model`` does not take it for data)."""
    return getattr(_active, "depth", 0) > 0


def _is_shape(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and not any(isinstance(v, (list, tuple, InputSpec)) for v in value)


def _normalize(size: Any, whole: Any) -> Any:
    """One shape -> a tuple of positive ints; nested lists stay nested. Raises naming ``input_size``."""
    if isinstance(size, InputSpec):
        size = size.shape
    if isinstance(size, bool) or not isinstance(size, (numbers.Integral, list, tuple)) and size is not None:
        raise TypeError(bad_argument("input_size", whole, _EXPECTED,
                                     f"{size!r} of type {type(size).__name__} is not a dimension or a shape"))
    if isinstance(size, numbers.Integral):
        size = (size,)
    if not size:
        raise ValueError(bad_argument("input_size", whole, _EXPECTED, "a shape cannot be empty or None"))
    if not _is_shape(size):
        return [_normalize(s, whole) for s in size]
    dims, unknown = [], 0
    for d in size:
        if d is None or (isinstance(d, numbers.Integral) and not isinstance(d, bool) and d == -1):
            unknown += 1
            dims.append(1)
        elif isinstance(d, bool) or not isinstance(d, numbers.Integral):
            raise TypeError(bad_argument("input_size", whole, _EXPECTED,
                                         f"the dimension {d!r} is a {type(d).__name__}; write ints, e.g. "
                                         f"{tuple(int(x) if isinstance(x, numbers.Real) else 1 for x in size)}"))
        elif d <= 0:
            raise ValueError(bad_argument("input_size", whole, _EXPECTED, f"the dimension {d} must be positive"))
        else:
            dims.append(int(d))
    if unknown > 1:
        raise ValueError(bad_argument("input_size", whole, _EXPECTED,
                                      "only the batch dimension may be None or -1 (it becomes 1)"))
    return tuple(dims)


def _dtype_tree(sizes: Any, dtypes: Any) -> Any:
    """One dtype for every leaf shape, or a list that follows the top level of ``sizes``."""
    if isinstance(dtypes, (list, tuple)):
        if len(dtypes) != len(sizes):
            raise ValueError(bad_argument("dtypes", dtypes, f"one dtype per input ({len(sizes)} inputs)",
                                          "write dtypes=['float32', 'int64'] or a single dtype"))
        return list(dtypes)
    return [dtypes] * len(sizes)


def _build(size: Any, dtype: Any, device: torch.device) -> Any:
    if isinstance(size, tuple):
        spec = InputSpec(list(size), to_torch_dtype(dtype or "float32", argument="dtype"))
        return spec.example(batch=size[0]).to(device)
    kinds = dtype if isinstance(dtype, (list, tuple)) else [dtype] * len(size)
    return tuple(_build(s, d, device) for s, d in zip(size, kinds))  # nested: one argument, e.g. (h0, c0)


def _example_call(net: torch.nn.Module, input_size: Any, dtypes: Any, input: Any,
                  input_spec: Sequence[InputSpec] | None) -> tuple[list, Any]:
    """The positional arguments for one forward pass, and the sizes to show in errors."""
    device = next((p.device for p in net.parameters()), torch.device("cpu"))
    if input is not None or isinstance(input_size, (torch.Tensor, dict)) or (
            isinstance(input_size, (list, tuple)) and input_size and
            all(isinstance(t, torch.Tensor) for t in input_size)):
        example = input if input is not None else input_size
        return [_to_device(example, device)], _shape(example)
    if input_size is None:
        if not input_spec:
            raise ValueError(bad_argument("input_size", input_size, _EXPECTED,
                                          "pass input_size=(1, 1, 28, 28) or input=<an example tensor>"))
        return [s.example(batch=1).to(device) for s in input_spec], [s.to_list() for s in input_spec]
    if not isinstance(input_size, (numbers.Integral, list, tuple, InputSpec)) or isinstance(input_size, bool):
        raise TypeError(bad_argument("input_size", input_size, _EXPECTED))
    specs = [input_size] if isinstance(input_size, InputSpec) else input_size
    if dtypes is None and isinstance(specs, (list, tuple)) and specs and all(isinstance(s, InputSpec) for s in specs):
        dtypes = [s.dtype for s in specs]
    sizes = _normalize(input_size, input_size)
    sizes = [sizes] if isinstance(sizes, tuple) else sizes
    return [_build(s, d, device) for s, d in zip(sizes, _dtype_tree(sizes, dtypes))], sizes


def _to_device(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: _to_device(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(v, device) for v in value)
    raise TypeError(bad_argument("input", value, "a tensor, or a list or dict of tensors",
                                 "write input=torch.rand(1, 1, 28, 28)"))


def _shape(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return list(value.shape)
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_shape(v) for v in value]
    return type(value).__name__


def _refusal(exc: Exception, failing: list[tuple[str, str]], sizes: Any, inputs: list) -> ValueError:
    first = first_line(exc)
    where = f"layer {failing[-1][0]!r} ({failing[-1][1]})" if failing else "the network's own forward code"
    return ValueError(
        f"summary: input_size={sizes!r} does not fit the network: {where} refused the input "
        f"(example inputs of shape {_shape(inputs)}). torch said: {first}. HINT: give the shape (batch first) "
        f"and dtype of your Dataset's samples, e.g. input_size=(1, 1, 28, 28) for 28x28 grey images, "
        f"dtypes='int64' for token ids.")


def summary(net: torch.nn.Module, input_size: Any = None, dtypes: Any = None, input: Any = None, *,
            dtype: Any = None, input_spec: Sequence[InputSpec] | None = None, print_table: bool = True) -> dict:
    """Runs one forward pass and reports every leaf layer's output shape, parameters and FLOPs.

    Mirrors ``paddle.summary(net, input_size, dtypes, input)``.

    Args:
        net: the network.
        input_size: a shape ``(1, 1, 28, 28)`` (``None``/``-1`` batch -> 1), a bare int (``64`` is ``(64,)``),
            a list of shapes for several inputs, nested shapes for a nested input (``[(1, 5, 8), ((1, 1, 16),
            (1, 1, 16))]`` calls ``net(x, (h0, c0))``), ``InputSpec`` objects, or example tensors.
        dtypes: dtype name(s) for the inputs (default float32); ``dtype`` is the same (``Model.summary``'s name).
        input: example data instead of ``input_size``: a tensor, or a list or dict given to the network
            as one argument (as ``paddle.summary(input=...)`` does).
        input_spec: used when neither ``input_size`` nor ``input`` is given.
        print_table: print the table.

    Returns:
        ``{"total_params", "trainable_params", "flops", "layers": [{name, type, output_shape, params, flops}]}``.

    Example:
        >>> import torch
        >>> from sampan import summary
        >>> info = summary(torch.nn.Linear(4, 2), (None, 4), print_table=False)
        >>> info["total_params"], info["flops"]
        (10, 16)
    """
    if dtype is not None and dtypes is not None and dtype != dtypes:
        raise ValueError(bad_argument("dtype", dtype, f"the same as dtypes={dtypes!r} (they are one argument)"))
    inputs, sizes = _example_call(net, input_size, dtypes if dtypes is not None else dtype, input, input_spec)
    layers: list[dict] = []
    running: list[tuple[str, str]] = []
    hooks = []
    for name, module in net.named_modules():
        if not list(module.children()):  # leaf layers; a network without sub-layers is its own row
            name = name or type(net).__name__
            def before(mod, _inp, name=name):
                running.append((name, type(mod).__name__))

            def after(mod, _inp, out, name=name):
                running.pop()
                layers.append({"name": name, "type": type(mod).__name__, "output_shape": _shape(out),
                               "params": count_params(mod, recurse=False)})
            hooks += [module.register_forward_pre_hook(before), module.register_forward_hook(after)]
    _active.depth = getattr(_active, "depth", 0) + 1
    try:
        with eval_mode(net):
            total_flops, per_module = count_flops(lambda: net(*inputs))
    except (RuntimeError, ValueError, TypeError, IndexError) as exc:
        raise _refusal(exc, running, input_size if input is None else _shape(input), inputs) from exc
    finally:
        _active.depth -= 1
        for h in hooks:
            h.remove()
    prefix = type(net).__name__
    for layer in layers:
        key = prefix if layer["name"] == prefix else f"{prefix}.{layer['name']}"
        layer["flops"] = per_module.get(key, 0)
    info = {
        "total_params": count_params(net),
        "trainable_params": count_params(net, trainable=True),
        "flops": total_flops,
        "layers": layers,
    }
    if print_table:
        _print(info)
    return info


def _print(info: dict) -> None:
    from sampan.utils.i18n import ljust, tr, width

    rows = [(l["name"], l["type"], str(l["output_shape"]), f"{l['params']:,}", f"{l['flops']:,}") for l in info["layers"]]
    header = tuple(tr(word) for word in ("Layer", "Type", "Output shape", "Params", "FLOPs"))
    widths = [max(width(h), *(width(r[i]) for r in rows)) if rows else width(h) for i, h in enumerate(header)]
    line = "-" * (sum(widths) + 3 * (len(widths) - 1))
    print(line)
    print("   ".join(ljust(h, w) for h, w in zip(header, widths)))
    print("=" * len(line))
    for r in rows:
        print("   ".join(ljust(c, w) for c, w in zip(r, widths)))
    print("=" * len(line))
    print(tr("Total params: {n}", n=f"{info['total_params']:,}"))
    print(tr("Trainable params: {n}", n=f"{info['trainable_params']:,}"))
    print(tr("Non-trainable params: {n}", n=f"{info['total_params'] - info['trainable_params']:,}"))
    print(tr("FLOPs (one forward pass): {n}", n=f"{info['flops']:,}"))
    print(line)
