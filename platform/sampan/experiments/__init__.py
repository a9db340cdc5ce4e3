"""Experiments: every ``Model.fit`` recorded as an MLflow run, sweeps on Optuna, background jobs.

Runs go to an MLflow tracking store: a SQLite file under the data directory, or
``$SAMPAN_TRACKING_URI``. ``mlflow ui --backend-store-uri <uri>`` shows them too.

Example:
    >>> import sampan.experiments as ex
    >>> runs = ex.search_runs("tags.`sampan.lesson` = 'experiments'")  # doctest: +SKIP
    >>> study = ex.sweep("train.ipynb", {"lr": "1e-4:1e-1:log"}, trials=8)  # doctest: +SKIP
    >>> job = ex.submit("train.ipynb", {"epochs": 20})  # doctest: +SKIP
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sampan.experiments.store import StoreError, client, search_runs, tracking_uri

__all__ = [
    "Recorder",
    "StoreError",
    "client",
    "disable",
    "enable",
    "flush",
    "is_enabled",
    "last_run_id",
    "list_jobs",
    "log_artifact",
    "search_runs",
    "submit",
    "sweep",
    "tracking_uri",
]

# loaded on first use: the recorder imports the callbacks and torch, which reading the store (`sampan job list`,
# the experiments dashboard's table) does not need
_LAZY = {"sweep": "sampan.experiments.sweeps", "submit": "sampan.experiments.jobs",
         "list_jobs": "sampan.experiments.jobs",
         **dict.fromkeys(("Recorder", "disable", "enable", "flush", "is_enabled", "last_run_id", "log_artifact"),
                         "sampan.experiments.recorder")}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'sampan.experiments' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # pragma: no cover
    from sampan.experiments.jobs import list_jobs, submit
    from sampan.experiments.recorder import (Recorder, disable, enable, flush, is_enabled, last_run_id,
                                             log_artifact)
    from sampan.experiments.sweeps import sweep
