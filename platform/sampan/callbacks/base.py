"""The ``Callback`` base class and ``CallbackList`` (Keras / ``paddle.callbacks.Callback``).

A callback observes the loop through ``on_*`` hooks that receive a ``logs``
dict, and steers it only through flags on the model, such as
``model.stop_training = True``. When ``fit`` raises (an error in a step or a
callback, or Ctrl-C), ``on_train_end`` is not called: ``on_exception`` is,
so that a callback can release what ``on_train_begin`` took (a thread, a file,
a running profiler); then the error goes on to the caller.
"""
from __future__ import annotations

from typing import Any, Iterable


class Callback:
    """Base class: every hook does nothing until a subclass overrides it.

    Attributes:
        model: the ``sampan.Model`` being trained (set by ``set_model``).
        params: ``{"epochs", "steps", "verbose", "metrics", "batch_size"}`` (set by ``set_params``).

    Example:
        >>> from sampan.callbacks import Callback
        >>> class PrintLoss(Callback):
        ...     def on_epoch_end(self, epoch, logs=None):
        ...         print(epoch, logs["loss"])
    """

    def __init__(self) -> None:
        self.model: Any = None
        self.params: dict = {}

    def set_model(self, model: Any) -> None:
        self.model = model

    def set_params(self, params: dict) -> None:
        self.params = params

    # whole runs
    def on_train_begin(self, logs=None): ...
    def on_train_end(self, logs=None): ...

    def on_exception(self, exception: BaseException) -> None:
        """``fit`` raised ``exception`` after ``on_train_begin`` (``on_train_end`` will not come): release what
        the run took. Called on every callback, whether or not its own ``on_train_begin`` ran; what it raises is
        reported as a warning and the fit's own error goes on."""

    def on_eval_begin(self, logs=None): ...
    def on_eval_end(self, logs=None): ...
    def on_predict_begin(self, logs=None): ...
    def on_predict_end(self, logs=None): ...

    # epochs
    def on_epoch_begin(self, epoch, logs=None): ...
    def on_epoch_end(self, epoch, logs=None): ...

    # batches
    def on_train_batch_begin(self, step, logs=None): ...
    def on_train_batch_end(self, step, logs=None): ...
    def on_eval_batch_begin(self, step, logs=None): ...
    def on_eval_batch_end(self, step, logs=None): ...
    def on_predict_batch_begin(self, step, logs=None): ...
    def on_predict_batch_end(self, step, logs=None): ...

    # exact resume: callbacks with state save and restore it with the checkpoint
    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


_HOOKS = [name for name in vars(Callback) if name.startswith("on_")]


class CallbackList:
    """Calls a hook on each callback in order; only callbacks that override a hook are called."""

    def __init__(self, callbacks: Iterable[Callback] = ()):
        self.callbacks = list(callbacks)
        for cb in self.callbacks:
            if isinstance(cb, type) and issubclass(cb, Callback):
                raise TypeError(
                    f"Expected every item of `callbacks` to be a sampan.callbacks.Callback instance. "
                    f"Received: {cb.__name__}, a class. HINT: create the callback: {cb.__name__}(), with its "
                    f"arguments, e.g. callbacks=[EarlyStopping(monitor='eval_loss', patience=2)]."
                )
            if not isinstance(cb, Callback):
                raise TypeError(
                    f"Expected every item of `callbacks` to be a sampan.callbacks.Callback. "
                    f"Received: {cb!r} of type {type(cb).__name__}. HINT: subclass sampan.callbacks.Callback."
                )
        self._bound = {hook: [getattr(cb, hook) for cb in self.callbacks
                              if getattr(type(cb), hook) is not getattr(Callback, hook)]
                       for hook in _HOOKS}

    def __iter__(self):
        return iter(self.callbacks)

    def set_model(self, model) -> None:
        for cb in self.callbacks:
            cb.set_model(model)

    def set_params(self, params: dict) -> None:
        for cb in self.callbacks:
            cb.set_params(params)

    def call(self, hook: str, *args) -> None:
        for fn in self._bound[hook]:
            fn(*args)

    def call_exception(self, exception: BaseException) -> None:
        """``on_exception(exception)`` on every callback; one that raises is reported as a warning, so that every
        callback gets its turn and the fit's own error is the one raised."""
        import warnings

        for fn in self._bound["on_exception"]:
            try:
                fn(exception)
            except Exception as exc:  # noqa: BLE001 - the fit's error matters more; say this one and go on
                warnings.warn(f"{type(fn.__self__).__name__}.on_exception raised {type(exc).__name__}: {exc} "
                              f"while fit was ending with {type(exception).__name__}", RuntimeWarning, stacklevel=2)

    def find(self, kind: type) -> list:
        return [cb for cb in self.callbacks if isinstance(cb, kind)]
