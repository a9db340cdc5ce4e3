"""Atomic file writes: a reader never sees a half-written file, a crash leaves the old one intact."""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yields a temporary path beside ``path``; on success it is fsynced and renamed over ``path``.

    Example:
        >>> with atomic_path("out.bin") as tmp:  # doctest: +SKIP
        ...     tmp.write_bytes(b"data")
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def atomic_write(path: str | os.PathLike, writer: Callable[[Path], Any]) -> Path:
    """Calls ``writer(tmp_path)`` and moves the result to ``path`` atomically."""
    with atomic_path(path) as tmp:
        writer(tmp)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def atomic_write_json(path: str | os.PathLike, data: Any) -> Path:
    return atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def data_home() -> Path:
    """The data directory: ``$SAMPAN_DATA`` or ``~/.cache/sampan`` (never inside the package)."""
    env = os.environ.get("SAMPAN_DATA")
    base = Path(env).expanduser() if env else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sampan"
    return base


def repo_root() -> Path | None:
    """The source checkout holding ``notebooks/`` and ``datasets/`` when Sampan runs from one."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "notebooks").is_dir() and (parent / "datasets").is_dir() and (parent / "pyproject.toml").is_file():
            return parent
    env = os.environ.get("SAMPAN_HOME")
    return Path(env) if env else None
