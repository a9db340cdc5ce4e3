"""``sampan.inference``: serve exported models (``paddle.inference``).

A :class:`Config` names the model (the prefix given to ``sampan.jit.save`` /
``sampan.onnx.export``, or one of its files) and the device; :func:`create_predictor` picks the backend:
the ``torch.export`` program, the AOTInductor package or ONNX Runtime (by default the
fastest of those that agree with each other on this device; the file itself when the Config names one). With
``Config.enable_mkldnn_bfloat16()`` a bfloat16 candidate joins them on CPUs with native bf16
(:mod:`sampan.inference.bf16`), and with ``Config.enable_winograd()`` an fp32 one whose 3 x 3 convolutions
run by Winograd (:mod:`sampan.inference.winograd`); ``Predictor.report()`` says what each candidate computes in.

Example:
    >>> import numpy as np, sampan
    >>> net = sampan.vision.models.LeNet()
    >>> sampan.jit.save(net, "out/lenet", input_spec=[sampan.InputSpec([None, 1, 28, 28], name="image")])
    PosixPath('out/lenet.pt2')
    >>> config = sampan.inference.Config("out/lenet")
    >>> predictor = sampan.inference.create_predictor(config)
    >>> [logits] = predictor.run([np.zeros((4, 1, 28, 28), "float32")])
    >>> logits.shape
    (4, 10)
"""
from __future__ import annotations

from sampan.inference.config import Config
from sampan.inference.predictor import Predictor, create_predictor

__all__ = ["Config", "Predictor", "create_predictor"]
