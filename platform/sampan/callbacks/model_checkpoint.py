"""``ModelCheckpoint``: full, resumable checkpoints every N epochs and/or of the best epoch."""
from __future__ import annotations

import os
from pathlib import Path

from sampan.callbacks._tracker import BestTracker, Mode
from sampan.callbacks.base import Callback
from sampan.errors import bad_argument


class ModelCheckpoint(Callback):
    """Saves ``model.save(save_dir/<epoch>)`` every ``save_freq`` epochs, and ``best`` when asked.

    Checkpoints hold weights, optimizer, scheduler, scaler, epoch, step and RNG
    states (see ``Model.save``); each is written atomically on rank 0.

    Args:
        save_dir: folder for the ``.pt`` files.
        save_freq: every how many epochs to save; ``0`` saves none but ``best``.
        monitor: with ``save_best_only``, the value that decides the best epoch.
        mode: ``"min"``, ``"max"`` or ``"auto"``.
        save_best_only: write only ``best.pt`` when ``monitor`` improves.
        save_final: write ``final.pt`` when training ends.

    Example:
        >>> from sampan.callbacks import ModelCheckpoint
        >>> ckpt = ModelCheckpoint("checkpoints", save_freq=1)
    """

    def __init__(self, save_dir: str | os.PathLike = "checkpoints", save_freq: int = 1, monitor: str | None = None,
                 mode: Mode = "auto", save_best_only: bool = False, save_final: bool = True):
        super().__init__()
        if not isinstance(save_dir, (str, os.PathLike)) or not str(save_dir).strip():
            raise TypeError(bad_argument("save_dir", save_dir, "a folder for the checkpoints",
                                         "write ModelCheckpoint('checkpoints')"))
        if not isinstance(save_freq, int) or save_freq < 0:
            raise ValueError(bad_argument("save_freq", save_freq, "an int >= 0 (epochs between checkpoints)"))
        if save_best_only and not monitor:
            raise ValueError(bad_argument("monitor", monitor, "a logged name when save_best_only=True",
                                          "write monitor='eval_acc'"))
        self.save_dir = Path(save_dir)
        self.save_freq = save_freq
        self.save_best_only = save_best_only
        self.save_final = save_final
        self.tracker = BestTracker(monitor, mode) if monitor else None
        self.saved: list[Path] = []

    def on_train_begin(self, logs=None):
        _check_folder(self.save_dir)  # now, not after the first epoch's training
        if self.tracker is not None and self.model.epoch == 0:  # a new run: its first epoch may be the best
            self.tracker.reset()

    def on_epoch_end(self, epoch, logs=None):
        if self.tracker is not None:
            value = self.tracker.value(logs, "ModelCheckpoint", self.params)
            if value is not None and self.tracker.improved(value):
                self.tracker.best = value
                self.saved.append(self.model.save(self.save_dir / "best"))
        if not self.save_best_only and self.save_freq and (epoch + 1) % self.save_freq == 0:
            self.saved.append(self.model.save(self.save_dir / str(epoch + 1)))

    def on_train_end(self, logs=None):
        if self.save_final and not self.save_best_only:
            self.saved.append(self.model.save(self.save_dir / "final"))

    def state_dict(self) -> dict:
        return {"tracker": self.tracker.state_dict() if self.tracker else {}}

    def load_state_dict(self, state: dict) -> None:
        if self.tracker is not None:
            self.tracker.load_state_dict(state.get("tracker", {}))


def _check_folder(save_dir: Path) -> None:
    """Raises when ``save_dir``, or the nearest part of it that exists, is a file: no checkpoint could be written."""
    existing = next((p for p in (save_dir, *save_dir.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        where = "is a file" if existing == save_dir else f"is inside {existing}, which is a file"
        raise ValueError(bad_argument("save_dir", str(save_dir), f"a folder for checkpoints, but it {where}",
                                      "pass a folder name that is not taken, e.g. save_dir='checkpoints'"))
