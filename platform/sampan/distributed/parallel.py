"""``DataParallel``: ``paddle.DataParallel`` on ``torch.nn.parallel.DistributedDataParallel``."""
from __future__ import annotations

from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel

from sampan.distributed.env import init_parallel_env, local_device
from sampan.errors import bad_argument


def DataParallel(layer: torch.nn.Module, **ddp_kwargs: Any) -> DistributedDataParallel:  # noqa: N802 (Paddle name)
    """Wraps ``layer`` in ``DistributedDataParallel`` after joining the process group.

    The layer moves to this process's GPU (``cuda:LOCAL_RANK``) when it is on CUDA; CPU layers stay on
    the CPU (gloo). ``ddp_kwargs`` go to ``DistributedDataParallel``.

    Example:
        >>> net = DataParallel(torch.nn.Linear(4, 2))  # doctest: +SKIP
        >>> net.module  # the original layer  # doctest: +SKIP
    """
    if not isinstance(layer, torch.nn.Module):
        raise TypeError(bad_argument("layer", layer, "a torch.nn.Module"))
    init_parallel_env()
    device = next((p.device for p in layer.parameters()), torch.device("cpu"))
    device = local_device(device)
    layer = layer.to(device)
    ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(layer, device_ids=ids, **ddp_kwargs)
