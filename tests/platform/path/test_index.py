"""The course index: notebooks/index.ipynb lists the path; course_index() adds the learner's progress."""
from __future__ import annotations

import json

import sampan.path
from sampan.path.index import BEGIN, index_markdown, sync_index_notebook
from sampan.utils.io import repo_root


def test_index_notebook_lists_every_lesson_of_the_shipped_path():
    notebook = repo_root() / "notebooks" / "index.ipynb"
    assert not sync_index_notebook(notebook, write=False), \
        "notebooks/index.ipynb is out of date with path.yaml. HINT: run `sampan path index`"
    text = "".join("".join(c["source"]) for c in json.loads(notebook.read_text())["cells"])
    for lesson in sampan.path.load_path().lessons:
        assert f"]({lesson.relative_notebook(lesson.notebook.parents[1])})" in text
    assert json.loads(notebook.read_text())["metadata"]["kernelspec"]["name"] == "sampan"


def test_markdown_listing_and_progress_table(planted):
    planted.notebook("01-beginner/a.ipynb", "pass")
    planted.notebook("01-beginner/b.ipynb", "pass")
    file = planted.manifest([{"id": "beginner", "title": "入门 Beginner", "lessons": [
        {"id": "a", "notebook": "01-beginner/a.ipynb", "title": "First <steps>", "minutes": 7},
        {"id": "b", "notebook": "01-beginner/b.ipynb", "requires": ["a"]}]},
        {"id": "advanced", "lessons": []}])
    md = index_markdown(sampan.path.load_path(file))
    assert md.startswith(BEGIN)
    assert "1. [First <steps>](01-beginner/a.ipynb) · 7 min" in md and "after *a*" in md
    assert "*(lessons coming soon)*" in md
    sampan.path.update_progress("a", "passed")
    index = sampan.path.course_index(file)
    page = index._repr_html_()
    assert "1/2 lessons done" in page and str(index) == "Learning path: 1/2 lessons done"
    assert '<tr data-lesson="a"><td>✅</td><td><a href="01-beginner/a.ipynb">First &lt;steps&gt;</a>' in page
    assert '<tr data-lesson="b"><td>⬜</td>' in page


def test_the_chinese_listing_names_prerequisites_by_title_and_counts_minutes_in_chinese(planted):
    """In Chinese a prerequisite is its title in 《》 (not the English id) and a duration reads 分钟, not min."""
    bilingual = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"sampan": {"languages": ["en", "zh"]}},
                 "cells": []}
    for name in ("a", "b", "c"):
        planted.notebook(f"01-beginner/{name}.ipynb")
        (planted.root / "01-beginner" / f"{name}.ipynb").write_text(json.dumps(bilingual), encoding="utf-8")
    file = planted.manifest([{"id": "beginner", "title": {"en": "Beginner", "zh": "入门"}, "lessons": [
        {"id": "a", "notebook": "01-beginner/a.ipynb", "title": {"en": "Tensors", "zh": "张量"}, "minutes": 7},
        {"id": "b", "notebook": "01-beginner/b.ipynb", "title": {"en": "Training craft", "zh": "训练技巧"}},
        {"id": "c", "notebook": "01-beginner/c.ipynb", "title": {"en": "Transfer", "zh": "迁移学习"},
         "requires": ["a", "b"], "minutes": 12}]}])
    path = sampan.path.load_path(file)
    zh, en = index_markdown(path, "zh"), index_markdown(path, "en")
    assert "1. [张量](01-beginner/a.ipynb) · 7 分钟\n" in zh
    assert "3. [迁移学习](01-beginner/c.ipynb) · 12 分钟 — 先修《张量》《训练技巧》" in zh and "a, b" not in zh
    assert "3. [Transfer](01-beginner/c.ipynb) · 12 min — after *a, b*" in en
    page = sampan.path.course_index(file, lang="zh")._repr_html_()
    assert "<td>7 分钟</td>" in page and " min<" not in page
    assert "<td>7 min</td>" in sampan.path.course_index(file, lang="en")._repr_html_()
