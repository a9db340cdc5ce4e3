"""The loop's optional features as objects whose hooks default to doing nothing.

``Precision`` (AMP) and ``Strategy`` (single process, DDP, FSDP) plug into the
one training loop in ``sampan.hapi.loop``. The defaults here are what a plain
CPU fit uses: ``nullcontext`` autocast, a plain ``backward``, a plain
``optimizer.step``, one process, an ordinary ``DataLoader``. ``sampan.amp``
and ``sampan.distributed`` subclass them.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterable

import torch
from torch.utils.data import DataLoader, Dataset


class Precision:
    """Full precision: every hook is a no-op or the plain torch call."""

    def autocast(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def setup(self, network: torch.nn.Module, optimizer: Any) -> tuple[torch.nn.Module, Any]:
        return network, optimizer

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def step(self, optimizer: torch.optim.Optimizer, params: Iterable[torch.Tensor], grad_clip: float | None) -> bool:
        """Clips (when asked) and steps; returns False when the step was skipped."""
        if grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(params, grad_clip)
        optimizer.step()
        return True

    def logs(self) -> dict:
        """Extra values for the batch logs (loss scale, skipped steps)."""
        return {}

    def callbacks(self) -> list:
        """Callbacks this feature adds to ``fit`` (AMP: the NaN doctor, placed before ``TerminateOnNaN``)."""
        return []

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


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

    def barrier(self) -> None:
        pass
