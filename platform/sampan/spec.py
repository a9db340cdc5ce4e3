"""``InputSpec``: the shape, dtype and name of one model input (``paddle.static.InputSpec``)."""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from sampan.errors import bad_argument

_DTYPES = {
    "float32": torch.float32, "float": torch.float32, "float16": torch.float16, "half": torch.float16,
    "bfloat16": torch.bfloat16, "float64": torch.float64, "double": torch.float64,
    "int64": torch.int64, "long": torch.int64, "int32": torch.int32, "int": torch.int32,
    "int16": torch.int16, "short": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}


def to_torch_dtype(dtype: Any, *, argument: str = "dtype") -> torch.dtype:
    """Maps ``"float32"``, a ``torch.dtype`` or a NumPy dtype (``np.float32``, ``np.dtype("int64")``) to the
    ``torch.dtype``.

    Example:
        >>> import torch
        >>> from sampan.spec import to_torch_dtype
        >>> to_torch_dtype("int64"), to_torch_dtype(torch.float16)
        (torch.int64, torch.float16)
    """
    if isinstance(dtype, torch.dtype):
        return dtype
    name = dtype.replace("torch.", "") if isinstance(dtype, str) else _numpy_dtype_name(dtype)
    if name in _DTYPES:
        return _DTYPES[name]
    if name == "uint16":  # Paddle's InputSpec writes bfloat16 as uint16
        raise ValueError(bad_argument(argument, dtype, f"one of {sorted(_DTYPES)} or a torch.dtype",
                                      "Paddle stores bfloat16 as uint16; write dtype='bfloat16'"))
    raise ValueError(bad_argument(argument, dtype, f"one of {sorted(_DTYPES)}, a torch.dtype or a NumPy dtype"))


def _numpy_dtype_name(dtype: Any) -> str | None:
    """``"float32"`` for ``np.float32`` or ``np.dtype("float32")``; None for anything else."""
    owner = dtype.__module__ if isinstance(dtype, type) else type(dtype).__module__
    if not str(owner).startswith("numpy"):
        return None
    import numpy as np

    try:
        return np.dtype(dtype).name
    except TypeError:
        return None


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


@dataclass(frozen=True)
class InputSpec:
    """Describes one input: ``None`` (or -1) in ``shape`` marks a dynamic dimension.

    Mirrors ``paddle.static.InputSpec``. Used by ``sampan.Model`` to check
    batches, by ``sampan.jit`` to mark dynamic dimensions for ``torch.compile``
    and ``torch.export``, and by the inference predictor to validate inputs.

    Args:
        shape: dimensions (ints, NumPy ints too); ``None`` or ``-1`` for any size.
        dtype: ``"float32"``, ``"int64"``, ..., a ``torch.dtype`` or a NumPy dtype (``np.float32``).
        name: input name, used in error messages and exported graphs.
        stop_gradient: accepted for Paddle parity and ignored: inputs carry no gradients into an
            exported model, and ``sampan.Model`` takes gradients from the tensors themselves.

    Example:
        >>> from sampan import InputSpec
        >>> spec = InputSpec([None, 1, 28, 28], "float32", "image")
        >>> spec.dynamic_dims
        (0,)
    """

    shape: tuple = field(default=())
    dtype: Any = "float32"
    name: str | None = None
    stop_gradient: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self):
        if not isinstance(self.shape, (list, tuple)):
            raise TypeError(bad_argument("shape", self.shape, "a list or tuple of ints or None",
                                         "write shape=[None, 1, 28, 28]"))
        dims = []
        for d in self.shape:
            size = _size(d)
            if d is None or size == -1:
                dims.append(None)
            elif size is not None and size > 0:
                dims.append(size)
            else:
                raise ValueError(bad_argument("shape", list(self.shape),
                                              "positive ints, with None or -1 for dynamic dimensions"))
        object.__setattr__(self, "shape", tuple(dims))
        object.__setattr__(self, "dtype", dtype_name(to_torch_dtype(self.dtype)))

    @property
    def torch_dtype(self) -> torch.dtype:
        return to_torch_dtype(self.dtype)

    @property
    def dynamic_dims(self) -> tuple[int, ...]:
        return tuple(i for i, d in enumerate(self.shape) if d is None)

    def example(self, batch: int = 2, fill: int = 4, like: Sequence[int] | None = None) -> torch.Tensor:
        """A random tensor matching the spec; dynamic dims take ``batch`` (dim 0), else their size in ``like``
        (a shape of this rank, e.g. the traced example's), else ``fill``."""
        shape = self.sample_shape(batch=batch, fill=fill, like=like)
        if self.torch_dtype.is_floating_point:
            return torch.randn(shape, dtype=self.torch_dtype)
        if self.torch_dtype == torch.bool:
            return torch.zeros(shape, dtype=torch.bool)
        return torch.randint(0, 2, shape, dtype=self.torch_dtype)

    def sample_shape(self, batch: int = 2, fill: int = 4, like: Sequence[int] | None = None) -> list[int]:
        """The shape :meth:`example` gives its tensor, computed without allocating anything."""
        if like is not None and len(like) != len(self.shape):
            like = None
        return [d if d is not None else (batch if i == 0 else fill if like is None else like[i])
                for i, d in enumerate(self.shape)]

    def check(self, value: Any, *, where: str = "input") -> None:
        """Raises ``ValueError`` naming the input when ``value`` does not fit the spec."""
        label = f"{where} {self.name!r}" if self.name else where
        shape = tuple(getattr(value, "shape", ()))
        if len(shape) != len(self.shape):
            raise ValueError(
                f"{label} has rank {len(shape)} (shape {list(shape)}) but its InputSpec expects rank "
                f"{len(self.shape)} (shape {self.to_list()}). HINT: reshape the input or fix the InputSpec."
            )
        for i, (got, want) in enumerate(zip(shape, self.shape)):
            if want is not None and got != want:
                raise ValueError(
                    f"{label} has shape {list(shape)} but its InputSpec expects {self.to_list()} "
                    f"(dimension {i} must be {want}). HINT: resize the input, or mark the dimension "
                    f"dynamic with None in the InputSpec."
                )
        got_dtype = getattr(value, "dtype", None)
        if got_dtype is not None:
            got_name = dtype_name(got_dtype) if isinstance(got_dtype, torch.dtype) else str(got_dtype)
            if got_name != self.dtype:
                raise ValueError(
                    f"{label} has dtype {got_name} but its InputSpec expects {self.dtype}. "
                    f"HINT: convert it, e.g. x.astype('{self.dtype}') or x.to(torch.{self.dtype})."
                )

    def to_list(self) -> list:
        return [d if d is not None else None for d in self.shape]

    def to_dict(self) -> dict:
        return {"shape": self.to_list(), "dtype": self.dtype, "name": self.name}

    @classmethod
    def from_dict(cls, d: dict) -> "InputSpec":
        return cls(shape=d["shape"], dtype=d["dtype"], name=d.get("name"))

    @classmethod
    def from_tensor(cls, tensor: torch.Tensor, name: str | None = None, dynamic_batch: bool = True) -> "InputSpec":
        shape = list(tensor.shape)
        if dynamic_batch and shape:
            shape[0] = None
        return cls(shape, tensor.dtype, name)


def _size(dim: Any) -> int | None:
    """``dim`` as an int (a Python or NumPy integer; not a bool, not a float), else None."""
    if isinstance(dim, bool):
        return None
    try:
        return operator.index(dim)
    except TypeError:
        return None


def as_specs(value: Any, argument: str = "inputs") -> list[InputSpec] | None:
    """Normalises ``None``, one spec, or a list of specs into a list (or None)."""
    if value is None:
        return None
    items: Sequence = value if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if not isinstance(item, InputSpec):
            raise TypeError(bad_argument(argument, value, "an InputSpec or a list of InputSpec",
                                         "write inputs=[sampan.InputSpec([None, 1, 28, 28], 'float32', 'image')]"))
    return list(items)


def normalize_specs(input_spec: Any, *, argument: str = "input_spec") -> list[InputSpec] | None:
    """Turns ``None``, one ``InputSpec``, a tensor or a list of either into a list of named specs.

    Tensors become specs with a dynamic batch dimension. Unnamed specs are named
    ``input_0``, ``input_1``, ... so that exported graphs and errors can name them.

    Example:
        >>> import torch
        >>> from sampan import InputSpec
        >>> from sampan.spec import normalize_specs
        >>> [s.name for s in normalize_specs([InputSpec([None, 4]), torch.zeros(2, 3)])]
        ['input_0', 'input_1']
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


def example_inputs(specs: list[InputSpec], *, batch: int = 2, fill: int = 8, seed: int = 0,
                   like: Sequence[Sequence[int]] | None = None) -> tuple[torch.Tensor, ...]:
    """Deterministic example tensors for ``specs`` (dynamic dims take ``batch`` for dim 0, else their size in
    ``like``, one shape per spec such as the traced examples' that ``meta.json`` keeps, else ``fill``).

    The one builder of example inputs (export, quantization, pruning, FLOP counting); it leaves the
    global random state as it was.

    Example:
        >>> from sampan import InputSpec
        >>> from sampan.spec import example_inputs
        >>> [t.shape for t in example_inputs([InputSpec([None, 3])], batch=1)]
        [torch.Size([1, 3])]
        >>> [t.shape for t in example_inputs([InputSpec([None, 1, None, None])], batch=3, like=[[2, 1, 28, 28]])]
        [torch.Size([3, 1, 28, 28])]
    """
    likes = _likes(specs, like)
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        return tuple(s.example(batch=batch, fill=fill, like=shape) for s, shape in zip(specs, likes))
    finally:
        torch.random.set_rng_state(state)


def sample_shapes(specs: list[InputSpec], *, batch: int = 2, fill: int = 8,
                  like: Sequence[Sequence[int]] | None = None) -> list[list[int]]:
    """The shapes :func:`example_inputs` gives its tensors for the same arguments, computed without allocating."""
    return [s.sample_shape(batch=batch, fill=fill, like=shape) for s, shape in zip(specs, _likes(specs, like))]


def _likes(specs: list[InputSpec], like: Sequence[Sequence[int]] | None) -> list:
    return list(like) if like is not None and len(like) == len(specs) else [None] * len(specs)
