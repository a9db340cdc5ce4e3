"""The learning path: ``notebooks/path.yaml``, a papermill runner, reports, progress and the model zoo.

Example:
    >>> import sampan
    >>> report = sampan.path.run(stage="beginner", quick=True)  # doctest: +SKIP
    >>> print(report.html_path)  # doctest: +SKIP
"""
from __future__ import annotations

from sampan.path.index import CourseIndex, course_index
from sampan.path.artifacts import ArtifactMissingError, artifact, artifact_path, work_dir, zoo_dir
from sampan.path.manifest import (
    LearningPath, Lesson, MetricRange, PathManifestError, Stage, default_manifest, load_path,
)
from sampan.path.progress import load_progress, mark_done, progress_file, reset_progress, update_progress
from sampan.path.report import list_runs, load_report
from sampan.path.runner import LessonResult, RunInterrupted, RunReport, run
from sampan.utils.notebooks import KernelNotFoundError

__all__ = [
    "ArtifactMissingError",
    "CourseIndex",
    "KernelNotFoundError",
    "LearningPath",
    "Lesson",
    "LessonResult",
    "MetricRange",
    "PathManifestError",
    "RunInterrupted",
    "RunReport",
    "Stage",
    "artifact",
    "artifact_path",
    "course_index",
    "default_manifest",
    "list_runs",
    "load_path",
    "load_progress",
    "load_report",
    "mark_done",
    "progress_file",
    "reset_progress",
    "run",
    "update_progress",
    "work_dir",
    "zoo_dir",
]
