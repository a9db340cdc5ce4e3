"""The learner's progress store and the zoo lookups (no kernels)."""
from __future__ import annotations

import json

import pytest

import sampan.path
from sampan.path.progress import RUNNER_ENV


def test_mark_done_by_hand_writes_progress_atomically(monkeypatch, capsys):
    monkeypatch.delenv(RUNNER_ENV, raising=False)
    assert sampan.path.load_progress() == {}
    assert sampan.path.mark_done("first_model", check=False) == "[sampan.path] lesson first_model done"
    data = json.loads(sampan.path.progress_file().read_text())
    assert data["version"] == 1
    assert data["lessons"]["first_model"]["status"] == "passed"
    assert data["lessons"]["first_model"]["source"] == "notebook"
    assert "[sampan.record] sampan.path.done" in capsys.readouterr().out
    assert not list(sampan.path.progress_file().parent.glob(".progress.json.*.tmp"))


def test_under_the_runner_mark_done_leaves_the_verdict_to_the_runner(monkeypatch):
    monkeypatch.setenv(RUNNER_ENV, "1")
    sampan.path.mark_done("first_model", check=False)
    assert sampan.path.load_progress() == {}


def test_a_failure_never_erases_a_pass_and_reset_forgets():
    sampan.path.update_progress("a", "passed", mode="full")
    entry = sampan.path.update_progress("a", "failed")
    assert entry["status"] == "passed" and entry["mode"] == "full" and "last_failed_at" in entry
    sampan.path.update_progress("b", "failed")
    sampan.path.reset_progress("a")
    assert set(sampan.path.load_progress()) == {"b"}
    sampan.path.reset_progress()
    assert sampan.path.load_progress() == {}


def test_mark_done_checks_the_lesson_id_against_the_shipped_path(monkeypatch):
    monkeypatch.delenv(RUNNER_ENV, raising=False)
    with pytest.raises(ValueError, match=r"Received: lesson='no_such_lesson'\. Known lessons: "):
        sampan.path.mark_done("no_such_lesson")
    with pytest.raises(ValueError, match="Expected `lesson` to be a lesson id"):
        sampan.path.mark_done("")
    assert sampan.path.load_progress() == {}


def test_a_corrupt_progress_file_reads_as_empty():
    file = sampan.path.progress_file()
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text("{not json")
    assert sampan.path.load_progress() == {}
    sampan.path.update_progress("a", "passed")
    assert sampan.path.load_progress()["a"]["status"] == "passed"


def test_missing_artifact_error_names_its_producer(planted):
    planted.notebook("01-beginner/pre.ipynb", "pass")
    file = planted.manifest([{"id": "beginner", "lessons": [
        {"id": "pre", "notebook": "01-beginner/pre.ipynb", "produces": ["shapes_resnet18"]}]}])
    with pytest.raises(sampan.path.ArtifactMissingError, match=r"produced by lesson 'pre'.*sampan path run --lesson pre") as info:
        sampan.path.artifact("shapes_resnet18", manifest=file)
    assert info.value.producer == "pre" and info.value.path == sampan.path.zoo_dir() / "shapes_resnet18.pt"
    info.value.path.parent.mkdir(parents=True)
    info.value.path.write_bytes(b"w")
    assert sampan.path.artifact("shapes_resnet18", manifest=file) == info.value.path
    with pytest.raises(ValueError, match="Expected `name` to be a plain artifact name"):
        sampan.path.artifact_path("../etc")
