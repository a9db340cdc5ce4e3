"""A dataset archive never writes outside its own folder (issue 11, security item 2).

The attack: a ``cifar-10-python.tar.gz`` dropped in ``$SAMPAN_DATA`` (the error for a missing CIFAR-10 asks
for exactly that) whose members are named ``../x``, ``/abs/x``, or are links and devices, or lie in the data
folder beside ``cifar-10-batches-py/`` (the course notebooks, the progress file, the model zoo live there).
Sampan must refuse it, naming the member, before writing anything. The same goes for a compression bomb (gzip
reaches 1000:1, so a few hundred KB unpack to enough to fill the disk): an archive, or an MNIST ``.gz``, that unpacks
to more than its dataset's cap, and a sparse member (its holes unpack to more than the archive stores).
"""
from __future__ import annotations

import dataclasses
import gzip
import io
import os
import tarfile
import tempfile
from pathlib import Path

import pytest

import sampan.data
from sampan.data import vision_sets
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


def _zeros_tar(path: Path, sizes: dict[str, int]) -> Path:
    """A tar.gz of files of zeros, ``{name: size}``: a MiB of zeros gzips to about 1 KB."""
    with tarfile.open(path, "w:gz") as tar:
        for name, size in sizes.items():
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, io.BytesIO(bytes(size)))
    return path


def _gnu_sparse(name: str, size: int, data: bytes) -> bytes:
    """A GNU sparse member (type 'S', which tarfile reads but never writes): a hole, then ``data``; ``size`` bytes
    once unpacked."""
    info = tarfile.TarInfo(name)
    info.type, info.size = tarfile.GNUTYPE_SPARSE, len(data)
    header = bytearray(info.tobuf(tarfile.GNU_FORMAT))
    header[386:410] = tarfile.itn(size - len(data), 12, tarfile.GNU_FORMAT) + tarfile.itn(len(data), 12,
                                                                                          tarfile.GNU_FORMAT)
    header[483:495] = tarfile.itn(size, 12, tarfile.GNU_FORMAT)  # the size unpacked
    header[148:155] = b"%06o\0" % tarfile.calc_chksums(bytes(header))[0]
    return bytes(header) + data.ljust(512, b"\0")


def _sparse_archive(path: Path, form: str, name: str, size: int) -> Path:
    if form == "gnu":
        path.write_bytes(gzip.compress(_gnu_sparse(name, size, b"pwned") + bytes(1024)))
        return path
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:  # GNU sparse 0.1: a map in a PAX header
        info = tarfile.TarInfo(name)
        info.size, info.pax_headers = 5, {"GNU.sparse.map": f"{size - 5},5", "GNU.sparse.size": str(size)}
        tar.addfile(info, io.BytesIO(b"pwned"))
    return path


def test_a_cifar_archive_that_unpacks_past_its_cap_is_refused_before_anything_is_written(data_home, monkeypatch):
    """The bomb of the audit at a small scale: the cap is cut to 1.25 MiB (a quarter over a 1 MiB "official" size),
    and the third batch takes the members past it."""
    small = dataclasses.replace(vision_sets.SOURCES["cifar10"], sizes=(2**20,))
    monkeypatch.setitem(vision_sets.SOURCES, "cifar10", small)
    batches = {f"cifar-10-batches-py/data_batch_{i}": 2**19 for i in (1, 2, 3)}
    _zeros_tar(data_home / ARCHIVE, batches)
    with pytest.raises(UnsafeFileError, match=rf"Refusing to unpack '.*{ARCHIVE}': it unpacks to 1,572,864 bytes "
                                              r"\(1.5 MiB\) or more \(counting up to its member 'cifar-10-batches-py/"
                                              r"data_batch_3'\), over the cap of 1,310,720 bytes \(1.2 MiB\).*HINT: "
                                              r"it is not the official archive; delete it and put a fresh copy from "
                                              r"https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz") as info:
        sampan.data.load_dataset("cifar10", "test")
    assert info.value.entry == "cifar-10-batches-py/data_batch_3" and info.value.path == str(data_home / ARCHIVE)
    assert [p.name for p in data_home.iterdir()] == [ARCHIVE]  # not one batch, no staging folder


def test_a_cifar_bomb_at_full_scale_is_refused_from_its_header_before_its_data_is_read(data_home):
    """At the real cap (a quarter over the official 178 MiB): a member that says it holds 1 TiB is refused on its
    header; the archive holds none of that data, so reading on would fail (the old check read every header first,
    decompressing the whole bomb to find them)."""
    info = tarfile.TarInfo("cifar-10-batches-py/data_batch_1")
    info.size = 2**40
    (data_home / ARCHIVE).write_bytes(gzip.compress(info.tobuf(tarfile.GNU_FORMAT) + bytes(512)))
    with pytest.raises(UnsafeFileError, match=r"it unpacks to 1,099,511,627,776 bytes .* over the cap of "
                                              r"232,767,532 bytes \(222.0 MiB\)"):
        sampan.data.load_dataset("cifar10", "test")
    assert [p.name for p in data_home.iterdir()] == [ARCHIVE]


def test_an_archive_up_to_the_cap_unpacks_and_one_byte_more_is_refused(tmp_path):
    archive = _zeros_tar(tmp_path / "a.tar.gz", {"folder/one": 600, "folder/two": 400})
    with pytest.raises(UnsafeFileError, match=r"1,000 bytes or more .* over the cap of 999 bytes;") as info:
        extract_tar(archive, tmp_path / "refused", max_bytes=999)
    assert info.value.entry == "folder/two" and not (tmp_path / "refused").exists()
    dest = extract_tar(archive, tmp_path / "data", max_bytes=1000)
    assert [(dest / "folder" / f).stat().st_size for f in ("one", "two")] == [600, 400]


@pytest.mark.parametrize("form", ["gnu", "pax"])
def test_a_cifar_archive_with_a_sparse_member_is_refused(data_home, form):
    """Five bytes stored, 64 MiB unpacked: tarfile counts a sparse member as a regular file and writes it out."""
    name = "cifar-10-batches-py/data_batch_1"
    _sparse_archive(data_home / ARCHIVE, form, name, 2**26)
    with pytest.raises(UnsafeFileError, match=rf"member '{name}' is a sparse file of 67,108,864 bytes") as info:
        sampan.data.load_dataset("cifar10", "test")
    assert info.value.entry == name
    assert [p.name for p in data_home.iterdir()] == [ARCHIVE]


def test_an_mnist_gz_that_unpacks_past_its_official_size_is_refused_and_nothing_is_left(data_home):
    """The official t10k-labels-idx1-ubyte holds 10,008 bytes; this one unpacks to a MiB of zeros. The old unpacking
    wrote all of it (and a 1,000 times larger bomb just as readily) before looking at the header."""
    folder = data_home / "MNIST" / "raw"
    folder.mkdir(parents=True)
    packed = folder / "t10k-labels-idx1-ubyte.gz"
    packed.write_bytes(gzip.compress(bytes(2**20)))
    with pytest.raises(UnsafeFileError, match=r"t10k-labels-idx1-ubyte.gz': it unpacks to .* over the cap of "
                                              r"12,510 bytes.*HINT: the official t10k-labels-idx1-ubyte holds 10,008 "
                                              r"bytes, so this is not it; delete it and put a fresh copy") as info:
        sampan.data.load_dataset("mnist", "test")
    assert info.value.path == str(packed)
    assert os.listdir(folder) == [packed.name]  # no unpacked file, no temporary one


def test_an_archive_of_too_many_members_is_refused_before_anything_is_written(tmp_path):
    """Sizes alone let a bomb of a million empty files through: each takes an inode, and the disk runs out of them
    long before it runs out of bytes."""
    archive = _zeros_tar(tmp_path / "a.tar.gz", {f"folder/{i}": 0 for i in range(12)})
    with pytest.raises(UnsafeFileError, match=r"holds more than 10 files and folders \(up to 'folder/10'\)") as info:
        extract_tar(archive, tmp_path / "refused", max_members=10)
    assert info.value.entry == "folder/10" and not (tmp_path / "refused").exists()
    assert len(list((extract_tar(archive, tmp_path / "data", max_members=12) / "folder").iterdir())) == 12
