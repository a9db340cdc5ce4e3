import gzip
import struct

import numpy as np
import pytest
import torch

import sampan.data as data
from sampan.errors import DatasetFileError, DatasetNotFoundError

IDX = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]


def _write_fake_mnist(folder, n_train=6, n_test=4):
    """Tiny files in the real idx format: torchvision parses them exactly like the real ones."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        with gzip.open(folder / f"{prefix}-images-idx3-ubyte.gz", "wb") as fh:
            fh.write(struct.pack(">IIII", 2051, n, 28, 28) + images.tobytes())
        with gzip.open(folder / f"{prefix}-labels-idx1-ubyte.gz", "wb") as fh:
            fh.write(struct.pack(">II", 2049, n) + labels.tobytes())
    return images


@pytest.mark.parametrize("name, folder", [("mnist", "MNIST/raw"), ("fashion-mnist", "FashionMNIST/raw")])
def test_missing_idx_files_error_says_which_files_go_where(data_home, name, folder):
    with pytest.raises(DatasetNotFoundError) as err:
        data.load_dataset(name, "train")
    message = str(err.value)
    assert str(data_home / folder) in message
    for f in IDX:
        assert f"{f}.gz" in message
    assert "download=True" in message and "never downloads" in message
    assert isinstance(err.value, FileNotFoundError)
    assert not (data_home / folder).exists()  # nothing fetched, nothing created


def test_missing_cifar_error_names_the_archive_and_folder(data_home):
    with pytest.raises(DatasetNotFoundError, match=r"cifar-10-python\.tar\.gz") as err:
        data.load_dataset("cifar10", "test")
    assert str(data_home / "cifar-10-batches-py") in str(err.value)
    assert "data_batch_5" in str(err.value) and "test_batch" in str(err.value)


def test_mnist_files_placed_by_hand_load_through_torchvision(data_home):
    test_images = _write_fake_mnist(data_home / "MNIST" / "raw")
    train = data.load_dataset("mnist", "train")
    test = data.load_dataset("mnist", "test")
    assert len(train) == 6 and len(test) == 4
    image, label = test[3]
    assert image.shape == (1, 28, 28) and image.dtype == torch.float32 and label.dtype == torch.int64
    assert torch.equal(image, torch.from_numpy(test_images[3]).float().unsqueeze(0) / 255)
    assert label.item() == 3
    assert (data_home / "MNIST" / "raw" / "t10k-images-idx3-ubyte").is_file()  # unpacked locally
    assert len(train.classes) == 10


def test_half_the_files_is_still_an_error(data_home):
    folder = data_home / "FashionMNIST" / "raw"
    _write_fake_mnist(folder)
    (folder / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(DatasetNotFoundError, match="t10k-labels-idx1-ubyte.gz"):
        data.load_dataset("fashion-mnist", "test")


def test_image_and_label_files_of_different_downloads_are_named_together(data_home):
    """5 test images with 4 test labels (each file whole): the error blamed a `labels` argument the learner never
    passed."""
    folder = data_home / "MNIST" / "raw"
    _write_fake_mnist(folder, n_test=5)
    with gzip.open(folder / "t10k-labels-idx1-ubyte.gz", "wb") as fh:
        fh.write(struct.pack(">II", 2049, 4) + bytes(4))
    with pytest.raises(DatasetFileError, match=r"t10k-images-idx3-ubyte holds 5 items and t10k-labels-idx1-ubyte 4.*"
                                               r"different downloads.*put a matching set"):
        data.load_dataset("mnist", "test")
    assert len(data.load_dataset("mnist", "train")) == 6  # the train pair is whole


_CIFAR_FILES = ["data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch",
                "batches.meta"]


def _cifar_tarball(path, content: bytes):
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as tar:
        for name in _CIFAR_FILES:
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))


def test_a_damaged_cifar_folder_is_named_and_a_fresh_archive_put_in_its_place_is_unpacked_again(data_home):
    """A damaged download, unpacked: the error said the data was not there (while the learner had just put it
    there), and a fresh archive put in place of the damaged one was never unpacked (only missing files were)."""
    import os
    import time

    archive = data_home / "cifar-10-python.tar.gz"
    _cifar_tarball(archive, b"damaged download")
    with pytest.raises(DatasetFileError, match=r"damaged or not the official ones.*delete data_batch_1") as err:
        data.load_dataset("cifar10", "test")
    assert err.value.path == str(data_home / "cifar-10-batches-py")
    _cifar_tarball(archive, b"the fresh copy")
    later = time.time() + 5
    os.utime(archive, (later, later))  # put in place after the first unpack
    with pytest.raises(DatasetFileError):  # not the official files either: torchvision's checksum says so
        data.load_dataset("cifar10", "test")
    assert (data_home / "cifar-10-batches-py" / "test_batch").read_bytes() == b"the fresh copy"


def test_a_failed_download_says_so_first(data_home, monkeypatch):
    """With download=True, a failed download (no network) led with "Sampan never downloads without being asked
    ... call load_dataset(..., download=True)"; the network's error came last. (The download is made to fail
    here: the test machine may reach no dataset site.)"""
    import torchvision.datasets

    def offline(self):
        raise RuntimeError("Error downloading train-images-idx3-ubyte.gz: <urlopen error Name or service not known>")

    monkeypatch.setattr(torchvision.datasets.MNIST, "download", offline)
    with pytest.raises(DatasetNotFoundError, match=r"^Downloading 'mnist' from https://\S+ failed: Error downloading "
                                                   r"train-images.*HINT: check the network, or put the files by hand"):
        data.load_dataset("mnist", "train", download=True)
