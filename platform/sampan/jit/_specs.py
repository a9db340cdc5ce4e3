"""``InputSpec`` helpers shared by ``to_static``, ``save``, ONNX export and the predictor."""
from __future__ import annotations

from typing import Any, Sequence

import torch

from sampan.errors import bad_argument
from sampan.spec import InputSpec, example_inputs, normalize_specs  # one home: sampan.spec


def require_specs(input_spec: Any, *, what: str) -> list[InputSpec]:
    specs = normalize_specs(input_spec)
    if specs is None:
        raise ValueError(bad_argument("input_spec", None, f"a list of sampan.InputSpec ({what} needs the input "
                                      "shapes)", "write input_spec=[sampan.InputSpec([None, 1, 28, 28], "
                                      "'float32', 'image')]"))
    return specs


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


def run_on_examples(layer: torch.nn.Module, specs: list[InputSpec], examples: Sequence[torch.Tensor]) -> Any:
    """``layer(*examples)``; when the network cannot take inputs shaped by ``specs``, a ``ValueError``
    names the specs, the example shapes and the innermost layer that failed (instead of a raw conv or
    matmul error).

    Example:
        >>> net = torch.nn.Linear(4, 2)
        >>> run_on_examples(net, [InputSpec([None, 4], "float32", "x")], (torch.ones(2, 4),)).shape
        torch.Size([2, 2])
    """
    names = {module: name for name, module in layer.named_modules()}
    entered: list[torch.nn.Module] = []  # the layers running now, innermost last

    def enter(module: torch.nn.Module, _args: Any) -> None:
        entered.append(module)

    def leave(module: torch.nn.Module, _args: Any, _out: Any) -> None:
        if entered and entered[-1] is module:
            entered.pop()

    handles = [h for m in names for h in (m.register_forward_pre_hook(enter), m.register_forward_hook(leave))]
    try:
        return layer(*examples)
    except (RuntimeError, ValueError, TypeError, IndexError) as exc:
        failed = entered[-1] if entered else layer
        where = names.get(failed) or "the network itself"
        given = ", ".join(f"{s.name} {s.to_list()} {s.dtype} (example {list(e.shape)})"
                          for s, e in zip(specs, examples) if isinstance(e, torch.Tensor))
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise ValueError(
            f"Expected `input_spec` to describe inputs {type(layer).__name__} can take. Received: {given}; "
            f"layer `{where}` ({type(failed).__name__}) refused them: {first}. HINT: fix the InputSpec's shape "
            f"or dtype to what the network's first layers expect (e.g. channels, features), or check the "
            f"layer.") from exc
    finally:
        for handle in handles:
            handle.remove()
