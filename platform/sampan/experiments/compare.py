"""Runs side by side, headless: the rows of a compare table, the parameters that differ, metric histories.

``sampan_widgets.RunCompare`` draws what these return; a script can print them.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Sequence

from sampan.experiments import store


@dataclass
class RunRow:
    """One run as the compare views use it (plain values, no MLflow objects)."""

    run_id: str
    name: str
    status: str
    start_time: int
    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)


def list_runs(filter_string: str = "", *, experiment: str | None = None, max_results: int = 500,
              missing_ok: bool = False) -> list[RunRow]:
    """The newest runs matching ``filter_string`` (MLflow's search syntax), as :class:`RunRow`.

    ``experiment`` and ``missing_ok`` are :func:`sampan.experiments.search_runs`'s: a named experiment that does
    not exist is an error, unless ``missing_ok``.

    Example:
        >>> from sampan.experiments.compare import list_runs
        >>> rows = list_runs("params.optimizer = 'Adam'", max_results=50)  # doctest: +SKIP
    """
    runs = store.search_runs(filter_string, experiment=experiment, max_results=max_results, missing_ok=missing_ok)
    return [RunRow(r.info.run_id, r.info.run_name or r.info.run_id[:8], r.info.status, r.info.start_time or 0,
                   dict(r.data.params), dict(r.data.metrics),
                   {k: v for k, v in r.data.tags.items() if not k.startswith("mlflow.") or k == "mlflow.parentRunId"})
            for r in runs]


def differing_params(rows: Sequence[RunRow]) -> list[str]:
    """Parameter names whose values are not the same in every run (absent counts as a value).

    Example:
        >>> from sampan.experiments.compare import RunRow, differing_params
        >>> a = RunRow("1", "a", "FINISHED", 0, {"lr": "0.1", "epochs": "5"})
        >>> b = RunRow("2", "b", "FINISHED", 0, {"lr": "0.01", "epochs": "5"})
        >>> differing_params([a, b])
        ['lr']
    """
    names = sorted({k for r in rows for k in r.params})
    return [n for n in names if len({r.params.get(n) for r in rows}) > 1]


def compare_table(rows: Sequence[RunRow], metrics: Sequence[str] | None = None) -> dict[str, Any]:
    """Columns and cells of a compare table: every parameter (differing ones flagged) and final metrics.

    Returns:
        ``{"params": [...], "differing": [...], "metrics": [...], "rows": [[name, status, *params, *metrics]]}``.
    """
    params = sorted({k for r in rows for k in r.params})
    differ = differing_params(rows)
    params = differ + [p for p in params if p not in differ]  # what differs first
    metrics = list(metrics) if metrics is not None else sorted(
        {k for r in rows for k in r.metrics if not k.startswith(("step/", "system/"))})
    table = [[r.name, r.status, *(r.params.get(p, "") for p in params), *(r.metrics.get(m) for m in metrics)]
             for r in rows]
    return {"params": params, "differing": differ, "metrics": metrics, "rows": table}


def metric_names(rows: Sequence[RunRow]) -> list[str]:
    """Every metric logged by these runs, epoch metrics first."""
    names = {k for r in rows for k in r.metrics}
    return sorted(names, key=lambda n: (n.startswith(("step/", "system/")), n))


def histories(run_ids: Sequence[str], metric: str) -> dict[str, list[tuple[int, float]]]:
    """``{run_id: [(step, value), ...]}`` of one metric, read in parallel (one query per run).

    Example:
        >>> from sampan.experiments.compare import histories, list_runs
        >>> rows = list_runs(max_results=10)  # doctest: +SKIP
        >>> curves = histories([row.run_id for row in rows[:10]], "eval_acc")  # doctest: +SKIP
    """
    client = store.client()

    def one(run_id: str) -> list[tuple[int, float]]:
        return sorted((m.step, m.value) for m in client.get_metric_history(run_id, metric))

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(run_ids, pool.map(one, run_ids)))
