"""``History``: every epoch's logs and every step's loss; ``Model.fit`` returns it."""
from __future__ import annotations

from sampan.callbacks.base import Callback


class History(Callback):
    """Records epoch logs in ``history[name]`` lists and the per-step loss in ``steps``.

    Example:
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
        for key, value in (logs or {}).items():
            if isinstance(value, (int, float)):
                self.history.setdefault(key, []).append(value)

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
