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
