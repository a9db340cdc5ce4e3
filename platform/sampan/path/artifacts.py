"""The local model zoo: artifacts that earlier lessons produce and later ones need.

Everything lives in ``<data dir>/zoo/<name>`` (a file or a folder), so the
whole path runs offline on a fresh machine. A lesson asks for what it needs
with :func:`artifact`; when it is missing the error names the lesson that
produces it.

Example:
    >>> weights = artifact("lenet_digits")  # doctest: +SKIP
"""
from __future__ import annotations

from pathlib import Path

from sampan.errors import SampanError
from sampan.utils.io import zoo_dir

__all__ = ["ArtifactMissingError", "artifact", "artifact_path", "missing_message", "work_dir", "zoo_dir"]


class ArtifactMissingError(SampanError, FileNotFoundError):
    """A zoo artifact is absent. Attributes: ``name``, ``path``, ``producer`` (lesson id or ``None``)."""

    def __init__(self, message: str, *, name: str, path: Path, producer: str | None):
        super().__init__(message)
        self.name, self.path, self.producer = name, path, producer


def artifact_path(name: str) -> Path:
    """Where artifact ``name`` lives: ``zoo/<name>`` when that exists, else ``zoo/<name>.pt``.

    ``zoo/<name>.pt`` is what ``sampan.vision.models.save_to_zoo(net, name)`` writes, so weights
    saved by a lesson are found under their zoo name; a folder or any other file can be stored
    under ``zoo/<name>`` itself.
    """
    _check_plain("name", name, "a plain artifact name such as 'lenet-digits'")
    plain = zoo_dir() / name
    return plain if plain.exists() else zoo_dir() / f"{name}.pt"


def missing_message(name: str, path: Path, producer, manifest_file=None, *, lang: str | None = None) -> str:
    """One wording for a missing artifact, shared by :func:`artifact` and the runner; in ``lang``
    (default the lesson's language, :func:`sampan.path.lang.default_language`)."""
    from sampan.path.lang import default_language, normalize_language
    from sampan.path.report import message

    lang = default_language() if lang is None else normalize_language(lang)
    where = message("artifact_missing", lang, name=name, path=path)
    if producer is None:
        return where + message("artifact_no_producer", lang)
    return where + message("artifact_producer", lang, id=producer.id, stage=producer.stage,
                           notebook=producer.notebook.name)


def artifact(name: str, manifest=None) -> Path:
    """The path of an existing zoo artifact, or an error naming the lesson that produces it.

    Args:
        name: the artifact name listed under a lesson's ``produces`` in ``path.yaml``.
        manifest: the ``path.yaml`` to look the producer up in; default the repository's.

    Raises:
        ArtifactMissingError: when it is absent.
    """
    path = artifact_path(name)
    if path.exists():
        return path
    producer = None
    try:
        from sampan.path.manifest import load_path

        producer = load_path(manifest, check_files=False).producer_of(name)
    except (FileNotFoundError, ValueError):
        pass
    raise ArtifactMissingError(missing_message(name, path, producer), name=name, path=path,
                               producer=producer.id if producer else None)


def work_dir(lesson: str) -> Path:
    """Where a lesson writes what it makes while it runs (checkpoints, exported models, logs):
    ``<data dir>/lessons/<lesson>``, created on first use.

    Run outputs stay out of the course folder, so the notebooks a learner opens are not buried under
    checkpoints, and a course update never touches them. Each lesson prints this folder where it first
    writes into it.

    Example:
        >>> work_dir("training_craft")  # doctest: +SKIP
        PosixPath('/home/ada/.cache/sampan/lessons/training_craft')
    """
    _check_plain("lesson", lesson, "a lesson id such as 'training_craft'", 'work_dir("training_craft")')
    from sampan.utils.io import writing_data_home

    with writing_data_home("keep the lesson's outputs") as home:
        path = home / "lessons" / lesson
        path.mkdir(parents=True, exist_ok=True)
    return path


def _check_plain(argument: str, value: object, expected: str, fix: str | None = None) -> None:
    """A name that stays one folder entry (no separator, not hidden, not ``..``), else a ValueError naming it."""
    if not isinstance(value, str) or not value or "/" in value or "\\" in value or value.startswith("."):
        from sampan.errors import bad_argument

        raise ValueError(bad_argument(argument, value, expected, fix))
