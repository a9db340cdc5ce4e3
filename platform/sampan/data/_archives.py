"""Unpacks dataset archives without letting them write outside their own folder, or fill the disk.

A tarball someone shares may hold members named ``../x`` or ``/home/you/.bashrc``, links
pointing anywhere, or device files. :func:`extract_tar` refuses such an archive before
writing anything, naming the member, and then extracts with :mod:`tarfile`'s ``"data"``
filter (PEP 706) as a second guard, into a temporary folder moved into place at the end.
With ``only``, an archive with anything beside the dataset's own folder is refused too: a
"CIFAR-10" tarball must not replace the course notebooks, the progress file or the model
zoo that share the data folder. Unpacked files are dated when they were unpacked, not
when the archive says (a planted file must not look newer than what it replaced).

Gzip reaches 1000:1 on zeros, so a few hundred KB can unpack to gigabytes: an archive whose
members add up to more than ``max_bytes`` is refused before anything is written, and so is a
sparse member (its holes unpack to more than the archive stores).
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

MAX_UNPACKED_BYTES = 256 * 2**20  # unless told: the official CIFAR-10 python archive unpacks to 178 MiB
MAX_MEMBERS = 1000  # unless told: the official CIFAR-10 archive holds 8; a million empty files would exhaust inodes
_OUTSIDE = "which could write outside the data folder"


def _problem(member: tarfile.TarInfo) -> str | None:
    name = PurePosixPath(member.name)
    if member.issym() or member.islnk():
        return f"is a link (to {member.linkname!r}), {_OUTSIDE}"
    if not (member.isfile() or member.isdir()):
        return f"is a device, FIFO or other special file, {_OUTSIDE}"
    if member.issparse():  # GNU type 'S' or a PAX sparse map; isfile() is true for both
        return f"is a sparse file of {_size(member.size)}, which unpacks to more than the archive stores"
    if name.is_absolute() or member.name.startswith(("/", "\\")) or (name.parts and ":" in name.parts[0]):
        return f"has an absolute path, {_OUTSIDE}"
    if ".." in name.parts:
        return f"contains '..', {_OUTSIDE}"
    return None


def _size(n: int) -> str:
    return f"{n:,} bytes" + (f" ({n / 2**20:,.1f} MiB)" if n >= 2**20 else "")


def too_large_error(path: str | os.PathLike, found: int, cap: int, fix: str, *,
                    entry: str | None = None) -> UnsafeFileError:
    """The refusal of a compressed file that unpacks to ``found`` bytes or more, over ``cap``; ``fix`` is the hint.

    Example:
        >>> str(too_large_error("a.gz", 2**30, 2**20, "delete it.")).startswith("Refusing to unpack 'a.gz'")
        True
    """
    upto = f" (counting up to its member {entry!r})" if entry is not None else ""
    return UnsafeFileError(
        f"Refusing to unpack {os.fspath(path)!r}: it unpacks to {_size(found)} or more{upto}, over the cap of "
        f"{_size(cap)}; a few hundred KB of gzip can unpack to enough to fill the disk. HINT: {fix}",
        path=os.fspath(path), entry=entry)


def _fix(archive: str | os.PathLike, origin: str) -> str:
    folder = os.path.dirname(os.path.abspath(archive))
    return f"it is not the official archive; delete it and put a fresh copy from {origin} in {folder!r}."


def check_tar(archive: str | os.PathLike, only: str | None = None, *, max_bytes: int = MAX_UNPACKED_BYTES,
              origin: str = "the dataset's site", max_members: int = MAX_MEMBERS) -> list[tarfile.TarInfo]:
    """The members of ``archive``; raises :class:`~sampan.errors.UnsafeFileError` naming the first unsafe one
    (with ``only``, also the first outside the folder ``only``; ``./`` members are the archive's own root), or
    the one with which the files add up to more than ``max_bytes``. Headers are read one at a time, so a bomb is
    refused without unpacking what lies beyond the member that crosses the cap. ``origin``: where the hint
    sends the learner for a fresh copy.

    Example:
        >>> check_tar("cifar-10-python.tar.gz", max_bytes=2**28)  # doctest: +SKIP
    """
    members, total = [], 0
    try:
        with tarfile.open(archive) as tar:
            for member in tar:
                problem, parts = _problem(member), PurePosixPath(member.name).parts
                if problem is None and only is not None and parts and parts[0] != only:
                    problem = f"lies outside the dataset's folder {only + '/'!r}, {_OUTSIDE}"
                if problem:
                    raise UnsafeFileError(f"Refusing to unpack {os.fspath(archive)!r}: its member {member.name!r} "
                                          f"{problem}. HINT: {_fix(archive, origin)}",
                                          path=os.fspath(archive), entry=member.name)
                total += member.size if member.isfile() else 0
                if total > max_bytes:
                    raise too_large_error(archive, total, max_bytes, _fix(archive, origin), entry=member.name)
                members.append(member)
                if len(members) > max_members:
                    raise UnsafeFileError(
                        f"Refusing to unpack {os.fspath(archive)!r}: it holds more than {max_members:,} files and "
                        f"folders (up to {member.name!r}), which could use up the disk's inodes. HINT: "
                        f"{_fix(archive, origin)}", path=os.fspath(archive), entry=member.name)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise DatasetFileError(f"{os.fspath(archive)!r} is not a readable tar archive ({exc}); it is damaged or "
                               f"cut short. HINT: delete it and put a fresh copy from {origin} in "
                               f"{os.path.dirname(os.path.abspath(archive))!r}.", path=os.fspath(archive)) from exc
    return members


def extract_tar(archive: str | os.PathLike, dest: str | os.PathLike, *, only: str | None = None,
                max_bytes: int = MAX_UNPACKED_BYTES, origin: str = "the dataset's site",
                max_members: int = MAX_MEMBERS) -> Path:
    """Extracts ``archive`` into ``dest`` after :func:`check_tar`, with ``tarfile``'s ``"data"`` filter.

    Members are written to a temporary folder inside ``dest`` and moved into place when all are out,
    so an interrupted extraction leaves no half-written file. ``only``: the one folder the archive may hold
    (``"cifar-10-batches-py"``); any other member is refused before anything is written. ``max_bytes``: the
    most the files may add up to, ``max_members`` the most files and folders; only the checked members are
    extracted, at their checked sizes. Every unpacked file is dated now.

    Example:
        >>> from sampan.utils.io import data_home
        >>> extract_tar(data_home() / "cifar-10-python.tar.gz", data_home())  # doctest: +SKIP
    """
    members = check_tar(archive, only, max_bytes=max_bytes, origin=origin, max_members=max_members)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=dest))
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(staging, members=members, filter="data")
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
