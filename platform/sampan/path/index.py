"""The course index: the path as Markdown (for ``notebooks/index.ipynb``) and as HTML with progress.

``notebooks/index.ipynb`` holds the Markdown listing between two markers; after
editing ``path.yaml`` regenerate it with ``sampan path index``
(a test checks that it is in sync).

Example:
    >>> course_index()  # in a notebook: the path with your progress and links  # doctest: +SKIP
"""
from __future__ import annotations

import html
import json
from pathlib import Path

from sampan.path.manifest import LearningPath, Lesson, load_path
from sampan.path.progress import load_progress

BEGIN, END = "<!-- sampan-path:begin -->", "<!-- sampan-path:end -->"
_MARKS = {"passed": "✅", "failed": "❌"}
_PROGRESS = {"en": "Your progress: {done}/{total} lessons done", "zh": "你的学习进度：已完成 {done}/{total} 节课"}


# "after" lists the lessons to take first: English names their ids, Chinese their titles in 《》 (no separator
# between titles in book-title marks, as in the lessons' own 先修课程 lines)
_WORDS = {"en": {"about": " · about {n:g} min", "soon": "- *(lessons coming soon)*", "after": " — after *{x}*",
                 "required": "{id}", "sep": ", ", "min": "{n:g} min"},
          "zh": {"about": " · 约 {n:g} 分钟", "soon": "- *（课程即将上线）*", "after": " — 先修{x}",
                 "required": "《{title}》", "sep": "", "min": "{n:g} 分钟"}}


def _after(path: LearningPath, lesson: Lesson, lang: str) -> str:
    """The lessons to take before ``lesson``, in ``lang`` (empty when none)."""
    from sampan.path.lang import lesson_title

    if not lesson.requires:
        return ""
    words = _WORDS[lang]
    names = (words["required"].format(id=x, title=lesson_title(path.lesson(x), lang)) for x in lesson.requires)
    return words["after"].format(x=words["sep"].join(names))


def index_markdown(path: LearningPath, lang: str = "en") -> str:
    """The listing of stages and lessons with links, between :data:`BEGIN` and :data:`END`, in ``lang``
    (a Markdown cell marked ``{"sampan": {"lang": "zh"}}`` gets the Chinese listing)."""
    from sampan.path.lang import lesson_title

    words = _WORDS[lang]
    lines = [BEGIN, ""]
    for stage in path.stages:
        total = sum(x.minutes["full"] for x in stage.lessons)
        lines.append(f"### {stage.text('title', lang)}" + (words["about"].format(n=total) if total else ""))
        if stage.description:
            lines.append(f"*{stage.text('description', lang)}*")
        lines.append("")
        if not stage.lessons:
            lines.append(words["soon"])
        for n, lesson in enumerate(stage.lessons, 1):
            link = lesson.relative_notebook(path.root)
            after = _after(path, lesson, lang)
            summary = lesson.text("summary", lang)
            minutes = words["min"].format(n=lesson.minutes["full"])
            lines.append(f"{n}. [{lesson_title(lesson, lang)}]({link}) · {minutes}{after}"
                         + (f"<br>{summary}" if summary else ""))
        lines.append("")
    lines.append(END)
    return "\n".join(lines)


class CourseIndex:
    """The path with the learner's progress; displays as an HTML table in a notebook."""

    def __init__(self, path: LearningPath, progress: dict, lang: str = "en"):
        self.path, self.progress, self.lang = path, progress, lang

    @property
    def done(self) -> int:
        return sum(1 for x in self.path.lessons if self.progress.get(x.id, {}).get("status") == "passed")

    def _repr_html_(self) -> str:
        from sampan.path.lang import lesson_title

        rows, lang = [], self.lang
        for stage in self.path.stages:
            rows.append(f'<tr><th colspan="4" style="text-align:left">{html.escape(stage.text("title", lang))}</th></tr>')
            for lesson in stage.lessons:
                status = self.progress.get(lesson.id, {}).get("status", "")
                href = html.escape(lesson.relative_notebook(self.path.root))
                minutes = _WORDS[lang]["min"].format(n=lesson.minutes["full"])
                rows.append(
                    f'<tr data-lesson="{html.escape(lesson.id)}"><td>{_MARKS.get(status, "⬜")}</td>'
                    f'<td><a href="{href}">{html.escape(lesson_title(lesson, lang))}</a></td>'
                    f'<td>{minutes}</td><td>{html.escape(lesson.text("summary", lang))}</td></tr>')
        done = _PROGRESS[lang].format(done=self.done, total=len(self.path.lessons))
        return f'<div class="sampan-course-index"><p><b>{done}</b></p><table>{"".join(rows)}</table></div>'

    def __str__(self) -> str:
        return f"{self.path.title}: {self.done}/{len(self.path.lessons)} lessons done"

    __repr__ = __str__


def course_index(manifest: str | Path | None = None, lang: str | None = None) -> CourseIndex:
    """The path with your progress (``notebooks/index.ipynb`` displays it), in ``lang``: ``"en"`` or ``"zh"``;
    default :func:`sampan.path.lang.default_language` (``sampan lab --lang zh`` sets ``SAMPAN_LANG`` for it)."""
    from sampan.path.lang import default_language, normalize_language

    lang = default_language() if lang is None else normalize_language(lang)
    return CourseIndex(load_path(manifest, check_files=False), load_progress(), lang)


def sync_index_notebook(notebook: str | Path, manifest: str | Path | None = None, *, write: bool = True) -> bool:
    """Replaces the listing between the markers in ``notebook``; returns True when it changed."""
    from sampan.utils.io import atomic_write_text

    if Path(notebook).expanduser().is_symlink():  # a course from elsewhere: its index could lead to any notebook
        from sampan.errors import UnsafeFileError

        raise UnsafeFileError(
            f"The course index notebook {notebook} is a link (to {Path(notebook).expanduser().readlink()}); "
            "`sampan path index` rewrites the notebook, and never through a link a course brings along. HINT: "
            "replace the link with the notebook itself", path=str(notebook))
    notebook = Path(notebook).expanduser().resolve()
    if not notebook.is_file():
        raise FileNotFoundError(
            f"The course index notebook {notebook} does not exist. It is the notebook beside path.yaml whose "
            f"Markdown cell holds the lesson listing between the markers {BEGIN} and {END}. HINT: create it (a "
            f"notebook with one Markdown cell holding those two lines), then run `sampan path index` again.")
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    from sampan.path.lang import cell_language

    path, changed, found = load_path(manifest), False, False
    for cell in nb["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "markdown" and BEGIN in source and END in source:
            found = True
            listing = index_markdown(path, cell_language(cell) or "en")
            new = source[: source.index(BEGIN)] + listing + source[source.index(END) + len(END):]
            if new != source:
                changed = True
                cell["source"] = new.splitlines(keepends=True)
    if changed and write:
        atomic_write_text(notebook, json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    if found:
        return changed
    raise ValueError(f"{notebook} has no Markdown cell with the markers {BEGIN} ... {END}. HINT: add both lines to "
                     "the Markdown cell that should list the lessons, then run `sampan path index` again")
