"""``sampan.jit``: develop with the dynamic graph, deploy a static one (``paddle.jit``).

``to_static`` compiles with ``torch.compile``; ``explain`` reports graph breaks;
``save`` / ``load`` write and read ``torch.export`` programs and AOTInductor packages
with their input specs.

Example:
    >>> import torch, sampan
    >>> net = sampan.vision.models.LeNet()
    >>> net = sampan.jit.to_static(net, input_spec=[sampan.InputSpec([None, 1, 28, 28], name="image")])  # doctest: +SKIP
    >>> sampan.jit.save(net, "out/lenet", input_spec=net.forward.input_spec)                           # doctest: +SKIP
    PosixPath('out/lenet.pt2')
    >>> sampan.jit.load("out/lenet")(torch.randn(3, 1, 28, 28)).shape                                  # doctest: +SKIP
    torch.Size([3, 10])
"""
from __future__ import annotations

from sampan.jit._artifacts import MissingModelError
from sampan.jit.explain import ExplainReport, GraphBreak, explain
from sampan.jit.save_load import ExportMismatchError, LoadedProgram, load, save
from sampan.jit.to_static import StaticFunction, StaticGraphError, not_to_static, to_static

__all__ = [
    "ExplainReport",
    "ExportMismatchError",
    "GraphBreak",
    "LoadedProgram",
    "MissingModelError",
    "StaticFunction",
    "StaticGraphError",
    "explain",
    "load",
    "not_to_static",
    "save",
    "to_static",
]
