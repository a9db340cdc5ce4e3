"""A dataset archive never writes outside its own folder (issue 11, security item 2).

The attack: a ``cifar-10-python.tar.gz`` dropped in ``$SAMPAN_DATA`` (the error for a missing CIFAR-10 asks
for exactly that) whose members are named ``../x``, ``/abs/x``, or are links and devices, or lie in the data
folder beside ``cifar-10-batches-py/`` (the course notebooks, the progress file, the model zoo live there).
Sampan must refuse it, naming the member, before writing anything.
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


def test_a_cifar_archive_with_files_beside_its_folder_is_refused_and_the_learners_files_stay(data_home):
    """No link, no '..', no absolute name, so the checks above passed: the archive's other top-level members
    replaced what shares the data folder (a built course notebook dated 2100, so that the course build kept it
    and the learner ran it; the progress file; a zoo checkpoint)."""
    import os

    notebook = data_home / "courses" / "zh" / "01-beginner" / "first_model.ipynb"
    notebook.parent.mkdir(parents=True)
    notebook.write_text("the course's own")
    (data_home / "progress.json").write_text('{"done": ["first_model"]}')
    planted = [_benign(), _member("courses/zh/01-beginner/first_model.ipynb"), _member("progress.json")]
    planted[1].mtime = 4102444800  # the year 2100
    _tar(data_home / ARCHIVE, planted)
    with pytest.raises(UnsafeFileError, match=r"member 'courses/zh/01-beginner/first_model.ipynb' lies outside "
                                              r"the dataset's folder 'cifar-10-batches-py/'") as info:
        sampan.data.load_dataset("cifar10", "test")
    assert info.value.entry == "courses/zh/01-beginner/first_model.ipynb"
    assert notebook.read_text() == "the course's own" and "first_model" in (data_home / "progress.json").read_text()
    assert not (data_home / "cifar-10-batches-py").exists()
    assert sorted(os.listdir(data_home)) == sorted([ARCHIVE, "courses", "progress.json"])


def test_an_archive_made_from_its_folders_parent_unpacks_and_its_files_are_dated_now(tmp_path):
    """``tar -C dir .`` names members ``./`` and ``./cifar-10-batches-py/...``: check_tar failed on ``./`` with an
    IndexError. The unpacked files carry the time of unpacking, not the archive's (a planted date decides
    nothing)."""
    import time

    member = _benign("./cifar-10-batches-py/readme.html")
    member.mtime = 4102444800
    archive = _tar(tmp_path / "a.tar.gz", [_member("./", tarfile.DIRTYPE), member])
    dest = extract_tar(archive, tmp_path / "data", only="cifar-10-batches-py")
    unpacked = dest / "cifar-10-batches-py" / "readme.html"
    assert unpacked.read_text() == "pwned" and unpacked.stat().st_mtime <= time.time() + 1
