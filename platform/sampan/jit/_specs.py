"""``InputSpec`` helpers shared by ``to_static``, ``save``, ONNX export and the predictor."""
from __future__ import annotations

import math
import os
from typing import Any, Sequence

import torch

from sampan.errors import UnsafeFileError, bad_argument
from sampan.spec import InputSpec, dtype_name, example_inputs, normalize_specs, sample_shapes  # one home


def require_specs(input_spec: Any, *, what: str) -> list[InputSpec]:
    specs = normalize_specs(input_spec)
    if specs is None:
        raise ValueError(bad_argument("input_spec", None, f"a list of sampan.InputSpec ({what} needs the input "
                                      "shapes)", "write input_spec=[sampan.InputSpec([None, 1, 28, 28], "
                                      "'float32', 'image')]"))
    return specs


def specs_or_static(input_spec: Any, layer: Any, *, what: str) -> list[InputSpec]:
    """``input_spec``, else the one given to ``to_static`` for ``layer`` (as ``paddle.jit.save`` reuses it)."""
    if input_spec is None and isinstance(layer, torch.nn.Module):
        from sampan.jit.to_static import static_forward

        static = static_forward(layer)
        input_spec = static.input_spec if static is not None else None
    return require_specs(input_spec, what=what)


def prepare_examples(specs: list[InputSpec], examples: Any) -> tuple[torch.Tensor, ...]:
    """The inputs to trace with: ``examples`` (one tensor, or one per spec) checked against ``specs``, else
    random ones (batch 2, other dynamic dims 8).

    ``torch.export`` specialises a dimension whose example size is 0 or 1 to that size, so a dynamic dimension
    of size 1 in an example (one image) is doubled (the example repeated along it); size 0 is refused.

    Example:
        >>> [t.shape for t in prepare_examples([InputSpec([None, 3], name="x")], torch.ones(1, 3))]
        [torch.Size([2, 3])]
    """
    if examples is None:
        return example_inputs(specs, batch=2)
    if isinstance(examples, torch.Tensor):
        examples = (examples,)
    elif not isinstance(examples, (list, tuple)):
        raise TypeError(bad_argument("examples", examples, "a tensor, or a list of tensors (one per InputSpec)",
                                     "write examples=[torch.randn(2, 1, 28, 28)]"))
    examples = tuple(examples)
    check_inputs(specs, examples, where="example")
    out = []
    for i, (spec, example) in enumerate(zip(specs, examples)):
        for dim in spec.dynamic_dims:
            if example.shape[dim] == 0:
                raise ValueError(bad_argument(
                    f"examples[{i}]", f"a tensor of shape {list(example.shape)}", f"a tensor for input {spec.name!r} "
                    f"whose dynamic dimension {dim} is 1 or more (torch.export fixes a dimension traced at size 0)",
                    "use a batch of 2 or more"))
            if example.shape[dim] == 1:
                example = torch.cat([example, example], dim=dim)
        out.append(example)
    return tuple(out)


def output_names(names: Sequence[str] | None, count: int) -> list[str]:
    """``names`` checked to be one per output, or ``output_0``, ``output_1``, ..."""
    if not names:
        return [f"output_{i}" for i in range(count)]
    if isinstance(names, str):
        names = [names]
    names = list(names)
    if len(names) != count:
        raise ValueError(bad_argument("output_names", names, f"{count} name(s), one per output",
                                      f"the network returns {count} tensor(s) (nested tuples and dicts flattened, "
                                      "in order); name each, or leave output_names out"))
    return names


def example_shapes(meta: dict, specs: list[InputSpec]) -> list[list[int]] | None:
    """The shapes the model was traced with (``example_shapes`` in ``meta.json``), or None when the file has
    none (written by an older Sampan) or they do not fit ``specs``: samples then use the default sizes."""
    shapes = meta.get("example_shapes")
    if not isinstance(shapes, list) or len(shapes) != len(specs):
        return None
    for shape, spec in zip(shapes, specs):
        if (not isinstance(shape, list) or len(shape) != len(spec.shape)
                or not all(type(d) is int and d >= 0 for d in shape)):
            return None
        if math.prod(shape) > _MAX_SAMPLE_ELEMENTS:  # the metadata file holds no checksum: no huge allocations from it
            return None
    return shapes


# The one cap on samples built from a model file (its InputSpecs and traced shapes): the predictor's backend choice
# and warm-up, `sampan export` of a .pt2. The meta file holds no checksum of its own, so its shapes are whatever its
# sender wrote, and [None, 100000, 100000] asks for a 40 GB randn. 64 M elements (256 MiB of float32) per input is
# 10x a batch of two 3 x 1024 x 1024 images (6.3 M) and 2.7x a batch of two 3 x 2048 x 2048 ones, while a few such
# samples stay within a small machine's memory; a model whose inputs are larger for real is served on real inputs.
_MAX_SAMPLE_ELEMENTS = 1 << 26


def check_file_samples(specs: list[InputSpec], *, batch: int, like: Sequence[Sequence[int]] | None, source: Any,
                       fix: str, fill: int = 8) -> None:
    """Raises :class:`~sampan.errors.UnsafeFileError` naming the input when a sample :func:`file_samples` would
    build for ``specs`` (read from the meta file ``source``) holds more than ``_MAX_SAMPLE_ELEMENTS`` elements;
    nothing is allocated. ``fix`` is the caller's HINT."""
    for spec, shape in zip(specs, sample_shapes(specs, batch=batch, fill=fill, like=like)):
        if math.prod(shape) > _MAX_SAMPLE_ELEMENTS:
            raise UnsafeFileError(
                f"Refusing to build a sample for input {spec.name!r} of {os.fspath(source)!r}: the metadata file "
                f"gives it the shape {spec.to_list()}, so a sample is {shape} ({math.prod(shape):,} elements), "
                f"over the cap of {_MAX_SAMPLE_ELEMENTS:,} elements per input that Sampan builds from a model file "
                f"(its sizes are whatever its sender wrote). HINT: {fix}", path=os.fspath(source), entry=spec.name)


def file_samples(specs: list[InputSpec], *, batch: int, seed: int, like: Sequence[Sequence[int]] | None,
                 source: Any, fix: str) -> tuple[torch.Tensor, ...]:
    """:func:`~sampan.spec.example_inputs` for specs read from the meta file ``source``, refused by
    :func:`check_file_samples` before anything is allocated when a sample would be over the cap."""
    check_file_samples(specs, batch=batch, like=like, source=source, fix=fix)
    return example_inputs(specs, batch=batch, seed=seed, like=like)


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
        dynamic = any(d for s in specs for d in s.dynamic_dims)  # a dynamic dimension besides the batch
        hint = ("; for dynamic sizes (None) pass examples=[tensor, ...] of sizes the network takes (e.g. "
                "examples=[torch.randn(2, 1, 28, 28)]): they are traced instead of the default size 8" if dynamic
                else "")
        raise ValueError(
            f"Expected `input_spec` to describe inputs {type(layer).__name__} can take. Received: {given}; "
            f"layer `{where}` ({type(failed).__name__}) refused them: {first}. HINT: fix the InputSpec's shape "
            f"or dtype to what the network's first layers expect (e.g. channels, features){hint}, or check the "
            f"layer.") from exc
    finally:
        for handle in handles:
            handle.remove()


class _Shown(str):
    """Text that ``bad_argument`` echoes as written (its ``repr`` is itself, without quotes)."""

    def __repr__(self) -> str:
        return str(self)


def _spec_text(spec: InputSpec, prefix: str = "") -> str:
    return f"{prefix}InputSpec({spec.to_list()}, {spec.dtype!r}, {spec.name!r})"


def _tensor_text(tensor: torch.Tensor) -> str:
    return f"{list(tensor.shape)} {dtype_name(tensor.dtype)}"


def _fitting(spec: InputSpec | None, tensor: torch.Tensor, index: int) -> str:
    """The InputSpec that fits ``tensor``: ``spec``'s name and dynamic dimensions, with None also where its static
    sizes differ; for another rank (or no spec) the tensor's shape with a dynamic batch."""
    shape: list = list(tensor.shape)
    if spec is not None and len(spec.shape) == len(shape):
        shape = [None if want is None or want != got else got for got, want in zip(shape, spec.shape)]
    elif shape:
        shape[0] = None
    name = spec.name if spec is not None else f"input_{index}"
    return _spec_text(InputSpec(shape, tensor.dtype, name), prefix="sampan.")


def check_call(specs: list[InputSpec], tensors: Sequence[torch.Tensor], *, callee: str) -> None:
    """Raises ``ValueError`` when the tensors ``callee`` (``to_static``'s function) is called with contradict its
    ``input_spec``: their count, a rank, a size the spec fixes, a dtype. The message names the spec, echoes the
    tensor and writes the spec that would fit it.

    Example:
        >>> check_call([InputSpec([None, 4], "float32", "x")], [torch.ones(2, 4)], callee="f")
        >>> check_call([InputSpec([None, 4], "int64", "x")], [torch.ones(2, 4)], callee="f")
        Traceback (most recent call last):
        ...
        ValueError: Expected `input_spec[0]` to be an InputSpec that fits ... dtype float32 (shape [2, 4]) where the
        spec says int64. ... HINT: write dtype='float32' in the InputSpec if float32 is right, else convert ...
    """
    if len(tensors) != len(specs):
        given = ", ".join(_tensor_text(t) for t in tensors) or "none"
        fitting = ", ".join(_fitting(specs[i] if i < len(specs) else None, t, i) for i, t in enumerate(tensors))
        raise ValueError(bad_argument(
            "input_spec", _Shown("[" + ", ".join(_spec_text(s) for s in specs) + "]"),
            f"one InputSpec per tensor {callee} takes, but it holds {len(specs)} InputSpec(s) and {callee} was "
            f"called with {len(tensors)} tensor(s) ({given})",
            f"write input_spec=[{fitting}], one per tensor in the order {callee} takes them"
            + (f", or pass {callee} all {len(specs)} inputs" if len(tensors) < len(specs) else "")))
    for i, (spec, tensor) in enumerate(zip(specs, tensors)):
        problem, fix = _contradiction(spec, tensor, i)
        if problem:
            raise ValueError(bad_argument(
                f"input_spec[{i}]", _Shown(_spec_text(spec)),
                f"an InputSpec that fits the tensor {callee} was called with for input {spec.name!r}: {problem}", fix))


def _contradiction(spec: InputSpec, tensor: torch.Tensor, index: int) -> tuple[str | None, str | None]:
    """What in ``tensor`` the spec contradicts (rank, a static size, dtype) and the fix; (None, None) if nothing."""
    shape, dtype = list(tensor.shape), dtype_name(tensor.dtype)
    if len(shape) != len(spec.shape):
        return (f"a tensor of rank {len(shape)} (shape {shape}, {dtype}) where the spec has rank {len(spec.shape)}",
                f"write input_spec=[{_fitting(spec, tensor, index)}] (None where the size varies, as the batch "
                f"does), or pass tensors of rank {len(spec.shape)} as the spec says")
    wrong = [(d, got, want) for d, (got, want) in enumerate(zip(shape, spec.shape)) if want is not None and got != want]
    if wrong:
        dim, got, want = wrong[0]
        return (f"shape {shape} ({dtype}), whose dimension {dim} is {got} where the spec fixes it at {want}",
                f"if that size varies, mark it dynamic: input_spec=[{_fitting(spec, tensor, index)}]; else resize "
                f"the input to the spec's {spec.to_list()}")
    if dtype != spec.dtype:
        return (f"dtype {dtype} (shape {shape}) where the spec says {spec.dtype}",
                f"write dtype='{dtype}' in the InputSpec if {dtype} is right, else convert the input: "
                f"x.to(torch.{spec.dtype})")
    return None, None
