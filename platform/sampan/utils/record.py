"""``sampan.record``: a lesson's metric, carried in the notebook's own outputs.

Inside a Jupyter kernel the value is displayed as an output with the MIME type
:data:`RECORD_MIME` (plus a plain-text line), so that whoever executes the
notebook (papermill, nbclient, the learning-path runner) can collect it from the
saved ``.ipynb`` without any side channel. Outside a kernel it prints one line.
"""
from __future__ import annotations

import json
import math
import numbers
import sys
from typing import Any

RECORD_MIME = "application/vnd.sampan.record+json"


def _plain(value: Any) -> Any:
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    raise TypeError(
        f"Expected `value` to be a number, string, bool, list or dict. Received: value={value!r} "
        f"of type {type(value).__name__}. HINT: record a plain number, e.g. float(accuracy)."
    )


def _in_kernel() -> bool:
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def record(name: str, value: Any) -> Any:
    """Records a lesson's metric so the learning-path report can collect it.

    Args:
        name: metric name, e.g. ``"test_acc"``; the lesson's entry in
            ``notebooks/path.yaml`` gives its expected range.
        value: a number (tensors and NumPy scalars are converted), string, bool,
            or a list/dict of those.

    Returns:
        The plain value that was recorded.

    Example:
        >>> from sampan import record
        >>> record("test_acc", 0.981)
        [sampan.record] test_acc = 0.981
        0.981
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"Expected `name` to be a non-empty str. Received: name={name!r}.")
    plain = _plain(value)
    if isinstance(plain, float) and not math.isfinite(plain):
        plain_text = str(plain)
    else:
        plain_text = json.dumps(plain, ensure_ascii=False)
    text = f"[sampan.record] {name} = {plain_text}"
    if _in_kernel():
        from IPython.display import display  # only when already running inside IPython

        display({RECORD_MIME: {"name": name, "value": plain}, "text/plain": text}, raw=True)
    else:
        print(text)
    return plain


def collect_records(notebook: Any) -> dict[str, Any]:
    """Reads back every ``record`` output of an executed notebook (a path or an nbformat node)."""
    if isinstance(notebook, (str, bytes)) or hasattr(notebook, "__fspath__"):
        with open(notebook, encoding="utf-8") as fh:
            notebook = json.load(fh)
    found: dict[str, Any] = {}
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []) or []:
            data = output.get("data", {}) if isinstance(output, dict) else {}
            if RECORD_MIME in data:
                payload = data[RECORD_MIME]
                if isinstance(payload, str):
                    payload = json.loads(payload)
                found[payload["name"]] = payload["value"]
    return found
