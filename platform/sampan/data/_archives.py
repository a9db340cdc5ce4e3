"""Unpacks dataset archives without letting them write outside their own folder.

A tarball someone shares may hold members named ``../x`` or ``/home/you/.bashrc``, links
pointing anywhere, or device files. :func:`extract_tar` refuses such an archive before
writing anything, naming the member, and then extracts with :mod:`tarfile`'s ``"data"``
filter (PEP 706) as a second guard, into a temporary folder moved into place at the end.
With ``only``, an archive with anything beside the dataset's own folder is refused too: a
"CIFAR-10" tarball must not replace the course notebooks, the progress file or the model
zoo that share the data folder. Unpacked files are dated when they were unpacked, not
when the archive says (a planted file must not look newer than what it replaced).
"""
from __future__ import annotations

import gzip
import os
import shutil
import tarfile
import tempfile
import zlib
from pathlib import Path, PurePosixPath

from sampan.errors import DatasetFileError, UnsafeFileError


def _problem(member: tarfile.TarInfo) -> str | None:
    name = PurePosixPath(member.name)
    if member.issym() or member.islnk():
        return f"is a link (to {member.linkname!r})"
    if not (member.isfile() or member.isdir()):
        return "is a device, FIFO or other special file"
    if name.is_absolute() or member.name.startswith(("/", "\\")) or (name.parts and ":" in name.parts[0]):
        return "has an absolute path"
    if ".." in name.parts:
        return "contains '..'"
    return None


def check_tar(archive: str | os.PathLike, only: str | None = None) -> list[tarfile.TarInfo]:
    """The members of ``archive``; raises :class:`~sampan.errors.UnsafeFileError` naming the first unsafe one
    (with ``only``, also the first outside the folder ``only``; ``./`` members are the archive's own root).

    Example:
        >>> check_tar("cifar-10-python.tar.gz")  # doctest: +SKIP
    """
    try:
        with tarfile.open(archive) as tar:
            members = tar.getmembers()
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise DatasetFileError(f"{os.fspath(archive)!r} is not a readable tar archive ({exc}); it is damaged or "
                               "cut short. HINT: delete it and put a fresh copy from the dataset's site in the "
                               "data folder.", path=os.fspath(archive)) from exc
    for member in members:
        problem = _problem(member)
        parts = PurePosixPath(member.name).parts
        if problem is None and only is not None and parts and parts[0] != only:
            problem = f"lies outside the dataset's folder {only + '/'!r}"
        if problem:
            raise UnsafeFileError(
                f"Refusing to unpack {os.fspath(archive)!r}: its member {member.name!r} {problem}, which could "
                "write outside the data folder. HINT: the archive is not the official one; delete it and put a "
                "fresh copy from the dataset's site in the data folder.", path=os.fspath(archive), entry=member.name)
    return members


def extract_tar(archive: str | os.PathLike, dest: str | os.PathLike, *, only: str | None = None) -> Path:
    """Extracts ``archive`` into ``dest`` after :func:`check_tar`, with ``tarfile``'s ``"data"`` filter.

    Members are written to a temporary folder inside ``dest`` and moved into place when all are out,
    so an interrupted extraction leaves no half-written file. ``only``: the one folder the archive may hold
    (``"cifar-10-batches-py"``); any other member is refused before anything is written. Every unpacked file
    is dated now.

    Example:
        >>> from sampan.utils.io import data_home
        >>> extract_tar(data_home() / "cifar-10-python.tar.gz", data_home())  # doctest: +SKIP
    """
    check_tar(archive, only)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=dest))
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(staging, filter="data")
        for folder, _, files in os.walk(staging):
            for name in files:
                os.utime(os.path.join(folder, name))  # dated now, not when the archive says
        for entry in staging.iterdir():
            target = dest / entry.name
            if target.is_dir() and not target.is_symlink() and entry.is_dir():
                shutil.copytree(entry, target, dirs_exist_ok=True)  # a partial earlier unpack: fill it in
            else:
                entry.replace(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest
