"""Each learner's own copy of the course, kept up to date without ever overwriting their edits.

The hub copies ``notebooks/`` into ``~/course`` when a learner's server starts. A
file is copied when the learner does not have it; it is updated when the course
changed it *and* the learner's copy is still exactly what was last copied (its
hash is in ``~/course/.sampan-course.json``); a file the learner edited is never
touched. This is nbgitpuller's promise ("your changes win") without needing a git
URL: the course comes from the folder the hub runs from.

Example:
    >>> from pathlib import Path
    >>> report = sync_course(Path("notebooks"), Path("homes/lee/course"))  # doctest: +SKIP
    >>> report.kept  # files the learner changed  # doctest: +SKIP
    []
"""
from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from sampan.errors import bad_argument
from sampan.utils.io import atomic_write, atomic_write_json, read_json_dict

STATE = ".sampan-course.json"
_SKIP = {".ipynb_checkpoints", "__pycache__", ".git"}


@dataclass
class SyncReport:
    """What :func:`sync_course` did, as paths relative to the course folder."""

    copied: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _course_files(source: Path):
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        if path.is_file() and not path.is_symlink() and not _SKIP.intersection(rel.parts) and not _is_stamp(rel):
            yield rel, path


def _is_stamp(rel: Path) -> bool:
    """A built course's record of what it built (``.<name>.built``, :func:`sampan.path.lang.build_file`): not the
    learner's business."""
    return rel.name.startswith(".") and rel.name.endswith(".built")


def _check_source(source: Path) -> None:
    if not source.is_dir():
        raise NotADirectoryError(bad_argument(
            "SOURCE", str(source), "the course folder (notebooks/ of the checkout or image)",
            "check the course's path: on Kubernetes, the image's path in values.yaml (singleuser.lifecycleHooks)"))


def sync_course(source: Path, dest: Path) -> SyncReport:
    """Copies new course files into ``dest`` and updates the ones the learner has not changed.

    Args:
        source: the course (``notebooks/`` of the checkout the hub runs from).
        dest: the learner's copy, e.g. ``<home>/course``.
    """
    _check_source(source)
    report = SyncReport()
    if dest.is_symlink():  # the learner's link: the hub (maybe root) would write wherever it points
        report.kept.extend(rel.as_posix() for rel, _ in _course_files(source))
        return report
    dest.mkdir(parents=True, exist_ok=True)
    state_file = dest / STATE
    state = read_json_dict(state_file)
    try:  # a sync that stops part-way still records what it copied: those files are not the learner's edits
        for rel, src in _course_files(source):
            target, key, new = dest / rel, rel.as_posix(), _sha256(src)
            linked = any((dest / folder).is_symlink() for folder in rel.parents if folder != Path("."))
            if linked or target.is_symlink() or (target.exists() and not target.is_file()):
                report.kept.append(key)
                continue
            if not target.exists():
                report.copied.append(key)
            elif state.get(key) == new:
                continue
            elif (mine := _sha256(target)) == new:  # already the course's version (an earlier sync stopped early)
                state[key] = new
                continue
            elif state.get(key) == mine:  # untouched by the learner: the course's new version wins
                report.updated.append(key)
            else:  # the learner's edit (or their own file of that name) wins
                report.kept.append(key)
                continue
            atomic_write(target, lambda tmp, s=src: shutil.copyfile(s, tmp))
            state[key] = new
    finally:
        atomic_write_json(state_file, state)
    return report


NEWS_SETTINGS = ".jupyter/lab/user-settings/@jupyterlab/apputils-extension/notification.jupyterlab-settings"


# JupyterLab's UI language setting, the one `sampan lab --lang` seeds too; the locale per course language other
# than English (jupyterlab-language-pack-zh-CN brings zh_CN). Kept here: the prepare process imports no more.
LOCALE_SETTINGS = ".jupyter/lab/user-settings/@jupyterlab/translation-extension/plugin.jupyterlab-settings"
LAB_LOCALES = {"zh": "zh_CN"}


def prepare_home(home: Path, course_dir: str = "", datasets_dir: str = "", lang: str = "en") -> SyncReport:
    """What a learner's home holds before their server starts: the course synced into ``~/course``,
    JupyterLab's news check off (offline first), ``~/datasets`` linked to the shared datasets, and for a class in
    another language than English JupyterLab's menus in it (unless the learner chose a language already).

    The hub runs it in its own process, or, when the servers run as a learner account
    (``SAMPAN_HUB_LEARNER_USER``), in a process of that account: a hub run as root never writes in a folder
    the learner controls, where a link swapped in at the right moment would carry the write elsewhere.
    """
    report = SyncReport()
    if course_dir and Path(course_dir).is_dir():
        report = sync_course(Path(course_dir), home / "course")
    seeds = [(NEWS_SETTINGS, '{"fetchNews": "false", "checkForUpdates": false}\n')]
    if lang in LAB_LOCALES:
        seeds.append((LOCALE_SETTINGS, f'{{"locale": "{LAB_LOCALES[lang]}"}}\n'))
    for rel, text in seeds:
        setting = home / rel
        if not setting.exists() and not setting.is_symlink():
            setting.parent.mkdir(parents=True, exist_ok=True)
            setting.write_text(text, encoding="utf-8")
    link = home / "datasets"
    if datasets_dir and not link.exists() and not link.is_symlink():
        link.symlink_to(Path(datasets_dir), target_is_directory=True)
    return report


def main(argv: list[str] | None = None) -> int:
    """``python -m sampan.hub.course SOURCE DEST [LANG]``: the learner's copy of the course, synced from SOURCE into
    DEST (a Kubernetes ``postStart`` hook and the Slurm batch script run it in the learner's session). With LANG
    (default ``$SAMPAN_LANG``), the course built in that language is synced, and JupyterLab's menus follow it in a
    home that has no language setting yet; without, the source notebooks as they are."""
    import os
    import sys
    import tempfile

    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (2, 3):
        print("usage: python -m sampan.hub.course SOURCE DEST [LANG]", file=sys.stderr)
        return 2
    source, dest = Path(args[0]), Path(args[1])
    lang = args[2] if len(args) == 3 else os.environ.get("SAMPAN_LANG", "")
    try:
        if lang:
            from sampan.path.lang import build_course, normalize_language

            lang = normalize_language(lang, "LANG" if len(args) == 3 else "SAMPAN_LANG")
            _check_source(source)
            with tempfile.TemporaryDirectory(prefix="sampan-course-") as built:
                report = sync_course(build_course(lang, Path(built) / lang, source), dest)
            prepare_home(Path.home(), lang=lang)
        else:
            report = sync_course(source, dest)
    except (NotADirectoryError, ValueError) as exc:
        print(f"sampan.hub.course: {exc}", file=sys.stderr)
        return 2
    print(f"course: {len(report.copied)} copied, {len(report.updated)} updated, "
          f"{len(report.kept)} kept (your edits)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
