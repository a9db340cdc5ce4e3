"""``VisualDL``: training curves as TensorBoard event files (``paddle.callbacks.VisualDL``).

Paddle's callback writes VisualDL's log format; this one writes TensorBoard's, through
``torch.utils.tensorboard.SummaryWriter``, which TensorBoard, VS Code and JupyterLab's
TensorBoard extensions open (``tensorboard --logdir LOG_DIR``).
"""
from __future__ import annotations

import os
from typing import Any

from sampan.callbacks.base import Callback

_SKIP = ("step", "batch_size")


def _scalars(logs: dict | None) -> dict[str, float]:
    return {k: float(v) for k, v in (logs or {}).items()
            if k not in _SKIP and isinstance(v, (int, float)) and not isinstance(v, bool)}


class VisualDL(Callback):
    """Writes scalars to ``log_dir``: ``train/<name>`` every ``log_freq`` steps, ``epoch/<name>`` and
    ``eval/<name>`` every epoch, ``evaluate/<name>`` after each standalone ``evaluate`` (its own curve).

    Only rank 0 of a distributed job writes. The files are TensorBoard event files.

    Args:
        log_dir: the folder of the event files (created).
        log_freq: write training scalars every ``log_freq`` batches (default: every batch, as Paddle).

    Example:
        >>> from sampan.callbacks import VisualDL
        >>> cb = VisualDL("runs/visualdl")
        >>> # model.fit(train, val, epochs=3, callbacks=cb); then: tensorboard --logdir runs/visualdl
    """

    def __init__(self, log_dir: str | os.PathLike = "./log", log_freq: int = 1):
        from sampan.errors import check_int

        super().__init__()
        self.log_dir = os.fspath(log_dir)
        self.log_freq = check_int("log_freq", log_freq)
        self._writer: Any = None
        self._train_step = 0
        self._eval_step = 0

    def _open(self) -> Any:
        if self._writer is None and getattr(getattr(self.model, "_strategy", None), "is_main", True):
            from sampan.utils.imports import require

            require("tensorboard")
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=self.log_dir)
        return self._writer

    def _write(self, prefix: str, values: dict[str, float], step: int) -> None:
        writer = self._open()
        if writer is not None:
            for name, value in values.items():
                writer.add_scalar(f"{prefix}/{name}", value, step)

    def on_train_begin(self, logs=None):
        self._open()

    def on_train_batch_end(self, step, logs=None):
        self._train_step += 1
        if self._train_step % self.log_freq == 0:
            self._write("train", _scalars(logs), self._train_step)

    def on_epoch_end(self, epoch, logs=None):
        values = _scalars(logs)
        self._write("epoch", {k: v for k, v in values.items() if not k.startswith("eval_")}, epoch + 1)
        self._write("eval", {k[5:]: v for k, v in values.items() if k.startswith("eval_")}, epoch + 1)
        if self._writer is not None:
            self._writer.flush()

    def on_eval_end(self, logs=None):
        if not self.params.get("in_fit", False):
            self._eval_step += 1  # its own curve: "eval/" is fit's, one point per epoch
            self._write("evaluate", _scalars(logs), self._eval_step)
            self._close()

    def on_train_end(self, logs=None):
        self._close()

    def on_exception(self, exception):
        self._close()  # the curves up to the error reach the file

    def _close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
