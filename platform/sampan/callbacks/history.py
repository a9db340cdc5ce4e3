"""``History``: every epoch's logs and every step's loss; ``Model.fit`` returns it."""
from __future__ import annotations

import math

from sampan.callbacks.base import Callback


class History(Callback):
    """Records epoch logs in ``history[name]`` lists and the per-step loss in ``steps``.

    Every list has one entry per epoch, so ``history[name][i]`` belongs to ``epoch[i]``: a value absent
    from an epoch's logs (``eval_*`` on the epochs that ``fit(eval_freq=N)`` does not evaluate) is NaN.

    Example:
        >>> from sampan.callbacks import History
        >>> h = History()
        >>> h.on_epoch_end(0, {"loss": 0.5, "acc": 0.8})
        >>> h["loss"]
        [0.5]
    """

    def __init__(self) -> None:
        super().__init__()
        self.epoch: list[int] = []
        self.history: dict[str, list] = {}
        self.steps: list[float] = []

    def on_train_batch_end(self, step, logs=None):
        if logs and "loss" in logs:
            self.steps.append(logs["loss"])

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        values = {k: v for k, v in (logs or {}).items() if isinstance(v, (int, float))}
        # one entry per epoch in every list: NaN where a value is missing (eval_* with eval_freq > 1)
        for key in [*self.history, *(k for k in values if k not in self.history)]:
            column = self.history.setdefault(key, [])
            column.extend([math.nan] * (len(self.epoch) - 1 - len(column)))
            column.append(values.get(key, math.nan))

    def __getitem__(self, key: str) -> list:
        return self.history[key]

    def __contains__(self, key: str) -> bool:
        return key in self.history

    def keys(self):
        return self.history.keys()

    def to_dict(self) -> dict:
        return {"epoch": list(self.epoch), **{k: list(v) for k, v in self.history.items()}}

    def to_dataframe(self):
        """The epoch logs as a pandas DataFrame (needs pandas)."""
        from sampan.utils.imports import require

        return require("pandas").DataFrame(self.to_dict()).set_index("epoch")

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "history": self.history, "steps": self.steps}

    def load_state_dict(self, state: dict) -> None:
        self.epoch = list(state.get("epoch", []))
        self.history = {k: list(v) for k, v in state.get("history", {}).items()}
        self.steps = list(state.get("steps", []))

    def __repr__(self) -> str:
        return f"History(epochs={len(self.epoch)}, keys={sorted(self.history)})"
