"""path.yaml validation: each mistake names the file, the place and the fix."""
from __future__ import annotations

import json

import pytest

from sampan.path import PathManifestError, load_path


def _lesson(lid, **kw):
    return {"id": lid, "notebook": f"01-beginner/{lid}.ipynb", **kw}


@pytest.fixture
def course(planted):
    for name in ("a", "b", "c"):
        planted.notebook(f"01-beginner/{name}.ipynb", "pass")
    return planted


def test_valid_manifest_reads_into_typed_objects(course):
    file = course.manifest([
        {"id": "beginner", "title": "Beginner", "lessons": [
            _lesson("b", requires=["a"], minutes={"quick": 1, "full": 8},
                    metrics={"acc": {"quick": [0.5, None], "full": [0.9, 1.0]}, "loss": [None, 2]}),
            _lesson("a", produces=["w"], timeout=30),
        ]},
        {"id": "advanced", "lessons": [_lesson("c", needs=["w"])]},
    ], defaults={"seed": 3})
    path = load_path(file)
    # prerequisites come first even when the manifest lists them later
    assert [x.id for x in path.lessons] == ["a", "b", "c"]
    b = path.lesson("b")
    assert b.minutes == {"quick": 1.0, "full": 8.0} and b.timeout == {"quick": 600.0, "full": 3600.0}
    acc, loss = b.metrics
    assert acc.bounds("quick") == (0.5, None) and acc.bounds("full") == (0.9, 1.0)
    assert loss.quick == loss.full == (None, 2.0)
    assert acc.check(0.95, "full") is None and "outside [0.9, 1]" in acc.check(0.5, "full")
    assert "expected a number" in acc.check("x", "quick")
    assert path.lesson("a").timeout == {"quick": 30.0, "full": 30.0}
    assert path.producer_of("w").id == "a" and path.seed == 3
    assert path.stage("advanced").title == "Advanced"


@pytest.mark.parametrize("lessons, match", [
    ([_lesson("a", requires=["ghost"])], r"stages\[0\]\.lessons\[0\] \(lesson 'a'\)\.requires: unknown lesson 'ghost'"),
    ([_lesson("a", requires=["b"]), _lesson("b", requires=["c"]), _lesson("c", requires=["a"])],
     r"cycle in prerequisites: a -> b -> c -> a"),
    ([_lesson("a", requires=["a"])], r"lesson 'a' requires itself"),
    ([_lesson("a", metrics={"acc": [1.0, 0.5]})], r"metrics\.acc: low bound 1\.0 is above high bound 0\.5"),
    ([_lesson("a", metrics={"acc": {"quick": [0, "high"]}})], r"metrics\.acc\.quick: expected numeric bounds"),
    ([_lesson("a", metrics={"acc": [0.5]})], r"metrics\.acc: expected a range \[low, high\], got \[0\.5\]"),
    ([_lesson("a", metrics={"acc": {"fast": [0, 1]}})], r"metrics\.acc: unknown key\(s\) fast"),
    ([_lesson("a", metrics={"acc": [None, None]})], r"needs at least one bound"),
    ([_lesson("a"), _lesson("a")], r"lesson id 'a' is used twice"),
    ([_lesson("a", needs=["weights"])], r"artifact 'weights' is produced by no lesson"),
    ([_lesson("a", minutes=-1)], r"minutes\.quick: expected a non-negative number, got -1"),
    ([_lesson("a", prereqs=["b"])], r"unknown key\(s\) prereqs; allowed keys:"),
    ([{"id": "a", "notebook": "01-beginner/a.py"}], r"expected a relative path to an \.ipynb file"),
])
def test_malformed_manifest_is_a_clear_error(course, lessons, match):
    file = course.manifest([{"id": "beginner", "lessons": lessons}])
    with pytest.raises(PathManifestError, match=match) as info:
        load_path(file)
    assert str(file) in str(info.value)


def test_listed_lesson_whose_file_is_missing(course):
    file = course.manifest([{"id": "beginner", "lessons": [_lesson("a"), _lesson("missing_one")]}])
    with pytest.raises(PathManifestError, match=r"lessons\[1\].*the notebook '01-beginner/missing_one\.ipynb' does not exist"):
        load_path(file)
    assert [x.id for x in load_path(file, check_files=False).lessons] == ["a", "missing_one"]


def test_not_yaml_and_empty_stages(course):
    bad = course.root / "bad.yaml"
    bad.write_text("stages: [unclosed\n")
    with pytest.raises(PathManifestError, match="not valid YAML"):
        load_path(bad)
    with pytest.raises(PathManifestError, match="expected a non-empty list of stages"):
        load_path(course.manifest([]))


def test_the_shipped_path_is_valid():
    path = load_path()  # notebooks/path.yaml of this checkout, every listed notebook present
    assert [s.id for s in path.stages] == ["beginner", "intermediate", "advanced"]
    assert path.lessons, "the learning path lists no lesson"
    for lesson in path.lessons:
        assert lesson.metrics, f"lesson {lesson.id} records no metric with an expected range"
        assert lesson.notebook.is_file()
        kernel = json.loads(lesson.notebook.read_text(encoding="utf-8"))["metadata"]["kernelspec"]["name"]
        assert kernel == "sampan", f"lesson {lesson.id} names kernel {kernel!r}; lessons use the Sampan kernel"


def test_a_relative_manifest_reads_as_its_absolute_file(course, monkeypatch):
    file = course.manifest([{"id": "beginner", "lessons": [_lesson("a"), _lesson("b")]}])
    monkeypatch.chdir(file.parent)
    path = load_path("path.yaml")
    assert path.file == file.resolve() and path.root.is_absolute()
    # lesson links in the index, `path list` and the reports stay relative to the course folder
    assert [x.relative_notebook(path.root) for x in path.lessons] == ["01-beginner/a.ipynb", "01-beginner/b.ipynb"]


def test_lesson_ids_follow_the_teacher_dashboards_rule(planted):
    """One identifier rule for the manifest and the progress store: ids of any script load (and are stored on the
    hub); a dot is allowed inside; nothing that could be a path ('..', 'a/b') or too long for the store."""
    from sampan.hub.progress_store import is_identifier

    for lid in ("第一课", "урок_1", "v1.2"):
        planted.notebook(f"01-beginner/{lid}.ipynb", "pass")
    file = planted.manifest([{"id": "入门", "lessons": [_lesson("第一课"), _lesson("урок_1"), _lesson("v1.2")]}])
    path = load_path(file)
    assert [x.id for x in path.lessons] == ["第一课", "урок_1", "v1.2"] and path.stages[0].id == "入门"
    assert all(is_identifier(x.id) for x in path.lessons)
    for bad in ("..", ".hidden", "-x", "a b", "x" * 129):
        planted.notebook("01-beginner/a.ipynb", "pass")
        file = planted.manifest([{"id": "beginner", "lessons": [{"id": bad, "notebook": "01-beginner/a.ipynb"}]}])
        with pytest.raises(PathManifestError, match=r"expected an identifier of letters, digits, '_', '\.' or '-'"):
            load_path(file)
        assert not is_identifier(bad)


def test_a_folder_given_as_the_manifest_is_called_a_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"manifest .*empty is a folder, not a file\.$"):
        load_path(tmp_path / "empty")
    (tmp_path / "course").mkdir()
    (tmp_path / "course" / "path.yaml").write_text("stages: []\n")
    with pytest.raises(FileNotFoundError, match=r"is a folder, not a file \(pass the path\.yaml inside it\)"):
        load_path(tmp_path / "course")
    with pytest.raises(FileNotFoundError, match=r"manifest .*missing\.yaml does not exist"):
        load_path(tmp_path / "missing.yaml")
