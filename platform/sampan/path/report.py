"""``report.json`` and ``report.html`` of a path run (Jinja2, one self-contained page).

Both are rewritten atomically after every lesson, so an interrupted run still
leaves a readable report of what finished.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sampan.utils.io import atomic_write_json, atomic_write_text

_TEMPLATE = "report.html.j2"

# Every string of report.html and of `sampan path list`, per language (sampan.path.lang.LANGUAGES).
MESSAGES: dict[str, dict[str, Any]] = {
    "en": {
        "html_lang": "en", "title": "Sampan learning-path report", "heading": "Learning-path report",
        "quick": "quick mode", "full": "full mode", "run_folder": "Run folder", "started": "started",
        "finished": "finished", "comma": ", ", "colon": ": ", "stop": ".", "parameters": "Parameters:",
        "took": "took {time}", "units": ("s", "min", "h"),
        "passed": "passed", "failed": "failed", "skipped": "skipped", "not_run": "not run",
        "col_stage": "Stage", "col_lesson": "Lesson", "col_status": "Status", "col_duration": "Duration",
        "col_metrics": "Metrics (expected range)", "col_notes": "Notes", "executed": "executed notebook",
        "expected": "expected", "in_cell": " in cell", "cell_source": "Cell source:", "traceback": "Traceback",
        "list_header": "{title}: {done}/{total} lessons done   (manifest {file})",
        "no_lessons": "(no lessons yet)", "after": "after {lessons}", "list_sep": ", ",
        # the Notes column: why a lesson failed, was skipped or did not run
        "error_in": "{ename} in {where}: {evalue}", "in_cell_n": "cell {cell} (counting from 0)", "a_cell": "a cell",
        "before_any_cell": "before any cell ran", "prerequisite_failed": "prerequisite {lessons} failed in this run",
        "earlier_failed": "an earlier lesson failed (use --keep-going to run the rest)",
        "no_mark_done": "passed (the lesson does not call sampan.path.mark_done)",
        "interrupted": "interrupted", "interrupted_before": "not run: the run was interrupted before this lesson",
        "interrupted_run": "This run was interrupted (Ctrl-C) before it finished.",
        "not_recorded": "not recorded", "metric_problem": "{name}: {problem}", "problems_sep": "; ",
        # `sampan path list | run` in the terminal
        "stage_minutes": "~{minutes:g} min", "lesson_minutes": "{minutes:>4g} min", "report": "report: {path}",
        # a recorded metric against its range (manifest.MetricRange.check), a missing zoo artifact, mark_done
        "range_expected": "expected {expect!r}, got {value!r}", "range_number": "expected a number, got {value!r}",
        "range_finite": "expected a finite number, got {value!r}",
        "range_outside": "{value:.6g} is outside [{low}, {high}]",
        "artifact_missing": "Artifact {name!r} is not in the local model zoo (looked for {path}).",
        "artifact_no_producer": " No lesson of the learning path produces it.",
        "artifact_producer": " It is produced by lesson {id!r} ({stage}: {notebook}). HINT: run that lesson first, "
                             "e.g. `sampan path run --lesson {id}`.",
        "lesson_reached_end": "[sampan.path] lesson {lesson} reached its end",
        "lesson_done": "[sampan.path] lesson {lesson} done",
    },
    "zh": {
        "html_lang": "zh-CN", "title": "Sampan 学习路线报告", "heading": "学习路线报告",
        "quick": "快速模式", "full": "完整模式", "run_folder": "运行目录", "started": "开始于",
        "finished": "结束于", "comma": "，", "colon": "：", "stop": "。", "parameters": "参数：",
        "took": "用时 {time}", "units": ("秒", "分", "小时"),
        "passed": "通过", "failed": "失败", "skipped": "跳过", "not_run": "未运行",
        "col_stage": "阶段", "col_lesson": "课程", "col_status": "状态", "col_duration": "用时",
        "col_metrics": "指标（期望范围）", "col_notes": "备注", "executed": "已执行的笔记本",
        "expected": "期望", "in_cell": "，出错单元格", "cell_source": "单元格代码：", "traceback": "错误回溯",
        "list_header": "{title}：已完成 {done}/{total} 节课   （路线文件 {file}）",
        "no_lessons": "（课程即将上线）", "after": "先修：{lessons}", "list_sep": "、",
        "error_in": "{where}出错：{ename}：{evalue}", "in_cell_n": "单元格 {cell}（从 0 开始编号）", "a_cell": "某个单元格",
        "before_any_cell": "在任何单元格运行之前", "prerequisite_failed": "先修课程 {lessons} 在本次运行中失败",
        "earlier_failed": "前面的课程失败了（加上 --keep-going 可继续运行其余课程）",
        "no_mark_done": "通过（本课没有调用 sampan.path.mark_done）",
        "interrupted": "已中断", "interrupted_before": "未运行：本次运行在这节课之前被中断",
        "interrupted_run": "本次运行在完成之前被中断（Ctrl-C）。",
        "not_recorded": "未记录", "metric_problem": "{name}：{problem}", "problems_sep": "；",
        "stage_minutes": "约 {minutes:g} 分钟", "lesson_minutes": "{minutes:>4g} 分钟", "report": "报告：{path}",
        "range_expected": "应为 {expect!r}，实际为 {value!r}", "range_number": "应为一个数，实际为 {value!r}",
        "range_finite": "应为一个有限的数，实际为 {value!r}", "range_outside": "{value:.6g} 不在 [{low}, {high}] 范围内",
        "artifact_missing": "本地模型库里没有制品 {name!r}（查找的位置：{path}）。",
        "artifact_no_producer": "学习路线中没有哪节课会产出它。",
        "artifact_producer": "它由课程 {id!r}（{stage}：{notebook}）产出。提示：请先运行那节课，"
                             "例如 `sampan path run --lesson {id}`。",
        "lesson_reached_end": "[sampan.path] 《{title}》已学完", "lesson_done": "[sampan.path] 《{title}》已完成",
    },
}


def message(key: str, lang: str = "en", **values) -> str:
    """One string of :data:`MESSAGES` in ``lang``, formatted with ``values``.

    Example:
        >>> from sampan.path.report import message
        >>> message("after", "zh", lessons="first_model")
        '先修：first_model'
    """
    return MESSAGES[lang][key].format(**values)


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


def render_html(data: dict[str, Any], *, links: bool = True) -> str:
    """The HTML page for a report dict (as in ``report.json``).

    Args:
        data: the report; one in a language this version does not know is drawn in English.
        links: link each executed notebook (relative to the run folder, where ``report.html`` lies); ``False``
            names its path as text instead, for a page shown elsewhere (the ``path_report`` dashboard, where a
            relative link would not reach the run folder).

    Raises:
        ValueError: ``data`` is not a report (not a dict, or a field the page needs is missing or of the wrong
            kind), e.g. a foreign or damaged ``report.json``.
    """
    import jinja2

    from sampan.path._template import REPORT_HTML

    if not isinstance(data, dict):
        raise ValueError(_not_a_report(f"it is a {type(data).__name__}, not an object"))
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    env.filters["bound"] = lambda b: "−∞/∞" if b is None else f"{b:g}"
    env.filters["num"] = _num
    env.filters["relative_link"] = _relative_link
    env.filters["when"] = _when
    env.globals["took"] = _took
    language = data.get("language")
    t = MESSAGES[language if language in MESSAGES else "en"]
    try:
        return env.from_string(REPORT_HTML).render(r=data, t=t, links=links)
    except jinja2.UndefinedError as exc:
        raise ValueError(_not_a_report(exc.message or "a field is missing")) from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise ValueError(_not_a_report(f"{type(exc).__name__}: {exc}")) from None


def _not_a_report(problem: str) -> str:
    return (f"The data is not a learning-path report that this version can show ({problem}). HINT: open a "
            "report.json written by `sampan path run`, or run it again to write a new one.")


def list_runs(runs_dir: str | Path) -> list[Path]:
    """Run folders (those holding a ``report.json``) under ``runs_dir``, newest first."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        return []
    return sorted((p for p in runs_dir.iterdir() if (p / "report.json").is_file()), key=lambda p: p.name, reverse=True)


def _relative_link(value: Any) -> str:
    """``value`` as a link inside the run folder, or ``""``: a report from elsewhere could name ``javascript:...``
    (script on a click) or a file of the reader's."""
    if not isinstance(value, str) or not value:
        return ""
    # as a browser reads it: leading spaces and control characters dropped, tabs and newlines anywhere
    # (" /\\evil.example/x" would otherwise pass as relative and open another host)
    value = value.lstrip("".join(map(chr, range(33)))).replace("\t", "").replace("\n", "").replace("\r", "")
    if not value:
        return ""
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or value.startswith(("/", "\\")) or ".." in value.replace("\\", "/").split("/"):
        return ""
    return relative_href(value)


def relative_href(href: str) -> str:
    """A relative link a browser can never read as a scheme (``javascript:x/a.html`` → ``./javascript:x/a.html``)."""
    return "./" + href if ":" in href.split("/", 1)[0] else href


def _moment(text: Any) -> Any:
    """``text`` as an aware datetime when it is an ISO time (``report.json``'s ``started``), else None."""
    import datetime

    try:
        moment = datetime.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def _when(text: Any) -> str:
    """``2026-12-06T18:41:50+00:00`` as ``2026-12-06 18:41:50 UTC`` (``+08:00`` kept as ``UTC+08:00``); anything
    else unchanged."""
    moment = _moment(text)
    if moment is None:
        return str(text)
    zone = "UTC" if not moment.utcoffset() else "UTC" + moment.isoformat(timespec="seconds")[19:]  # "+08:00"
    return f"{moment:%Y-%m-%d %H:%M:%S} {zone}"


def _took(started: Any, finished: Any, units: tuple[str, str, str] = ("s", "min", "h")) -> str:
    """How long the run took, ``42 s`` / ``3 min 05 s`` / ``1 h 02 min`` (in ``units``: seconds, minutes, hours);
    ``""`` when either time is not ISO."""
    begin, end = _moment(started), _moment(finished)
    if begin is None or end is None or end < begin:
        return ""
    s, m, h = units
    seconds = round((end - begin).total_seconds())
    if seconds < 60:
        return f"{seconds} {s}"
    if seconds < 3600:
        return f"{seconds // 60} {m} {seconds % 60:02d} {s}"
    return f"{seconds // 3600} {h} {seconds % 3600 // 60:02d} {m}"


def _num(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.4g}"
    return "—" if value is None else str(value)
