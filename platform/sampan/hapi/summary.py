"""``sampan.summary``: layers, output shapes, parameters and FLOPs (``paddle.summary``).

FLOPs come from ``torch.utils.flop_counter.FlopCounterMode`` (a multiply-add
counts as two FLOPs, as torch counts them).
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
from torch.utils.flop_counter import FlopCounterMode

from sampan.errors import bad_argument
from sampan.spec import InputSpec, to_torch_dtype


def _example_inputs(net: torch.nn.Module, input_size: Any, dtypes: Any,
                    input_spec: Sequence[InputSpec] | None) -> list[torch.Tensor]:
    device = next((p.device for p in net.parameters()), torch.device("cpu"))
    if input_size is None:
        if not input_spec:
            raise ValueError(bad_argument("input_size", input_size, "a shape such as (1, 1, 28, 28)"))
        return [s.example(batch=1).to(device) for s in input_spec]
    if isinstance(input_size, torch.Tensor):
        return [input_size.to(device)]
    sizes = [input_size] if isinstance(input_size[0], int) or input_size[0] is None else list(input_size)
    kinds = dtypes if isinstance(dtypes, (list, tuple)) else [dtypes] * len(sizes)
    tensors = []
    for size, dtype in zip(sizes, kinds):
        if not all(isinstance(d, int) and d > 0 for d in size):
            raise ValueError(bad_argument("input_size", input_size, "positive ints, e.g. (1, 1, 28, 28)"))
        spec = InputSpec(list(size), to_torch_dtype(dtype or "float32"))
        tensors.append(spec.example(batch=size[0]).to(device))
    return tensors


def _shape(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return list(value.shape)
    if isinstance(value, (tuple, list)):
        return [_shape(v) for v in value]
    return type(value).__name__


def summary(net: torch.nn.Module, input_size: Any = None, dtypes: Any = None, *,
            input_spec: Sequence[InputSpec] | None = None, print_table: bool = True) -> dict:
    """Runs one forward pass and reports every leaf layer's output shape, parameters and FLOPs.

    Args:
        net: the network.
        input_size: one shape ``(1, 1, 28, 28)``, a list of shapes for several inputs, or a tensor.
        dtypes: dtype name(s) for the inputs (default float32).
        input_spec: used when ``input_size`` is None.
        print_table: print the table.

    Returns:
        ``{"total_params", "trainable_params", "flops", "layers": [{name, type, output_shape, params, flops}]}``.

    Example:
        >>> info = summary(torch.nn.Linear(4, 2), (1, 4), print_table=False)
        >>> info["total_params"], info["flops"]
        (10, 16)
    """
    inputs = _example_inputs(net, input_size, dtypes, input_spec)
    layers: list[dict] = []
    hooks = []
    for name, module in net.named_modules():
        if name and not list(module.children()):
            def hook(mod, _inp, out, name=name):
                layers.append({"name": name, "type": type(mod).__name__, "output_shape": _shape(out),
                               "params": sum(p.numel() for p in mod.parameters(recurse=False))})
            hooks.append(module.register_forward_hook(hook))
    was_training = net.training
    net.eval()
    counter = FlopCounterMode(display=False)
    try:
        with torch.no_grad(), counter:
            net(*inputs)
    finally:
        for h in hooks:
            h.remove()
        net.train(was_training)
    per_module = counter.get_flop_counts()
    prefix = type(net).__name__
    for layer in layers:
        counts = per_module.get(f"{prefix}.{layer['name']}", {})
        layer["flops"] = int(sum(counts.values()))
    info = {
        "total_params": sum(p.numel() for p in net.parameters()),
        "trainable_params": sum(p.numel() for p in net.parameters() if p.requires_grad),
        "flops": int(counter.get_total_flops()),
        "layers": layers,
    }
    if print_table:
        _print(info)
    return info


def _print(info: dict) -> None:
    rows = [(l["name"], l["type"], str(l["output_shape"]), f"{l['params']:,}", f"{l['flops']:,}") for l in info["layers"]]
    header = ("Layer", "Type", "Output shape", "Params", "FLOPs")
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = "-" * (sum(widths) + 3 * (len(widths) - 1))
    print(line)
    print("   ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("=" * len(line))
    for r in rows:
        print("   ".join(c.ljust(w) for c, w in zip(r, widths)))
    print("=" * len(line))
    print(f"Total params: {info['total_params']:,}")
    print(f"Trainable params: {info['trainable_params']:,}")
    print(f"Non-trainable params: {info['total_params'] - info['trainable_params']:,}")
    print(f"FLOPs (one forward pass): {info['flops']:,}")
    print(line)
