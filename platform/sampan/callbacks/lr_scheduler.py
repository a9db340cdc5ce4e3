"""``LRScheduler``: steps any torch LR scheduler by step or by epoch (``paddle.callbacks.LRScheduler``)."""
from __future__ import annotations

from torch.optim.lr_scheduler import LRScheduler as _TorchLRScheduler
from torch.optim.lr_scheduler import ReduceLROnPlateau

from sampan.callbacks.base import Callback
from sampan.errors import bad_argument


class LRScheduler(Callback):
    """Calls ``scheduler.step()`` after each optimizer step (``by_step``) or each epoch (``by_epoch``).

    ``ReduceLROnPlateau`` is stepped once per epoch with ``logs[monitor]``. The
    scheduler's state is saved in ``Model.save`` checkpoints and restored on resume.

    Args:
        scheduler: a ``torch.optim.lr_scheduler`` instance built on the prepared optimizer.
        by_step: step after every optimizer update (e.g. ``OneCycleLR``).
        by_epoch: step after every epoch (the default).
        monitor: the value fed to ``ReduceLROnPlateau``; without evaluation data, the training ``loss``.
            With ``fit(eval_freq=N)`` it is stepped only on the epochs that evaluate.

    Example:
        >>> import torch
        >>> from sampan.callbacks import LRScheduler
        >>> opt = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
        >>> cb = LRScheduler(torch.optim.lr_scheduler.StepLR(opt, step_size=5))
    """

    def __init__(self, scheduler, by_step: bool = False, by_epoch: bool = True, monitor: str = "eval_loss"):
        super().__init__()
        if not isinstance(scheduler, (_TorchLRScheduler, ReduceLROnPlateau)):
            raise TypeError(bad_argument("scheduler", scheduler, "a torch.optim.lr_scheduler instance",
                                         "write LRScheduler(torch.optim.lr_scheduler.StepLR(optimizer, 10))"))
        if by_step == by_epoch:
            raise ValueError(bad_argument("by_step", by_step, f"the opposite of by_epoch={by_epoch}",
                                          "choose one: by_step=True or by_epoch=True"))
        self.scheduler = scheduler
        self.by_step = by_step
        self.monitor = monitor
        self._plateau = isinstance(scheduler, ReduceLROnPlateau)
        self._last_step = None

    def on_train_begin(self, logs=None):
        self._check_optimizer()
        self._last_step = self.model.global_step

    def _check_optimizer(self) -> None:
        """A scheduler over another optimizer (one left from an earlier notebook cell) would change nothing."""
        prepared = getattr(self.model, "_optimizer", None)
        mine = getattr(self.scheduler, "optimizer", None)
        if prepared is None or mine is None or mine is prepared:
            return
        own = {id(p) for g in prepared.param_groups for p in g["params"]}
        own |= {id(p) for p in self.model.network.parameters()}
        if any(id(p) in own for g in mine.param_groups for p in g["params"]):
            return
        raise ValueError(bad_argument(
            "scheduler", self.scheduler, f"a scheduler over the prepared optimizer ({type(prepared).__name__}); "
            f"this one steps another optimizer ({type(mine).__name__}), so the learning rate would never change",
            "build the scheduler from the optimizer given to model.prepare(): opt = torch.optim.SGD(net.parameters(), "
            "0.1); model.prepare(opt, ...); LRScheduler(torch.optim.lr_scheduler.StepLR(opt, 10))"))

    def on_train_batch_end(self, step, logs=None):
        if self.by_step and not self._plateau and self.model.global_step != self._last_step:
            self._last_step = self.model.global_step
            self.scheduler.step()

    def on_epoch_end(self, epoch, logs=None):
        if self._plateau:
            logs = logs or {}
            value = logs.get(self.monitor)
            if value is None and not (self.monitor.startswith("eval_") and self.params.get("has_eval")):
                value = logs.get("loss")  # no evaluation in this fit: the training loss stands in
            if value is not None:  # with eval_freq > 1, epochs without evaluation leave the scheduler alone
                self.scheduler.step(value)
        elif not self.by_step:
            self.scheduler.step()

    def state_dict(self) -> dict:
        return {"scheduler": self.scheduler.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        if "scheduler" in state:
            self.scheduler.load_state_dict(state["scheduler"])
