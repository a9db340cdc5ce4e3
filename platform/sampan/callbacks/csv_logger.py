"""``CSVLogger``: one CSV row per epoch, flushed as it is written."""
from __future__ import annotations

import csv
import os
from pathlib import Path

from sampan.callbacks.base import Callback
from sampan.errors import bad_argument


class CSVLogger(Callback):
    """Writes each epoch's numeric logs to ``path``.

    Args:
        path: the CSV file (folders are created).
        separator: field separator.
        append: keep an existing file and add rows (use it when resuming).

    Example:
        >>> from sampan.callbacks import CSVLogger
        >>> logger = CSVLogger("runs/log.csv")
    """

    def __init__(self, path: str | os.PathLike, separator: str = ",", append: bool = False):
        super().__init__()
        if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
            raise TypeError(bad_argument("path", path, "the CSV file to write", "write CSVLogger('runs/log.csv')"))
        self.path = Path(path)
        self.separator = separator
        self.append = append
        self._fields: list[str] | None = None

    def on_train_begin(self, logs=None):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fields = None
        if self.append and self.path.is_file() and self.path.stat().st_size:
            with open(self.path, newline="", encoding="utf-8") as fh:
                self._fields = next(csv.reader(fh, delimiter=self.separator), None)
        elif not self.append:
            self.path.write_text("", encoding="utf-8")

    def on_epoch_end(self, epoch, logs=None):
        row = {"epoch": epoch + 1, **{k: v for k, v in (logs or {}).items() if isinstance(v, (int, float))}}
        if self._fields is None:
            eval_names = [f"eval_{n}" for n in self.params.get("metrics", []) if f"eval_{n}" not in row]
            self._fields = list(row) + (eval_names if self.params.get("has_eval") else [])
            with open(self.path, "a", newline="", encoding="utf-8") as fh:
                csv.writer(fh, delimiter=self.separator).writerow(self._fields)
        with open(self.path, "a", newline="", encoding="utf-8") as fh:
            csv.writer(fh, delimiter=self.separator).writerow([row.get(f, "") for f in self._fields])
