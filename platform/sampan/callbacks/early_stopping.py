"""``EarlyStopping``: stop when a monitored value stops improving (``paddle.callbacks.EarlyStopping``)."""
from __future__ import annotations

import copy

from sampan.callbacks._tracker import BestTracker, Mode
from sampan.callbacks.base import Callback
from sampan.errors import bad_argument


class EarlyStopping(Callback):
    """Stops training after ``patience`` epochs without improvement and restores the best weights.

    Args:
        monitor: logged value to watch, e.g. ``"eval_loss"`` or ``"eval_acc"``.
        mode: ``"min"``, ``"max"`` or ``"auto"`` (max for accuracy-like names).
        patience: epochs without improvement before stopping.
        min_delta: the smallest change that counts as an improvement.
        baseline: training stops if the value has not beaten this after ``patience`` epochs.
        restore_best_weights: load the best epoch's weights when training ends.
        verbose: print a line when stopping.

    Example:
        >>> from sampan.callbacks import EarlyStopping
        >>> stop = EarlyStopping(monitor="eval_acc", patience=2)
    """

    def __init__(self, monitor: str = "eval_loss", mode: Mode = "auto", patience: int = 0, min_delta: float = 0.0,
                 baseline: float | None = None, restore_best_weights: bool = True, verbose: int = 1):
        super().__init__()
        if not isinstance(patience, int) or patience < 0:
            raise ValueError(bad_argument("patience", patience, "an int >= 0"))
        self.tracker = BestTracker(monitor, mode, min_delta, baseline=baseline)
        self.patience = patience
        self.restore_best_weights = restore_best_weights
        self.verbose = verbose
        self.wait = 0
        self.stopped_epoch: int | None = None
        self.best_epoch: int | None = None
        self.best_weights: dict | None = None

    @property
    def monitor(self) -> str:
        return self.tracker.monitor

    @property
    def best(self) -> float:
        return self.tracker.best

    def on_train_begin(self, logs=None):
        if self.model.epoch == 0:  # a new run (a resumed one got its state from the checkpoint): forget the last
            self.tracker.reset()
            self.wait, self.stopped_epoch, self.best_epoch, self.best_weights = 0, None, None, None

    def on_epoch_end(self, epoch, logs=None):
        value = self.tracker.value(logs, "EarlyStopping", self.params)
        if value is None:
            return
        if self.tracker.improved(value):
            self.tracker.best, self.wait, self.best_epoch = value, 0, epoch
            if self.restore_best_weights:
                state = self.model.network.state_dict()
                self.best_weights = {k: v.detach().to("cpu", copy=True) for k, v in state.items()}
            return
        self.wait += 1
        if self.wait >= max(self.patience, 1):
            self.stopped_epoch = epoch
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        if self.stopped_epoch is not None and self.verbose:
            from sampan.utils.i18n import tr

            print(tr("EarlyStopping: stopped after epoch {stopped}; best {monitor} = {best} at epoch {best_epoch}.",
                     stopped=self.stopped_epoch + 1, monitor=self.monitor, best=f"{self.best:.6g}",
                     best_epoch=(self.best_epoch or 0) + 1))
        if self.restore_best_weights and self.best_weights is not None:
            self.model.network.load_state_dict(copy.deepcopy(self.best_weights))

    def state_dict(self) -> dict:
        return {"tracker": self.tracker.state_dict(), "wait": self.wait, "best_epoch": self.best_epoch,
                "best_weights": self.best_weights}

    def load_state_dict(self, state: dict) -> None:
        self.tracker.load_state_dict(state.get("tracker", {}))
        self.wait = state.get("wait", 0)
        self.best_epoch = state.get("best_epoch")
        self.best_weights = state.get("best_weights")
