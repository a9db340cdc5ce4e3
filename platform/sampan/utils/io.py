"""Atomic file writes: a reader never sees a half-written file, a crash leaves the old one intact."""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator


def _umask() -> int:
    """The process's umask, read without changing it (``os.umask`` sets it, for every thread, while it reads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # pragma: no cover - no /proc (macOS): the brief swap is the only portable way
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, keep_suffix: bool = False, private: bool = False) -> Iterator[Path]:
    """Yields a temporary path beside ``path``; on success it is fsynced and renamed over ``path``.

    The temporary file is ``.NAME.XXXX.tmp`` (what ``sampan.hapi.checkpoint.remove_orphans`` looks for); with
    ``keep_suffix`` it ends in ``path``'s suffix too, ``.NAME.XXXX.tmp.pt2``, for writers that check it
    (``torch.export.save`` warns about an archive whose name does not end in ``.pt2``). The file gets the mode
    ``open()`` would give it (0644 under the usual umask), or 0600 with ``private`` (secrets): it is born 0600 and
    widened only before the rename, so a secret is never readable by another account, even for a moment.

    Example:
        >>> from sampan.utils.io import atomic_path
        >>> with atomic_path("out.bin") as tmp:
        ...     _ = tmp.write_bytes(b"data")
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = ".tmp" + (path.suffix if keep_suffix else "")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
            if not private:  # readable as any file the user writes: a lab setting another account's Jupyter reads
                os.fchmod(fh.fileno(), 0o666 & ~_umask())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


@contextlib.contextmanager
def file_lock(path: str | os.PathLike) -> Iterator[None]:
    """An exclusive lock on ``path`` (created if missing) for the block, shared by every process of this
    machine (``fcntl.flock``; on a system without it, no lock: the writes stay atomic).

    Example:
        >>> from sampan.utils.io import atomic_write_json, file_lock
        >>> with file_lock("progress.lock"):
        ...     _ = atomic_write_json("progress.json", {"done": True})
    """
    with open(path, "a+b") as handle:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: atomic replace alone
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def atomic_write(path: str | os.PathLike, writer: Callable[[Path], Any], *, private: bool = False) -> Path:
    """Calls ``writer(tmp_path)`` and moves the result to ``path`` atomically (0600 when ``private``)."""
    with atomic_path(path, private=private) as tmp:
        writer(tmp)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str, *, private: bool = False) -> Path:
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), private=private)


def atomic_write_json(path: str | os.PathLike, data: Any) -> Path:
    return atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def read_json_dict(path: str | os.PathLike, key: str | None = None) -> dict:
    """The JSON object in ``path`` (or its ``key`` entry); ``{}`` when the file is missing, unreadable,
    not JSON or not an object — for state files that the next atomic write replaces whole."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    if key is not None:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, dict) else {}


def data_home() -> Path:
    """The data directory: ``$SAMPAN_DATA`` or ``~/.cache/sampan`` (never inside the package)."""
    env = os.environ.get("SAMPAN_DATA")
    base = Path(env).expanduser() if env else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sampan"
    return base


def zoo_dir() -> Path:
    """The local model zoo, ``data_home() / "zoo"``: weights and artifacts lessons produce for later ones.

    Example:
        >>> from sampan.path import zoo_dir
        >>> zoo_dir().name
        'zoo'
    """
    return data_home() / "zoo"


def _data_home_message(home: Path, action: str, problem: str) -> str:
    env = os.environ.get("SAMPAN_DATA")
    where = f"$SAMPAN_DATA={env!r}" if env else f"the data directory {str(home)!r} (SAMPAN_DATA is not set)"
    return (f"Cannot {action}: {where} {problem}. HINT: point SAMPAN_DATA at a folder you can write, "
            "e.g. `export SAMPAN_DATA=$HOME/sampan-data`, or unset it to use ~/.cache/sampan.")


def usable_data_home(action: str = "use the data directory") -> Path:
    """:func:`data_home`, refused with a :class:`~sampan.errors.DataDirectoryError` when it is not a folder.

    Example:
        >>> from sampan.utils.io import usable_data_home
        >>> usable_data_home("load MNIST").name  # doctest: +SKIP
        'sampan'
    """
    from sampan.errors import DataDirectoryError

    home = data_home()
    if home.exists() and not home.is_dir():
        raise DataDirectoryError(_data_home_message(home, action, "is a file, not a folder"))
    return home


@contextlib.contextmanager
def writing_data_home(action: str) -> Iterator[Path]:
    """Yields :func:`usable_data_home`; an ``OSError`` while writing below it names ``SAMPAN_DATA``.

    Example:
        >>> from sampan.utils.io import atomic_write_text, writing_data_home
        >>> with writing_data_home("record your progress") as home:
        ...     _ = atomic_write_text(home / "progress.json", "{}")
    """
    from sampan.errors import DataDirectoryError, SampanError

    home = usable_data_home(action)
    try:
        yield home
    except OSError as exc:
        if isinstance(exc, SampanError):
            raise
        problem = f"cannot be written ({type(exc).__name__}: {exc})"
        raise DataDirectoryError(_data_home_message(home, action, problem)) from exc


def repo_root() -> Path | None:
    """The source checkout holding ``notebooks/`` and ``datasets/`` when Sampan runs from one."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "notebooks").is_dir() and (parent / "datasets").is_dir() and (parent / "pyproject.toml").is_file():
            return parent
    env = os.environ.get("SAMPAN_HOME")
    return Path(env) if env else None
