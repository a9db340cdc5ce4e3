"""Argument checks shared by pruning and quantization: ratios, layer names, example inputs."""
from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Sequence

import torch
from torch import nn

from sampan.errors import bad_argument
from sampan.spec import example_inputs as _examples, normalize_specs


def check_ratio(name: str, value: Any) -> float:
    """A float strictly between 0 and 1, or a ``ValueError`` that names the argument."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < float(value) < 1.0:
        raise ValueError(bad_argument(name, value, "a float strictly between 0 and 1",
                                      "pass e.g. 0.5 to remove half of the weights or filters"))
    return float(value)


def split_skip(skip: Iterable[Any] | None, model: nn.Module, *,
               argument: str = "skip") -> tuple[set[str], tuple[type, ...]]:
    """Splits a skip list into layer names (checked against ``model``) and layer types."""
    names: set[str] = set()
    types: list[type] = []
    known = dict(model.named_modules())
    skip = as_names(skip)
    for item in skip or ():
        if isinstance(item, type) and issubclass(item, nn.Module):
            types.append(item)
        elif isinstance(item, str):
            check_layer_name(argument, item, known)
            names.add(item)
        else:
            raise TypeError(bad_argument(argument, list(skip), "layer names (str) or layer types (nn.Module classes)",
                                         "write skip=['fc3', torch.nn.LSTM]"))
    return names, tuple(types)


def as_names(items: Any) -> Any:
    """One layer name or type as a one-item list (a lone string would otherwise be read letter by letter)."""
    return [items] if isinstance(items, (str, type)) else items


def check_eval_fn(eval_fn: Any) -> None:
    if not callable(eval_fn):
        raise TypeError(bad_argument("eval_fn", eval_fn, "a function eval_fn(model) -> float, higher is better",
                                     "pass e.g. eval_fn=lambda m: accuracy(m, val_loader)"))


def score(eval_fn: Callable[[nn.Module], Any], model: nn.Module, *, baseline: bool = False) -> float:
    """``eval_fn(model)`` as a float, or an error naming ``eval_fn`` when it returns something else (None, a
    dict, a tensor of many values); the baseline (the model as given) must also be finite."""
    value = eval_fn(model)
    try:
        if isinstance(value, (str, bytes)):
            raise TypeError(value)
        number = float(value)
    except (TypeError, ValueError, RuntimeError):
        shown = f"<a tensor of shape {tuple(value.shape)}>" if isinstance(value, torch.Tensor) else value
        raise TypeError(bad_argument("eval_fn(model)", shown, "one number, higher is better (e.g. accuracy)",
                                     "end eval_fn with `return accuracy` (a float), or `return t.item()` for a "
                                     "one-element tensor")) from None
    if baseline and not math.isfinite(number):
        raise ValueError(bad_argument("eval_fn(model)", number, "a finite number on the model as given",
                                      "check eval_fn on the unmodified model first (an empty loader gives 0/0)"))
    return number


_INT8 = (torch.int8, torch.qint8, torch.quint8)


def check_float_model(model: nn.Module) -> None:
    """Refuses a model that holds int8 weights (``quantize_dynamic``, ``PTQ`` / ``QAT.convert``): pruning works on
    the float weights of Conv / Linear layers, which quantized layers no longer have, so it would silently do
    nothing. Prune first, then quantize (PaddleSlim's order too)."""
    if not isinstance(model, nn.Module):
        raise TypeError(bad_argument("model", model, "a torch.nn.Module"))
    int8 = [k for k, t in model.state_dict().items() if isinstance(t, torch.Tensor) and t.dtype in _INT8]
    if int8:
        raise TypeError(bad_argument(
            "model", f"<{type(model).__name__} with int8 weights {int8[:3]}>", "a float (unquantized) model",
            "prune before quantizing: prune the float model, then quantize the pruned copy "
            "(sampan.quantization.dequantize(model) gives a float copy of a quantize_dynamic model)"))


def check_layer_name(argument: str, name: str, known: dict[str, nn.Module] | Sequence[str]) -> None:
    if name not in known:
        listed = [n for n in known if n][:12]
        raise ValueError(bad_argument(argument, name, f"a layer name of the model such as {listed}",
                                      "list names with [n for n, _ in model.named_modules()]"))


def is_skipped(name: str, module: nn.Module, names: set[str], types: tuple[type, ...]) -> bool:
    """True when the layer or one of its parents is named in the skip list, or its type is listed."""
    if types and isinstance(module, types):
        return True
    return any(name == n or name.startswith(n + ".") for n in names)


def example_inputs(model: nn.Module, example_inputs: Any, input_spec: Any, *, what: str) -> tuple[torch.Tensor, ...]:
    """Normalises ``example_inputs`` (a tensor or tuple) or builds them from ``input_spec``."""
    if example_inputs is not None:
        if isinstance(example_inputs, torch.Tensor):
            return (example_inputs,)
        if isinstance(example_inputs, (list, tuple)) and all(isinstance(t, torch.Tensor) for t in example_inputs):
            return tuple(example_inputs)
        raise TypeError(bad_argument("example_inputs", example_inputs, "a tensor or a tuple of tensors"))
    if input_spec is not None:
        return _examples(normalize_specs(input_spec), batch=2)
    raise ValueError(bad_argument("example_inputs", None, f"example inputs for {what}",
                                  "pass example_inputs=(torch.randn(1, 1, 28, 28),) or "
                                  "input_spec=[sampan.InputSpec([None, 1, 28, 28])]"))
