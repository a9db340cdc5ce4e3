"""Bad data and a bad data directory are named: SAMPAN_DATA that is a file or cannot be written, idx files that
are garbage or cut short, a `.gz` that is not gzip, a transform that is not callable."""
from __future__ import annotations

import gzip
import os
import struct
from pathlib import Path

import pytest

import sampan.data as data
from sampan.errors import DataDirectoryError, DatasetFileError

IDX = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]


@pytest.fixture
def unwritable_folder(tmp_path):
    """An existing folder this process cannot write in."""
    if os.geteuid() != 0:
        folder = tmp_path / "read-only"
        folder.mkdir()
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
    else:  # root may write in any folder on disk; procfs refuses new files even to root
        yield Path("/proc/self")


def test_sampan_data_that_is_a_file_is_named(tmp_path, monkeypatch):
    taken = tmp_path / "data.txt"
    taken.write_text("")
    monkeypatch.setenv("SAMPAN_DATA", str(taken))
    for name in ("shapes", "mnist"):
        with pytest.raises(DataDirectoryError, match=rf"\$SAMPAN_DATA='{taken}' is a file, not a folder\. HINT: "
                                                      r"point SAMPAN_DATA at a folder you can write"):
            data.load_dataset(name, "train")
    assert taken.read_text() == ""


def test_sampan_data_that_cannot_be_written_is_named(unwritable_folder, monkeypatch):
    monkeypatch.setenv("SAMPAN_DATA", str(unwritable_folder))
    with pytest.raises(DataDirectoryError, match=r"Cannot cache the generated 'shapes' dataset: "
                                                 rf"\$SAMPAN_DATA='{unwritable_folder}' cannot be written \(\w+Error"):
        data.load_dataset("shapes", "train")


def _idx_files(folder, n=3, gz=False):
    folder.mkdir(parents=True, exist_ok=True)
    images = struct.pack(">IIII", 2051, n, 28, 28) + bytes(n * 28 * 28)
    labels = struct.pack(">II", 2049, n) + bytes(n)
    for prefix in ("train", "t10k"):
        for kind, payload in (("images-idx3", images), ("labels-idx1", labels)):
            name = f"{prefix}-{kind}-ubyte"
            if gz:
                with gzip.open(folder / f"{name}.gz", "wb") as fh:
                    fh.write(payload)
            else:
                (folder / name).write_bytes(payload)


def test_a_garbage_idx_file_is_named(data_home):
    folder = data_home / "MNIST" / "raw"
    _idx_files(folder)
    (folder / "train-images-idx3-ubyte").write_bytes(b"<html>404 Not Found</html>" * 40)  # a saved error page
    with pytest.raises(DatasetFileError, match=r"train-images-idx3-ubyte' does not start with an idx header: it is "
                                               r"not a mnist idx file.*HINT: delete it and put a fresh copy of "
                                               r"train-images-idx3-ubyte\.gz") as err:
        data.load_dataset("mnist", "train")
    assert err.value.path == str(folder / "train-images-idx3-ubyte")
    assert len(data.load_dataset("mnist", "test")) == 3  # the test split's files are fine


def test_a_truncated_idx_file_is_named(data_home):
    folder = data_home / "FashionMNIST" / "raw"
    _idx_files(folder)
    whole = (folder / "t10k-labels-idx1-ubyte").read_bytes()
    (folder / "t10k-labels-idx1-ubyte").write_bytes(whole[:-1])
    with pytest.raises(DatasetFileError, match=r"t10k-labels-idx1-ubyte' holds 10 bytes where its header "
                                               r"announces 11: it is not a fashion-mnist idx file, or it is truncated"):
        data.load_dataset("fashion-mnist", "test")


def test_a_gz_that_is_not_gzip_is_named_and_leaves_nothing_behind(data_home):
    folder = data_home / "MNIST" / "raw"
    _idx_files(folder, gz=True)
    (folder / "train-labels-idx1-ubyte.gz").write_bytes(b"not gzip at all")
    with pytest.raises(DatasetFileError, match=r"train-labels-idx1-ubyte\.gz' is not a valid gzip file .*HINT: "
                                               r"delete it and put a fresh copy") as err:
        data.load_dataset("mnist", "train")
    assert err.value.path == str(folder / "train-labels-idx1-ubyte.gz")
    assert not (folder / "train-labels-idx1-ubyte").exists()  # no empty file that would fail later
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("transform", ["resize", 28, ["Resize(28)"]])
def test_a_transform_that_is_not_callable_is_refused_at_once(transform):
    with pytest.raises(TypeError, match=r"Expected `transform` to be None or a callable applied to each item\. "
                                        r"Received: transform=.*HINT: pass transform=sampan\.vision\.transforms\."
                                        r"Resize\(28\)"):
        data.load_dataset("digits", "train", transform=transform)
    with pytest.raises(TypeError, match=r"Received: transform='resize'\. HINT: pass transform=str\.lower"):
        data.load_dataset("reviews-zh", "train", transform="resize")
