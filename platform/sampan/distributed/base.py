"""``Strategy``: the base of the loop's distribution feature, one process on one device by default.

Every hook is the single-process idiom (``network.to(device)``, an ordinary ``DataLoader``,
``nullcontext`` for ``no_sync``, identity all-reduce), so a plain fit pays nothing for it;
:class:`~sampan.distributed.DDPStrategy` and :class:`~sampan.distributed.FSDPStrategy` in
``sampan.distributed.strategy`` override them. It imports nothing from ``torch.distributed``, so
``Model`` can use it without loading the process-group machinery.

Example:
    >>> import torch
    >>> from sampan.distributed import Strategy
    >>> Strategy().setup(torch.nn.Linear(2, 1), torch.device("cpu")).weight.device.type
    'cpu'
"""
from __future__ import annotations

import contextlib
import sys
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset


class Strategy:
    """One process on one device."""

    world_size = 1
    rank = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def setup(self, network: torch.nn.Module, device: torch.device) -> torch.nn.Module:
        return network.to(device)

    def unwrap(self, network: torch.nn.Module) -> torch.nn.Module:
        return network

    def setup_optimizer(self, optimizer: Any) -> Any:
        """After ``setup``: an optimizer over the parameters ``setup`` produced (FSDP replaces them)."""
        return optimizer

    def make_loader(self, dataset: Dataset, *, batch_size: int, shuffle: bool, drop_last: bool,
                    num_workers: int, collate_fn=None) -> DataLoader:
        return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last,
                          num_workers=num_workers, collate_fn=collate_fn,
                          persistent_workers=num_workers > 0)

    def set_epoch(self, loader: DataLoader, epoch: int) -> None:
        sampler = getattr(loader, "sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)

    def no_sync(self, network: torch.nn.Module, sync: bool) -> contextlib.AbstractContextManager:
        """Context for a micro-batch; DDP skips the gradient all-reduce when ``sync`` is False."""
        return contextlib.nullcontext()

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    def real_rows(self, loader: Any) -> int:
        """How many of the rows ``loader`` gives this process are samples to count: a distributed sampler pads
        every rank's share to one length with repeated samples at its end, which an evaluation must not count
        again. In one process, all of them."""
        return sys.maxsize

    def gather_predictions(self, batches: list[list[torch.Tensor]], loader: Any) -> list[list[torch.Tensor]]:
        """Every process's predictions (per batch, per output) in the data's order; in one process, its own."""
        return batches

    def gather_rows(self, values: list[Any]) -> list[list[Any]]:
        """Every process's rows of ``values`` (one evaluation batch's outputs and labels, the padding cut) as
        batches, for the metrics that do not reduce their state across processes themselves. In one process,
        ``[values]``: this batch as it is."""
        return [list(values)]

    def barrier(self) -> None:
        pass
