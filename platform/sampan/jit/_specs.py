"""``InputSpec`` helpers shared by ``to_static``, ``save``, ONNX export and the predictor."""
from __future__ import annotations

from typing import Any, Sequence

import torch

from sampan.errors import bad_argument
from sampan.spec import InputSpec


def normalize_specs(input_spec: Any, *, argument: str = "input_spec") -> list[InputSpec] | None:
    """Turns ``None``, one ``InputSpec``, a tensor or a list of either into a list of named specs.

    Tensors become specs with a dynamic batch dimension. Unnamed specs are named
    ``input_0``, ``input_1``, ... so that exported graphs and errors can name them.
    """
    if input_spec is None:
        return None
    items: Sequence = input_spec if isinstance(input_spec, (list, tuple)) else [input_spec]
    if not items:
        raise ValueError(bad_argument(argument, input_spec, "a non-empty list of sampan.InputSpec",
                                      "write input_spec=[sampan.InputSpec([None, 1, 28, 28], 'float32', 'image')]"))
    specs = []
    for i, item in enumerate(items):
        if isinstance(item, torch.Tensor):
            item = InputSpec.from_tensor(item, name=f"input_{i}")
        if not isinstance(item, InputSpec):
            raise TypeError(bad_argument(argument, input_spec, "an InputSpec or a list of InputSpec",
                                         "write input_spec=[sampan.InputSpec([None, 1, 28, 28], 'float32', 'image')]"))
        if item.name is None:
            item = InputSpec(item.shape, item.dtype, f"input_{i}")
        specs.append(item)
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(bad_argument(argument, names, "InputSpecs with distinct names", "rename the inputs"))
    return specs


def require_specs(input_spec: Any, *, what: str) -> list[InputSpec]:
    specs = normalize_specs(input_spec)
    if specs is None:
        raise ValueError(bad_argument("input_spec", None, f"a list of sampan.InputSpec ({what} needs the input "
                                      "shapes)", "write input_spec=[sampan.InputSpec([None, 1, 28, 28], "
                                      "'float32', 'image')]"))
    return specs


def example_inputs(specs: list[InputSpec], *, batch: int = 2, fill: int = 8, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Deterministic example tensors for ``specs`` (dynamic dims take ``batch`` for dim 0, else ``fill``)."""
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        return tuple(s.example(batch=batch, fill=fill) for s in specs)
    finally:
        torch.random.set_rng_state(state)


def check_inputs(specs: list[InputSpec], values: Sequence[Any], *, where: str = "input") -> None:
    """Raises ``ValueError`` naming the input when the count, rank, a static dim or the dtype is wrong."""
    if len(values) != len(specs):
        expected = ", ".join(f"{s.name} {s.to_list()} {s.dtype}" for s in specs)
        raise ValueError(f"Expected {len(specs)} input(s) ({expected}) but received {len(values)}. "
                         "HINT: pass one array per InputSpec, in order.")
    for spec, value in zip(specs, values):
        spec.check(value, where=where)


def export_dynamic_shapes(specs: list[InputSpec]) -> tuple[dict[int, Any] | None, ...]:
    """``torch.export`` ``dynamic_shapes``: every ``None`` dim becomes ``Dim.DYNAMIC``.

    ``Dim.DYNAMIC`` (not ``AUTO``) makes export fail loudly when the model forces
    a dimension the spec calls dynamic to one size.
    """
    from torch.export import Dim

    return tuple({i: Dim.DYNAMIC for i in s.dynamic_dims} or None for s in specs)


def flatten_outputs(out: Any) -> list[torch.Tensor]:
    """A tensor, or a (nested) tuple / list / dict of tensors, as a flat list."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for v in out.values() for t in flatten_outputs(v)]
    if isinstance(out, (list, tuple)):
        return [t for v in out for t in flatten_outputs(v)]
    raise TypeError(f"Expected the network to return tensors (or tuples / dicts of tensors). Received: "
                    f"{type(out).__name__}. HINT: return only tensors from forward for export.")


def max_abs_diff(a: Any, b: Any) -> float:
    """Largest absolute difference between two outputs (tensors or arrays, any nesting)."""
    fa = [torch.as_tensor(x) for x in (a if isinstance(a, list) else flatten_outputs(a))]
    fb = [torch.as_tensor(x) for x in (b if isinstance(b, list) else flatten_outputs(b))]
    if len(fa) != len(fb):
        return float("inf")
    worst = 0.0
    for x, y in zip(fa, fb):
        if x.shape != y.shape:
            return float("inf")
        if x.numel():
            worst = max(worst, (x.detach().double().cpu() - y.detach().double().cpu()).abs().max().item())
    return worst


def allclose(a: Any, b: Any, *, rtol: float, atol: float) -> bool:
    fa = [torch.as_tensor(x) for x in (a if isinstance(a, list) else flatten_outputs(a))]
    fb = [torch.as_tensor(x) for x in (b if isinstance(b, list) else flatten_outputs(b))]
    return len(fa) == len(fb) and all(
        x.shape == y.shape and torch.allclose(x.detach().double().cpu(), y.detach().double().cpu(), rtol=rtol, atol=atol)
        for x, y in zip(fa, fb))
