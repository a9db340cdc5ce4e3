"""Every lesson's Previous/Next line comes from notebooks/path.yaml (issue 16: the links had drifted)."""
import shutil

import nbformat
import pytest

from sampan.path import default_manifest, load_path
from sampan.path.navigation import TAG, check_navigation, nav_line, write_navigation


def test_every_lesson_of_the_course_has_the_line_path_yaml_gives():
    assert check_navigation() == []  # on failure: python -m sampan.path.navigation


def test_lines_follow_the_manifest_order_across_stages():
    path = load_path()
    order = [lesson for stage in path.stages for lesson in stage.lessons]
    first, last = nav_line(path, order[0].id), nav_line(path, order[-1].id)
    assert "Previous:" not in first and f"Next: [{order[1].title}]" in first
    assert "Next:" not in last and "the last lesson of the path" in last
    crossing = next(i for i in range(len(order) - 1) if order[i].stage != order[i + 1].stage)
    line = nav_line(path, order[crossing].id)
    assert f"Next: [{order[crossing + 1].title}](../" in line and "(next stage:" in line


def test_a_drifted_line_or_a_hand_written_next_fails_the_check_and_is_rewritten(tmp_path):
    course = tmp_path / "notebooks"
    shutil.copytree(default_manifest().parent, course)
    manifest = course / "path.yaml"
    text = manifest.read_text(encoding="utf-8")  # swap two lessons of the beginner stage
    a, b = "      - id: tensors_and_autograd\n", "      - id: first_model\n"
    start_a, start_b = text.index(a), text.index(b)
    end_b = text.index("      - id: ", start_b + 1)
    text = text[:start_a] + text[start_b:end_b] + text[start_a:start_b] + text[end_b:]
    manifest.write_text(text, encoding="utf-8")
    problems = check_navigation(manifest)
    drifted = {p.split(":")[0] for p in problems}
    assert {"environment_check", "tensors_and_autograd", "first_model", "datasets_and_transforms"} <= drifted
    assert "custom_cpp_operator" not in drifted
    lesson = course / "03-advanced" / "custom_cpp_operator.ipynb"
    nb = nbformat.read(lesson, as_version=4)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell("Next: *anything you like*."))
    nbformat.write(nb, lesson)
    assert any(p.startswith("custom_cpp_operator: cell 1 has a hand-written") for p in check_navigation(manifest))
    changed = write_navigation(manifest)
    assert course / "01-beginner" / "first_model.ipynb" in changed and lesson not in changed
    nb = nbformat.read(course / "01-beginner" / "environment_check.ipynb", as_version=4)
    assert [c.source for c in nb.cells if TAG in c.metadata.get("tags", [])] == [
        nav_line(load_path(manifest), "environment_check")]
    assert "Next: [Your first model](first_model.ipynb)" in nb.cells[-1].source
    assert [p for p in check_navigation(manifest) if not p.startswith("custom_cpp_operator")] == []


def test_unknown_lesson_is_named():
    with pytest.raises(ValueError, match="no_such_lesson"):
        nav_line(load_path(), "no_such_lesson")
