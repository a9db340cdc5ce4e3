"""``prune``: magnitude pruning, or structured pruning that really shrinks the layers."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import torch  # noqa: F401 - used by the docstring example
from torch import nn

from sampan.errors import bad_argument
from sampan.pruning._checks import check_float_model, check_ratio, example_inputs as _example_inputs, split_skip
from sampan.pruning.magnitude import prune_unstructured
from sampan.pruning.structured import prune_structured


def prune(model: nn.Module, amount: float | Mapping[str, float], structured: bool = False, *,
          example_inputs: Any = None, input_spec: Any = None, skip: Iterable[Any] = ()) -> nn.Module:
    """Prunes a copy of ``model`` (the original is left as it was).

    With ``structured=False`` the ``amount`` share of smallest-magnitude weights of every Conv /
    Linear layer becomes zero (``torch.nn.utils.prune.l1_unstructured``): same shapes, sparse
    weights. With ``structured=True`` the ``amount`` share of each layer's filters (Conv2d) or
    neurons (Linear) with the smallest L1 norm is removed and the layers are rebuilt smaller,
    together with what reads them: BatchNorm, the next convolution or linear layer (through a
    flatten too) and residual additions (layers added together lose the same channels). The
    model's output layer keeps its size, and so does a layer whose output goes through an
    operation the pruner cannot shrink (``log_softmax``, ``cat``, ``x * 2`` ...): the other layers
    are still pruned, and naming such a layer in ``amount`` raises ``StructureError`` with the
    reason. Mirrors PaddleSlim's ``L1NormFilterPruner``.

    Args:
        model: the network (not modified).
        amount: share in (0, 1) to remove from every layer, or (structured only) a dict
            ``{layer_name: share}`` for chosen layers.
        structured: remove whole filters / neurons instead of single weights.
        example_inputs: a tensor or tuple the model accepts (structured pruning traces with it).
        input_spec: ``sampan.InputSpec`` (or a list) used when ``example_inputs`` is None.
        skip: layer names or types to leave whole, e.g. ``["fc3", torch.nn.Linear]``.

    Returns:
        The pruned copy.

    Raises:
        ValueError: ``amount`` outside (0, 1), an unknown layer name, two shares for layers joined by
            a residual addition, or a model whose structure cannot be shrunk (``StructureError``, a
            ``ValueError``, names the layer or operation).
        TypeError: ``model`` is already quantized (prune before quantizing).

    Example:
        >>> import torch
        >>> from sampan.pruning import prune
        >>> net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
        >>> small = prune(net, 0.5, structured=True, example_inputs=torch.randn(1, 8))
        >>> small[0].out_features, small[2].in_features
        (8, 8)
    """
    check_float_model(model)
    names, types = split_skip(skip, model)
    if not structured:
        if isinstance(amount, Mapping):
            raise TypeError(bad_argument("amount", amount, "a float when structured=False",
                                         "pass one share, or structured=True for per-layer shares"))
        return prune_unstructured(model, check_ratio("amount", amount), skip_names=names, skip_types=types)
    if not isinstance(amount, Mapping):
        check_ratio("amount", amount)
    inputs = _example_inputs(model, example_inputs, input_spec, what="structured pruning")
    return prune_structured(model, amount, inputs, skip_names=names, skip_types=types)
