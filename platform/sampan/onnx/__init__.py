"""``sampan.onnx``: export to ONNX and check the file in ONNX Runtime (``paddle.onnx.export``).

Example:
    >>> import sampan
    >>> net = sampan.vision.models.LeNet()
    >>> sampan.onnx.export(net, "out/lenet", input_spec=[sampan.InputSpec([None, 1, 28, 28], name="image")])  # doctest: +SKIP
    PosixPath('out/lenet.onnx')
"""
from __future__ import annotations

from sampan.onnx.export import export

__all__ = ["export"]
