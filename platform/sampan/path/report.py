"""``report.json`` and ``report.html`` of a path run (Jinja2, one self-contained page).

Both are rewritten atomically after every lesson, so an interrupted run still
leaves a readable report of what finished.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sampan.utils.io import atomic_write_json, atomic_write_text

_TEMPLATE = "report.html.j2"


def write_report(report) -> tuple[Path, Path]:
    """Writes ``report.json`` and ``report.html`` into ``report.run_dir``; returns their paths."""
    data = report.to_dict()
    atomic_write_json(report.json_path, data)
    atomic_write_text(report.html_path, render_html(data))
    return report.json_path, report.html_path


def load_report(path: str | Path) -> dict[str, Any]:
    """Reads a ``report.json`` (or the run folder holding it)."""
    path = Path(path)
    if path.is_dir():
        path = path / "report.json"
    return json.loads(path.read_text(encoding="utf-8"))


def render_html(data: dict[str, Any]) -> str:
    """The HTML page for a report dict (as in ``report.json``)."""
    import jinja2

    from sampan.path._template import REPORT_HTML

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    env.filters["bound"] = lambda b: "−∞/∞" if b is None else f"{b:g}"
    env.filters["num"] = _num
    return env.from_string(REPORT_HTML).render(r=data)


def list_runs(runs_dir: str | Path) -> list[Path]:
    """Run folders (those holding a ``report.json``) under ``runs_dir``, newest first."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        return []
    return sorted((p for p in runs_dir.iterdir() if (p / "report.json").is_file()), key=lambda p: p.name, reverse=True)


def _num(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.4g}"
    return "—" if value is None else str(value)
