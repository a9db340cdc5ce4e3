"""A learning-path manifest cannot make the path runner execute a notebook outside its course folder
(issue 11, security item 4). The runner executes every notebook ``path.yaml`` names: an entry that is
absolute, climbs with ``..`` or is a link leading out is refused, naming the entry, before anything runs.

Nor can it run code through a parameter name: papermill writes each parameter as ``NAME = value`` into the
notebook, escaping the value but pasting the name, and a notebook without a ``parameters`` cell receives every
name. A name that is not a Python identifier is refused by the manifest's parser and by ``execute_notebook``.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
import yaml

import sampan.path
from sampan.cli import main
from sampan.errors import UnsafeFileError
from sampan.utils.notebooks import execute_notebook

MANIFEST = """version: 1
title: shared course
stages:
  - id: one
    title: One
    lessons:
      - {{id: lesson, notebook: {notebook!r}}}
"""


@pytest.fixture
def course(tmp_path):
    """``tmp_path/course/`` (the shared course) and, outside it, a notebook that writes a marker when run."""
    marker = tmp_path / "executed"
    evil = tmp_path / "elsewhere" / "evil.ipynb"
    evil.parent.mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"open({str(marker)!r}, 'w').close()")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, evil)
    folder = tmp_path / "course"
    folder.mkdir()
    return folder, evil, marker


def _manifest(folder: Path, notebook: str) -> Path:
    file = folder / "path.yaml"
    file.write_text(MANIFEST.format(notebook=notebook))
    return file


def _entries(folder: Path, evil: Path) -> dict[str, str]:
    (folder / "link.ipynb").symlink_to(evil)
    (folder / "sub").symlink_to(evil.parent, target_is_directory=True)
    return {"absolute": str(evil), "dotdot": "../elsewhere/evil.ipynb", "file link": "link.ipynb",
            "folder link": "sub/evil.ipynb"}


@pytest.mark.parametrize("kind", ["absolute", "dotdot", "file link", "folder link"])
def test_load_path_refuses_a_notebook_outside_the_course(course, kind):
    folder, evil, _ = course
    notebook = _entries(folder, evil)[kind]
    with pytest.raises(UnsafeFileError, match=r"stages\[0\]\.lessons\[0\].*\.notebook: the notebook .* is outside "
                                              r"the course folder") as info:
        sampan.path.load_path(_manifest(folder, notebook))
    assert info.value.entry.endswith(".notebook") and info.value.path.endswith("path.yaml")
    assert repr(notebook) in str(info.value)


def test_path_run_executes_nothing_from_such_a_manifest(course, capsys, tmp_path):
    folder, evil, marker = course
    manifest = _manifest(folder, "../elsewhere/evil.ipynb")
    assert main(["path", "--manifest", str(manifest), "run", "--quick", "--output", str(tmp_path / "runs")]) == 2
    assert "outside the course folder" in capsys.readouterr().err
    assert not marker.exists()


def test_a_notebook_inside_the_course_is_accepted(course):
    folder, evil, _ = course
    (folder / "lessons").mkdir()
    (folder / "lessons" / "ok.ipynb").write_bytes(evil.read_bytes())
    path = sampan.path.load_path(_manifest(folder, "lessons/ok.ipynb"))
    assert path.lessons[0].notebook == (folder / "lessons" / "ok.ipynb").resolve()


@pytest.fixture
def plain_course(tmp_path):
    """``tmp_path/course/`` holding ``lesson.ipynb`` (no ``parameters`` cell, as the course's index has none), and the
    path of a file that only injected code would create."""
    folder = tmp_path / "course"
    folder.mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, folder / "lesson.ipynb")
    return folder, tmp_path / "planted"


def _code_as_name(marker: Path) -> str:
    """A parameter name that, pasted by papermill as ``NAME = 1``, creates ``marker``."""
    return f"open({str(marker)!r}, 'w').close(); x"


def _parameters_manifest(folder: Path, parameters: dict, where: str) -> Path:
    """``folder/path.yaml`` with one lesson and ``parameters`` in the lesson (``where="lesson"``) or the defaults."""
    lesson = {"id": "lesson", "notebook": "lesson.ipynb", **({"parameters": parameters} if where == "lesson" else {})}
    top = {"defaults": {"parameters": parameters}} if where == "defaults" else {}
    file = folder / "path.yaml"
    file.write_text(yaml.safe_dump({"version": 1, "title": "shared course", **top,
                                    "stages": [{"id": "one", "lessons": [lesson]}]}, sort_keys=False))
    return file


_PLACES = {"lesson": "stages[0].lessons[0] (lesson 'lesson').parameters", "defaults": "defaults.parameters"}


@pytest.mark.parametrize("where", ["lesson", "defaults"])
def test_path_run_refuses_a_parameter_name_that_is_code(plain_course, capsys, tmp_path, where):
    folder, marker = plain_course
    name = _code_as_name(marker)
    manifest = _parameters_manifest(folder, {name: 1}, where)
    assert main(["path", "--manifest", str(manifest), "run", "--quick", "--output", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert f"{_PLACES[where]}: the parameter name {name!r} is not a Python identifier" in err
    assert "HINT: parameter names must be Python identifiers such as QUICK or SEED" in err
    assert not marker.exists()


@pytest.mark.parametrize("name", ["x; y", "1x", "a b", "if", "QUICK\n", 3])
def test_load_path_refuses_a_parameter_name_that_is_not_an_identifier(plain_course, name):
    folder, _ = plain_course
    expected = re.escape(f"{_PLACES['lesson']}: the parameter name {name!r} is not a Python identifier")
    with pytest.raises(UnsafeFileError, match=expected) as info:
        sampan.path.load_path(_parameters_manifest(folder, {"QUICK": True, name: 1}, "lesson"))
    assert info.value.entry == _PLACES["lesson"] and info.value.path.endswith("path.yaml")


def test_identifier_parameter_names_are_accepted(plain_course):
    folder, _ = plain_course
    path = sampan.path.load_path(_parameters_manifest(folder, {"QUICK": True, "lr_0": 0.1, "_seed": 2}, "lesson"))
    assert path.lessons[0].parameters == {"QUICK": True, "lr_0": 0.1, "_seed": 2}


def test_execute_notebook_refuses_a_parameter_name_that_is_code(plain_course, tmp_path):
    folder, marker = plain_course
    name, out = _code_as_name(marker), tmp_path / "out.ipynb"
    expected = (r"Expected every name in `parameters` to be a Python identifier.*Received: " + re.escape(repr(name))
                + r".*HINT: parameter names must be Python identifiers such as QUICK or SEED")
    with pytest.raises(ValueError, match=expected):
        execute_notebook(str(folder / "lesson.ipynb"), str(out), parameters={"QUICK": True, name: 1},
                         kernel_name="python3", progress_bar=False)
    assert not marker.exists() and not out.exists()


def test_path_index_never_rewrites_a_notebook_through_a_link(tmp_path):
    """A course from elsewhere ships ``index.ipynb`` as a link to another notebook of the learner's (one with the
    listing markers); ``sampan path index`` rewrote that notebook with the author's listing."""
    import json

    from sampan.path.index import BEGIN, END, sync_index_notebook

    victim = tmp_path / "mine" / "index.ipynb"
    victim.parent.mkdir()
    text = json.dumps({"cells": [{"cell_type": "markdown", "metadata": {}, "source": f"{BEGIN}\nmine\n{END}"}],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    victim.write_text(text)
    course = tmp_path / "course"
    course.mkdir()
    (course / "index.ipynb").symlink_to(victim)
    with pytest.raises(UnsafeFileError, match=r"is a link .*HINT: replace the link with the notebook itself"):
        sync_index_notebook(course / "index.ipynb", course / "path.yaml")
    assert victim.read_text() == text
