"""``auto_cast``: ``paddle.amp.auto_cast`` on ``torch.autocast``, with black and white lists.

``torch.autocast`` picks the precision of each op from fixed lists. Paddle lets a
user move ops between them (``custom_black_list`` keeps ops in fp32,
``custom_white_list`` runs them in low precision); here the lists may also
name modules (a class, a class name or a module object) that must run in fp32.
Ops are redirected with a ``TorchFunctionMode`` and modules with global forward
hooks, both installed only while the context is open and only when a list is
given, so a plain ``auto_cast()`` is exactly ``torch.autocast``.
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Any, Iterable, Iterator, Literal

import torch
from torch.overrides import TorchFunctionMode

from sampan.errors import bad_argument

Level = Literal["O0", "O1", "O2"]
_DTYPES = {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16,
           "half": torch.float16}
_ALIASES = {"__matmul__": "matmul", "__rmatmul__": "matmul"}
# Paddle's op names (as in paddle.amp's lists) -> the torch function names auto_cast sees; Paddle's
# Linear layers run matmul_v2, so that name covers torch's linear too
_PADDLE_OPS = {
    "matmul_v2": ("matmul", "linear"), "fc": ("linear",), "elementwise_add": ("add",),
    "elementwise_sub": ("sub",), "elementwise_mul": ("mul",), "elementwise_div": ("div",),
    "elementwise_pow": ("pow",), "elementwise_max": ("maximum",), "elementwise_min": ("minimum",),
    "reduce_sum": ("sum",), "reduce_mean": ("mean",), "reduce_max": ("amax",), "reduce_min": ("amin",),
    "reduce_prod": ("prod",), "lookup_table": ("embedding",), "lookup_table_v2": ("embedding",),
    "depthwise_conv2d": ("conv2d",), "conv2d_transpose": ("conv_transpose2d",),
    "softmax_with_cross_entropy": ("cross_entropy",), "c_softmax_with_cross_entropy": ("cross_entropy",),
    "sigmoid_cross_entropy_with_logits": ("binary_cross_entropy_with_logits",),
}


def as_dtype(dtype: Any) -> torch.dtype:
    """``"bfloat16"``/``"bf16"``/``torch.bfloat16`` -> ``torch.bfloat16`` (likewise float16)."""
    if isinstance(dtype, torch.dtype) and dtype in (torch.bfloat16, torch.float16):
        return dtype
    if isinstance(dtype, str) and dtype.lower() in _DTYPES:
        return _DTYPES[dtype.lower()]
    raise ValueError(bad_argument("dtype", dtype, "'bfloat16' or 'float16' (or 'bf16', 'fp16')"))


def check_level(level: Any) -> str:
    if level not in ("O0", "O1", "O2"):
        raise ValueError(bad_argument("level", level, "'O0' (off), 'O1' (autocast) or 'O2' (half parameters)",
                                      "O2 also needs sampan.amp.decorate(model, optimizer)"))
    return level


def device_type_of(device: Any = None) -> str:
    """The autocast device type of ``device``; ``None`` means CUDA when present, else CPU."""
    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device).type


def _op_name(func: Any) -> str:
    name = getattr(func, "__name__", "")
    return _ALIASES.get(name, name)


def _cast_floats(values: Any, dtype: torch.dtype) -> Any:
    if isinstance(values, torch.Tensor):
        return values.to(dtype) if values.is_floating_point() and values.dtype != dtype else values
    if isinstance(values, (tuple, list)):
        return type(values)(_cast_floats(v, dtype) for v in values)
    if isinstance(values, dict):
        return {k: _cast_floats(v, dtype) for k, v in values.items()}
    return values


class _OpLists(TorchFunctionMode):
    """Runs black-listed ops in fp32 and white-listed ops in ``dtype``, with autocast off for that op."""

    def __init__(self, device_type: str, dtype: torch.dtype, white: set[str], black: set[str]):
        super().__init__()
        self.device_type, self.dtype, self.white, self.black = device_type, dtype, white, black

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _op_name(func)
        target = torch.float32 if name in self.black else self.dtype if name in self.white else None
        if target is None or not torch.is_autocast_enabled(self.device_type):
            return func(*args, **kwargs)
        with torch.autocast(self.device_type, enabled=False):
            return func(*_cast_floats(args, target), **_cast_floats(kwargs, target))


class _ModuleBlackList:
    """Global forward hooks that run the matching modules in fp32 with autocast off."""

    def __init__(self, device_type: str, entries: list):
        self.device_type = device_type
        self.names = {e for e in entries if isinstance(e, str)}
        self.types = tuple(e for e in entries if isinstance(e, type))
        self.ids = {id(e) for e in entries if isinstance(e, torch.nn.Module)}
        self._open: list[tuple[int, contextlib.AbstractContextManager]] = []
        self._handles: list = []

    def matches(self, module: torch.nn.Module) -> bool:
        return (id(module) in self.ids or type(module).__name__ in self.names
                or bool(self.types) and isinstance(module, self.types))

    def _pre(self, module, args):
        if not self.matches(module) or not torch.is_autocast_enabled(self.device_type):
            return None
        ctx = torch.autocast(self.device_type, enabled=False)
        ctx.__enter__()
        self._open.append((id(module), ctx))
        return _cast_floats(args, torch.float32)

    def _post(self, module, args, output):
        if self._open and self._open[-1][0] == id(module):
            self._open.pop()[1].__exit__(None, None, None)
        return None

    def __enter__(self):
        hooks = torch.nn.modules.module
        self._handles = [hooks.register_module_forward_pre_hook(self._pre),
                         hooks.register_module_forward_hook(self._post)]
        return self

    def __exit__(self, *exc):
        for handle in self._handles:
            handle.remove()
        while self._open:  # a forward that raised leaves its context open
            self._open.pop()[1].__exit__(None, None, None)
        return False


def _is_torch_op(name: str) -> bool:
    """True for a name ``auto_cast`` can meet: a function of ``torch`` / ``torch.nn.functional`` or a Tensor method."""
    return any(callable(getattr(space, name, None)) for space in (torch, torch.nn.functional, torch.Tensor))


def _ops(name: str, unknown: list[str]) -> tuple[str, ...]:
    """The torch op names for ``name`` (itself, or what Paddle's name maps to); none, noted in ``unknown``, else."""
    name = _ALIASES.get(name, name)
    if _is_torch_op(name):
        return (name,)
    if name not in _PADDLE_OPS:
        unknown.append(name)
    return _PADDLE_OPS.get(name, ())


def _split(entries: Iterable | None, argument: str) -> tuple[set[str], list]:
    """Splits a list into op names (lower-case names of torch functions) and module matchers.

    Paddle's op names (``"matmul_v2"``, ``"elementwise_add"``) become torch's; a name that is neither
    is dropped with a ``UserWarning`` naming it, since no op would ever match it.
    """
    ops: set[str] = set()
    modules: list = []
    if entries is None:
        return ops, modules
    if isinstance(entries, (str, type, torch.nn.Module)):
        entries = [entries]
    unknown: list[str] = []
    for entry in entries:
        if isinstance(entry, str) and entry[:1].isupper():
            modules.append(entry)  # a class name such as "LayerNorm"
        elif isinstance(entry, str):
            ops.update(_ops(entry, unknown))
        elif isinstance(entry, torch.nn.Module) or isinstance(entry, type) and issubclass(entry, torch.nn.Module):
            modules.append(entry)
        else:
            raise TypeError(bad_argument(argument, entry, "op names ('matmul', 'softmax'), module class names "
                                         "('LayerNorm'), nn.Module classes or module objects"))
    if unknown:
        warnings.warn(f"auto_cast ignores {unknown} in `{argument}`: neither a torch op name (a function of "
                      "torch or torch.nn.functional, or a Tensor method, e.g. 'linear', 'matmul', 'softmax') "
                      f"nor a Paddle op name it maps (e.g. 'matmul_v2', 'elementwise_add'). HINT: check the "
                      "spelling, or name the module class instead (e.g. 'LayerNorm').", UserWarning, stacklevel=4)
    return ops, modules


@contextlib.contextmanager
def auto_cast(enable: bool = True, custom_white_list: Iterable | None = None,
              custom_black_list: Iterable | None = None, level: Level = "O1", dtype: Any = "bfloat16", *,
              device_type: str | None = None) -> Iterator[None]:
    """Runs the enclosed forward pass in mixed precision (``paddle.amp.auto_cast`` on ``torch.autocast``).

    Args:
        enable: ``False`` makes the context a no-op.
        custom_white_list: op names (``"softmax"``) to run in ``dtype`` although autocast keeps them in fp32.
        custom_black_list: op names (``"matmul"``, ``"linear"``, ``"conv2d"``) or modules (a class such as
            ``torch.nn.LayerNorm``, its name ``"LayerNorm"``, or a module object) to keep in fp32.
            In both lists op names are torch's (``torch.*`` / ``torch.nn.functional.*`` / Tensor methods);
            Paddle's common names are mapped (``"matmul_v2"`` -> ``"matmul"`` and ``"linear"``, as Paddle's
            Linear runs matmul_v2; ``"elementwise_add"`` -> ``"add"``; ``"reduce_mean"`` -> ``"mean"``;
            ``"lookup_table_v2"`` -> ``"embedding"`` ...), and a name that is neither is ignored with a
            ``UserWarning``.
        level: ``"O1"`` (autocast chooses per op), ``"O2"`` (the same casting for parameters made half by
            :func:`decorate`), ``"O0"`` (off).
        dtype: ``"bfloat16"`` (CPU and CUDA) or ``"float16"`` (CUDA; CPU float16 autocast is slow).
        device_type: ``"cpu"`` or ``"cuda"``; defaults to CUDA when present.

    Example:
        >>> import torch
        >>> from sampan.amp import auto_cast
        >>> net = torch.nn.Linear(8, 8)
        >>> with auto_cast(dtype="bfloat16", device_type="cpu"):
        ...     y = net(torch.randn(2, 8))
        >>> y.dtype
        torch.bfloat16
    """
    low = as_dtype(dtype)
    check_level(level)
    device_type = device_type or device_type_of(None)
    if not enable or level == "O0":
        yield
        return
    white_ops, white_modules = _split(custom_white_list, "custom_white_list")
    black_ops, black_modules = _split(custom_black_list, "custom_black_list")
    if white_modules:
        raise ValueError(bad_argument("custom_white_list", custom_white_list, "op names only",
                                      "modules can only be black-listed (kept in fp32)"))
    both = white_ops & black_ops
    if both:
        raise ValueError(bad_argument("custom_white_list", sorted(both), "ops that are not also black-listed"))
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.autocast(device_type, dtype=low))
        if black_modules:
            stack.enter_context(_ModuleBlackList(device_type, black_modules))
        if white_ops or black_ops:
            stack.enter_context(_OpLists(device_type, low, white_ops, black_ops))
        yield
