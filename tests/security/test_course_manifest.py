"""A learning-path manifest cannot make the path runner execute a notebook outside its course folder
(issue 11, security item 4). The runner executes every notebook ``path.yaml`` names: an entry that is
absolute, climbs with ``..`` or is a link leading out is refused, naming the entry, before anything runs.
"""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

import sampan.path
from sampan.cli import main
from sampan.errors import UnsafeFileError

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
