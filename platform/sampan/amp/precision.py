"""``PrecisionPlugin``: the base of the loop's precision feature, full precision by default.

Every hook is a no-op or the plain torch call (``nullcontext`` autocast, ``loss.backward()``,
``optimizer.step()``), so a plain CPU fit pays nothing for it; :class:`sampan.amp.AmpPrecision`
overrides them with ``torch.autocast`` and ``GradScaler``. It sits beside its implementation, as
Lightning Fabric keeps ``Precision`` in ``plugins/precision/``; the name keeps it apart from the
metric :class:`sampan.metric.Precision`.

Example:
    >>> import torch
    >>> from sampan.amp import PrecisionPlugin
    >>> plugin = PrecisionPlugin()
    >>> net = torch.nn.Linear(2, 1)
    >>> with plugin.autocast():
    ...     loss = net(torch.ones(1, 2)).sum()
    >>> plugin.backward(loss)
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterable

import torch


class PrecisionPlugin:
    """Full precision: every hook is a no-op or the plain torch call."""

    def autocast(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def setup(self, network: torch.nn.Module, optimizer: Any) -> tuple[torch.nn.Module, Any]:
        return network, optimizer

    def convert_input(self, inputs: list) -> list:
        """The batch's inputs, just before the forward pass (AMP keeps a reference for the NaN doctor)."""
        return inputs

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
        """Callbacks this feature adds to ``fit``."""
        return []

    def nan_check(self) -> Any:
        """The fit's one NaN check when the user gave none: a ``TerminateOnNaN`` (AMP: the NaN doctor)."""
        from sampan.callbacks.terminate_on_nan import TerminateOnNaN

        return TerminateOnNaN()

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass
