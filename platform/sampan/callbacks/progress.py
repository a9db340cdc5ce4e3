"""``ProgressBar``: tqdm.auto bars (a widget in notebooks, text in a terminal), throttled.

``verbose=1`` shows a bar per epoch with the running loss and metrics;
``verbose=2`` prints one line per epoch (and per ``evaluate``) and no bar; ``verbose=0`` is silent.
Only rank 0 of a distributed job draws.
"""
from __future__ import annotations

import sys

from sampan.callbacks.base import Callback
from sampan.errors import bad_argument
from sampan.utils.i18n import tr


def _fmt(logs: dict, skip=("step", "batch_size")) -> dict:
    out = {}
    for k, v in logs.items():
        if k in skip or not isinstance(v, (int, float)) or isinstance(v, bool):
            continue
        out[k] = f"{v:.4g}" if isinstance(v, float) else v
    return out


class ProgressBar(Callback):
    """Progress for fit, evaluate and predict (``paddle.callbacks.ProgBarLogger``).

    Args:
        verbose: 0 silent, 1 bars, 2 one line per epoch.
        log_freq: update the bar's metrics every ``log_freq`` steps.
        mininterval: seconds between redraws (tqdm's throttle); longer when not on a terminal.

    Example:
        >>> from sampan.callbacks import ProgressBar
        >>> bar = ProgressBar(verbose=2)
    """

    def __init__(self, verbose: int = 1, log_freq: int = 10, mininterval: float | None = None):
        super().__init__()
        if not isinstance(verbose, int) or verbose < 0:  # Paddle's ProgBarLogger also takes 3 (shown as 2)
            raise ValueError(bad_argument("verbose", verbose, "0, 1 or 2 (0 silent, 1 progress bars, 2 one line "
                                          "per epoch)", "pass verbose=1, or verbose=0 for no output"))
        if not isinstance(log_freq, int):
            raise ValueError(bad_argument("log_freq", log_freq, "an int (steps between updates)", "pass log_freq=10"))
        self.verbose = verbose
        self.log_freq = max(1, log_freq)
        if mininterval is None:
            mininterval = 0.2 if sys.stderr.isatty() else 2.0
        self.mininterval = mininterval
        self._bar = None
        self._epochs = 1
        self._waiting = False  # the bar says that the first step compiles (prepare(to_static=True))

    def _enabled(self, bar: bool) -> bool:
        main = getattr(getattr(self.model, "_strategy", None), "is_main", True)
        return main and (self.verbose == 1 if bar else self.verbose >= 1)

    def _open(self, total, desc: str) -> None:
        from tqdm.auto import tqdm

        self._bar = tqdm(total=total, desc=desc, unit="step", mininterval=self.mininterval, leave=True,
                         dynamic_ncols=True, file=sys.stderr)

    def _close(self, logs: dict | None = None) -> None:
        if self._bar is not None:
            if logs:
                self._bar.set_postfix(_fmt(logs), refresh=False)
            self._bar.close()
            self._bar = None

    def _update(self, step: int, logs: dict | None) -> None:
        if self._bar is None:
            return
        if self._waiting:
            self._waiting = False
            self._bar.set_postfix_str("", refresh=False)
        self._bar.update(1)
        if logs and (step + 1) % self.log_freq == 0:
            self._bar.set_postfix(_fmt(logs), refresh=False)

    # fit
    def on_train_begin(self, logs=None):
        self._epochs = self.params.get("epochs", 1)

    def on_epoch_begin(self, epoch, logs=None):
        if self._enabled(bar=True):
            self._open(self.params.get("steps"), tr("Epoch {epoch}/{epochs}", epoch=epoch + 1, epochs=self._epochs))
            static = getattr(self.model, "_static_forward", lambda: None)()  # also @to_static on forward, and DDP
            if static is not None and static.first_training_step_waits:  # else the bar sits at 0 with no word
                self._waiting = True
                self._bar.set_postfix_str(tr("to_static: compiling and timing the first step"), refresh=True)

    def on_train_batch_end(self, step, logs=None):
        self._update(step, logs)

    def on_epoch_end(self, epoch, logs=None):
        if self._bar is not None:
            self._close(logs)
        elif self._enabled(bar=False):
            pairs = " - ".join(f"{k}: {v}" for k, v in _fmt(logs or {}).items())
            print(f"{tr('Epoch {epoch}/{epochs}', epoch=epoch + 1, epochs=self._epochs)} - {pairs}", flush=True)

    # evaluate / predict (standalone calls; evaluation inside fit shows in the epoch's line)
    def _standalone(self) -> bool:
        return not self.params.get("in_fit", False) and self._enabled(bar=True)

    def on_eval_begin(self, logs=None):
        if self._standalone():
            self._open(self.params.get("eval_steps"), tr("Eval"))

    def on_eval_batch_end(self, step, logs=None):
        if not self.params.get("in_fit", False):
            self._update(step, logs)

    def on_eval_end(self, logs=None):
        if self.params.get("in_fit", False):
            return
        if self._bar is not None:
            self._close(logs)
        elif self._enabled(bar=False):  # verbose=2 (Paddle's default): one line, as an epoch's
            pairs = " - ".join(f"{k}: {v}" for k, v in _fmt(logs or {}).items())
            print(f"{tr('Eval')} - {pairs}", flush=True)

    def on_predict_begin(self, logs=None):
        if self._enabled(bar=True):
            self._open(self.params.get("predict_steps"), tr("Predict"))

    def on_predict_batch_end(self, step, logs=None):
        self._update(step, None)

    def on_predict_end(self, logs=None):
        self._close()


class ProgBarLogger(ProgressBar):
    """``paddle.callbacks.ProgBarLogger``: a :class:`ProgressBar` with Paddle's argument order and defaults.

    Args:
        log_freq: update the metrics every ``log_freq`` steps.
        verbose: 0 silent, 1 bars, 2 one line per epoch (Paddle's default).

    Example:
        >>> from sampan.callbacks import ProgBarLogger
        >>> logger = ProgBarLogger(10, 2)  # log_freq=10, verbose=2, as in Paddle
    """

    def __init__(self, log_freq: int = 1, verbose: int = 2):
        super().__init__(verbose=verbose, log_freq=log_freq)
