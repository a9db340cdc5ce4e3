"""A dataset archive never writes outside the data folder (issue 11, security item 2).

The attack: a ``cifar-10-python.tar.gz`` dropped in ``$SAMPAN_DATA`` (the error for a missing CIFAR-10 asks
for exactly that) whose members are named ``../x``, ``/abs/x``, or are links and devices. Sampan must refuse
it, naming the member, before writing anything.
"""
from __future__ import annotations

import io
import tarfile
import tempfile
from pathlib import Path

import pytest

import sampan.data
from sampan.data._archives import extract_tar
from sampan.errors import UnsafeFileError

ARCHIVE = "cifar-10-python.tar.gz"
ABSOLUTE = (Path(tempfile.gettempdir()) / "sampan-absolute-attack.txt").as_posix()  # an absolute member name


def _tar(path: Path, members: list[tarfile.TarInfo]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info in members:
            data = b"pwned" if info.isfile() else None
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


def _benign(name: str = "cifar-10-batches-py/readme.html") -> tarfile.TarInfo:
    return _member(name)


@pytest.mark.parametrize("evil, why", [
    (_member("../outside.txt"), "contains '..'"),
    (_member("cifar-10-batches-py/../../outside.txt"), "contains '..'"),
    (_member(ABSOLUTE), "has an absolute path"),
    (_member("cifar-10-batches-py/data_batch_1", tarfile.SYMTYPE, "/etc/passwd"), "is a link"),
    (_member("cifar-10-batches-py/data_batch_2", tarfile.LNKTYPE, "../../outside.txt"), "is a link"),
    (_member("cifar-10-batches-py/null", tarfile.CHRTYPE), "is a device"),
    (_member("cifar-10-batches-py/fifo", tarfile.FIFOTYPE), "is a device, FIFO"),
])
def test_load_dataset_refuses_a_crafted_cifar_archive(data_home, evil, why):
    _tar(data_home / ARCHIVE, [_benign(), evil])
    with pytest.raises(UnsafeFileError, match=rf"member '{evil.name}' {why}") as info:
        sampan.data.load_dataset("cifar10", "test")
    assert info.value.entry == evil.name
    assert not (data_home.parent / "outside.txt").exists()
    assert not Path(ABSOLUTE).exists()
    assert not (data_home / "cifar-10-batches-py").exists()  # nothing was written, not even the benign member
    assert [p.name for p in data_home.iterdir()] == [ARCHIVE]  # no staging folder left behind


def test_a_safe_archive_is_extracted_in_place(tmp_path):
    archive = _tar(tmp_path / "a.tar.gz", [_benign("folder/one.txt"), _benign("two.txt")])
    dest = tmp_path / "data"
    extract_tar(archive, dest)
    assert (dest / "folder" / "one.txt").read_text() == "pwned" and (dest / "two.txt").is_file()
    assert sorted(p.name for p in dest.iterdir()) == ["folder", "two.txt"]


def test_a_damaged_archive_is_named(data_home):
    from sampan.errors import DatasetFileError

    full = _tar(data_home / "full.tar.gz", [_benign()]).read_bytes()
    (data_home / ARCHIVE).write_bytes(full[: len(full) // 2])
    (data_home / "full.tar.gz").unlink()
    with pytest.raises(DatasetFileError, match=rf"{ARCHIVE}' is not a readable tar archive") as info:
        sampan.data.load_dataset("cifar10", "test")
    assert info.value.path.endswith(ARCHIVE)
