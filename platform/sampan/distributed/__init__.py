"""Distributed training (``paddle.distributed``) on ``torch.distributed`` and torchrun.

``sampan launch`` (torchrun) starts a script on several processes or nodes;
``spawn`` and ``notebook_launcher`` start a function from Python or Jupyter.
Inside, ``Model.fit`` trains with DDP by itself (``WORLD_SIZE > 1``), or with
FSDP2 via ``prepare(strategy="fsdp")``.

Example:
    >>> import sampan.distributed as dist
    >>> dist.get_rank(), dist.get_world_size()
    (0, 1)
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> module; imported on first use so that `sampan launch` starts torchrun without loading the loop
_LAZY = {
    "DDPStrategy": "strategy", "FSDPStrategy": "strategy", "make_strategy": "strategy",
    "monitored_barrier": "strategy", "DataParallel": "parallel", "notebook_launcher": "launcher",
    "spawn": "launcher", "DistributedError": "env", "free_port": "env", "get_local_rank": "env",
    "get_rank": "env", "get_world_size": "env", "init_parallel_env": "env", "Strategy": "base",
}

__all__ = ["DDPStrategy", "DataParallel", "DistributedError", "FSDPStrategy", "Strategy", "free_port",
           "get_local_rank", "get_rank", "get_world_size", "init_parallel_env", "launch", "make_strategy",
           "monitored_barrier", "notebook_launcher", "spawn"]


def __getattr__(name: str) -> Any:
    if name == "launch":
        return importlib.import_module("sampan.distributed.launch")
    if name not in _LAZY:
        raise AttributeError(f"module 'sampan.distributed' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"sampan.distributed.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # pragma: no cover
    from sampan.distributed import launch
    from sampan.distributed.base import Strategy
    from sampan.distributed.env import (DistributedError, free_port, get_local_rank, get_rank, get_world_size,
                                        init_parallel_env)
    from sampan.distributed.launcher import notebook_launcher, spawn
    from sampan.distributed.parallel import DataParallel
    from sampan.distributed.strategy import DDPStrategy, FSDPStrategy, make_strategy, monitored_barrier
