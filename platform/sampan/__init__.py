"""Sampan: the PaddlePaddle workflow on PyTorch.

Develop with a dynamic graph, deploy a static one, turn on mixed precision or
many processes with one argument, compress and serve the model.

Example:
    >>> import sampan, torch
    >>> net = torch.nn.Linear(4, 2)
    >>> model = sampan.Model(net)
    >>> model.prepare(torch.optim.SGD(net.parameters(), lr=0.1), torch.nn.CrossEntropyLoss())
    Model(Linear, prepared=True, epoch=0)

Subpackages (``sampan.data``, ``sampan.jit``, ...) and the names that need torch
(``Model``, ``InputSpec``, ``seed_everything``, ...) are imported on first use:
``import sampan`` alone does not import torch, so the command line's servers
(``sampan lab``, ``sampan dashboard``, ``sampan hub``) and ``sampan --version``
start without it (about 2.5 CPU-seconds and 0.3 GiB less each); the first use of
a name that needs torch costs what ``import torch`` does.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sampan._version import __version__
from sampan.errors import SampanError
from sampan.utils.quiet import quiet_torch_notes
from sampan.utils.record import record

quiet_torch_notes()  # no libkineto or cpp_extension lines under a cell that worked (sampan.utils.quiet)

__all__ = [
    "__version__",
    "InputSpec",
    "Model",
    "SampanError",
    "record",
    "run_check",
    "seed_everything",
    "summary",
    # subpackages, imported lazily
    "amp",
    "callbacks",
    "data",
    "distributed",
    "experiments",
    "inference",
    "jit",
    "metric",
    "monitor",
    "onnx",
    "path",
    "profiler",
    "pruning",
    "quantization",
    "text",
    "vision",
]

_LAZY_ATTRS = {
    "InputSpec": ("sampan.spec", "InputSpec"),
    "seed_everything": ("sampan.utils.seed", "seed_everything"),
    "Model": ("sampan.hapi.model", "Model"),
    "summary": ("sampan.hapi.summary", "summary"),
    "run_check": ("sampan.check", "run_check"),
}
_SUBPACKAGES = {
    "amp", "bench", "callbacks", "data", "distributed", "experiments", "hapi", "inference", "jit",
    "metric", "monitor", "onnx", "path", "profiler", "pruning", "quantization", "text", "utils", "vision",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY_ATTRS:
        module, attr = _LAZY_ATTRS[name]
        value = getattr(importlib.import_module(module), attr)
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f"sampan.{name}")
    else:
        raise AttributeError(f"module 'sampan' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # pragma: no cover
    from sampan.check import run_check
    from sampan.hapi.model import Model
    from sampan.hapi.summary import summary
    from sampan.spec import InputSpec
    from sampan.utils.seed import seed_everything
