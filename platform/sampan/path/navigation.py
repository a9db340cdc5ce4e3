"""Every lesson's "Previous / Next" line, generated from ``notebooks/path.yaml`` so that it cannot drift.

Each lesson of the manifest ends with one markdown cell tagged ``sampan-nav`` that holds :func:`nav_line`:
its place in its stage and links to the lessons before and after it in the manifest's order (stages in
order, each with its lessons in order). :func:`write_navigation` puts those cells in place (only the cells
that differ; nothing else in a notebook changes); :func:`check_navigation` lists what disagrees, and the
test suite fails on it. No other markdown cell of a lesson may say "Next:" or "Previous:".

Example:
    >>> from sampan.path.navigation import check_navigation, write_navigation
    >>> write_navigation()  # doctest: +SKIP
    []
    >>> check_navigation()  # doctest: +SKIP
    []
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from sampan.path.manifest import LearningPath, Lesson, load_path

TAG = "sampan-nav"
_STRAY = re.compile(r"(?<![\w`])(Next|Previous):", re.IGNORECASE)  # a hand-written navigation line


_WORDS = {  # the line in each language of sampan.path.lang (the sources hold English; the Chinese build its own)
    "en": {"head": "**Learning path** · {stage}, lesson {n} of {total}", "previous": "Previous: ", "next": "Next: ",
           "next_stage": " (next stage: {stage})", "last": "the last lesson of the path", "all": "All lessons"},
    "zh": {"head": "**学习路线** · {stage}，第 {n} 课，共 {total} 课", "previous": "上一课：", "next": "下一课：",
           "next_stage": "（下一阶段：{stage}）", "last": "这是学习路线的最后一课", "all": "全部课程"},
}


def _link(lesson: Lesson, start: Path, lang: str = "en") -> str:
    from sampan.path.lang import lesson_title

    return f"[{lesson_title(lesson, lang)}]({Path(os.path.relpath(lesson.notebook, start.parent)).as_posix()})"


def nav_line(path: LearningPath, lesson_id: str, lang: str = "en") -> str:
    """The navigation line of one lesson, from the manifest's order.

    Args:
        path: the learning path (:func:`sampan.path.load_path`).
        lesson_id: a lesson of ``path``.
        lang: ``"en"`` (the line in the source notebooks) or ``"zh"`` (the Chinese build's line).

    Example:
        >>> from sampan.path import load_path
        >>> nav_line(load_path(), "first_model")  # doctest: +SKIP
        '**Learning path** · 入门 Beginner, lesson 3 of 4 · Previous: [Tensors and autograd](...) · ...'
    """
    order = [(stage, lesson) for stage in path.stages for lesson in stage.lessons]
    index = next((i for i, (_, lesson) in enumerate(order) if lesson.id == lesson_id), None)
    if index is None:
        path.lesson(lesson_id)  # raises the manifest's error naming the known lessons
    stage, lesson = order[index]
    number = [s.id for s in stage.lessons].index(lesson.id) + 1
    words = _WORDS[lang]
    parts = [words["head"].format(stage=stage.text("title", lang), n=number, total=len(stage.lessons))]
    if index > 0:
        parts.append(words["previous"] + _link(order[index - 1][1], lesson.notebook, lang))
    if index + 1 < len(order):
        next_stage, next_lesson = order[index + 1]
        other = words["next_stage"].format(stage=next_stage.text("title", lang)) if next_stage.id != stage.id else ""
        parts.append(words["next"] + _link(next_lesson, lesson.notebook, lang) + other)
    else:
        parts.append(words["last"])
    index_nb = path.root / "index.ipynb"
    parts.append(f"[{words['all']}]({Path(os.path.relpath(index_nb, lesson.notebook.parent)).as_posix()})")
    return " · ".join(parts)


def _nav_cells(nb) -> list[int]:
    return [i for i, cell in enumerate(nb.cells) if TAG in cell.get("metadata", {}).get("tags", [])]


def _problems(nb, want: str, lesson: Lesson) -> list[str]:
    cells = _nav_cells(nb)
    problems = []
    if len(cells) != 1:
        problems.append(f"{lesson.id}: {len(cells)} cells tagged {TAG!r}, expected 1")
    elif nb.cells[cells[0]].source != want:
        problems.append(f"{lesson.id}: its navigation line differs from path.yaml's order:\n"
                        f"  has:  {nb.cells[cells[0]].source}\n  want: {want}")
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and i not in cells and _STRAY.search(cell.source):
            problems.append(f"{lesson.id}: cell {i} has a hand-written navigation line "
                            f"({_STRAY.search(cell.source).group(0)!r}); only the {TAG!r} cell may have one")
    return problems


def check_navigation(manifest: str | Path | None = None) -> list[str]:
    """What disagrees with the manifest: one line per problem, empty when every lesson is right.

    Args:
        manifest: the ``path.yaml`` to follow (default: the course's, :func:`sampan.path.default_manifest`).
    """
    import nbformat  # lazily: importing sampan.path stays cheap

    path = load_path(manifest)
    problems = []
    for lesson in path.lessons:
        nb = nbformat.read(lesson.notebook, as_version=4)
        problems += _problems(nb, nav_line(path, lesson.id), lesson)
    return problems


def write_navigation(manifest: str | Path | None = None) -> list[Path]:
    """Writes each lesson's navigation cell (appended at the end when it has none); returns the notebooks
    changed. A notebook whose cell is already right is not rewritten.

    Args:
        manifest: the ``path.yaml`` to follow (default: the course's).
    """
    import nbformat

    from sampan.utils.io import atomic_write_text

    path = load_path(manifest)
    changed = []
    for lesson in path.lessons:
        nb = nbformat.read(lesson.notebook, as_version=4)
        want = nav_line(path, lesson.id)
        cells = _nav_cells(nb)
        if len(cells) == 1 and nb.cells[cells[0]].source == want:
            continue
        for i in reversed(cells):
            del nb.cells[i]
        cell = nbformat.v4.new_markdown_cell(want)
        cell.metadata["tags"] = [TAG]
        if nb.nbformat_minor < 5:  # cell ids came with nbformat 4.5
            cell.pop("id", None)
        nb.cells.append(cell)
        atomic_write_text(lesson.notebook, nbformat.writes(nb) + "\n")
        changed.append(lesson.notebook)
    return changed


if __name__ == "__main__":  # python -m sampan.path.navigation: rewrites the lines that drifted
    for notebook in write_navigation():
        print(f"navigation updated: {notebook}")
