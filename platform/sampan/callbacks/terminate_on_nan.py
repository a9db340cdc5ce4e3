"""``TerminateOnNaN``: stop at the first non-finite loss and say which batch produced it."""
from __future__ import annotations

import math

from sampan.callbacks.base import Callback
from sampan.errors import NonFiniteLossError


class TerminateOnNaN(Callback):
    """Raises :class:`sampan.errors.NonFiniteLossError` (or only stops) when the loss is NaN or infinite.

    The one NaN check of a fit: ``fit`` adds the precision plugin's (this class, or under AMP the
    :class:`sampan.amp.NanDoctor` subclass that diagnoses the batch) unless one is among the callbacks.

    Args:
        raise_error: raise (the default) rather than just set ``model.stop_training``.

    Example:
        >>> from sampan.callbacks import TerminateOnNaN
        >>> cb = TerminateOnNaN()
    """

    def __init__(self, raise_error: bool = True):
        super().__init__()
        self.raise_error = raise_error
        self.epoch = 0
        self.message: str | None = None

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, step, logs=None):
        loss = (logs or {}).get("loss")
        if loss is None or math.isfinite(loss):
            return
        self.model.stop_training = True
        error = self.error(step, loss)
        self.message = str(error)
        if self.raise_error:
            raise error

    def error(self, step: int, loss: float) -> NonFiniteLossError:
        """The exception for a non-finite loss; :class:`sampan.amp.NanDoctor` overrides it to diagnose."""
        message = (
            f"The loss became {loss} at epoch {self.epoch + 1}, batch {step} (global step "
            f"{getattr(self.model, 'global_step', '?')}). HINT: lower the learning rate, clip gradients with "
            f"prepare(grad_clip=1.0), check the inputs for NaN/inf, or use amp='bf16' rather than 'fp16'."
        )
        return NonFiniteLossError(message, epoch=self.epoch, step=step, value=loss)
