"""``mnist``, ``fashion-mnist``, ``cifar10`` through torchvision, from files in the data directory.

Nothing is downloaded unless ``download=True`` is passed. When the files are
absent, :class:`~sampan.errors.DatasetNotFoundError` lists each file and the
folder it belongs in. The decoded images are then held in memory as uint8.
"""
from __future__ import annotations

import gzip
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from sampan.data._base import ImageDataset
from sampan.errors import DatasetNotFoundError
from sampan.utils.io import data_home


@dataclass(frozen=True)
class _Source:
    name: str
    torchvision_class: str
    folder: str  # below data_home()
    files: tuple[str, ...]  # what torchvision reads, in ``folder``
    archives: tuple[str, ...]  # what to download, and where it goes (relative to data_home())
    url: str


_IDX = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
SOURCES = {
    "mnist": _Source(
        "mnist", "MNIST", "MNIST/raw", _IDX, tuple(f"MNIST/raw/{f}.gz" for f in _IDX),
        "https://ossci-datasets.s3.amazonaws.com/mnist/",
    ),
    "fashion-mnist": _Source(
        "fashion-mnist", "FashionMNIST", "FashionMNIST/raw", _IDX, tuple(f"FashionMNIST/raw/{f}.gz" for f in _IDX),
        "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
    ),
    "cifar10": _Source(
        "cifar10", "CIFAR10", "cifar-10-batches-py",
        ("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch", "batches.meta"),
        ("cifar-10-python.tar.gz",), "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
    ),
}
SPLIT_SIZES = {
    "mnist": {"train": 60000, "test": 10000},
    "fashion-mnist": {"train": 60000, "test": 10000},
    "cifar10": {"train": 50000, "test": 10000},
}


def missing_message(source: _Source, root: Path) -> str:
    """The error text: which files to put in which folder, or how to download them explicitly."""
    folder = root / source.folder
    wanted = ", ".join(source.archives if source.name == "cifar10" else (f"{f}.gz" for f in source.files))
    where = root if source.name == "cifar10" else folder
    also = (f" (or its unpacked folder {folder} holding {', '.join(source.files)})" if source.name == "cifar10"
            else " (gzipped or unpacked)")
    return (
        f"Dataset {source.name!r} is not in the data directory, and Sampan never downloads without being asked. "
        f"Put {wanted}{also} in {where} — from {source.url} — or call "
        f"sampan.data.load_dataset({source.name!r}, download=True) on a machine with internet access. "
        f"The data directory is $SAMPAN_DATA, else ~/.cache/sampan (now {root})."
    )


def _unpack_local(source: _Source, root: Path) -> None:
    """Unpacks archives already on disk (never fetches): ``*.gz`` idx files, the CIFAR tarball."""
    folder = root / source.folder
    if source.name == "cifar10":
        archive = root / source.archives[0]
        if archive.is_file() and not all((folder / f).is_file() for f in source.files):
            shutil.unpack_archive(str(archive), str(root), format="gztar")
        return
    for f in source.files:
        packed, plain = folder / f"{f}.gz", folder / f
        if packed.is_file() and not plain.is_file():
            with gzip.open(packed, "rb") as src, open(plain, "wb") as dst:
                shutil.copyfileobj(src, dst)


def load(name: str, split: str, transform: Callable | None = None, *, download: bool = False) -> ImageDataset:
    """Builds a torchvision-backed split; see :func:`sampan.data.load_dataset`."""
    import torchvision.datasets

    source, root = SOURCES[name], data_home()
    if not download:
        _unpack_local(source, root)
        if not all((root / source.folder / f).is_file() for f in source.files):
            raise DatasetNotFoundError(missing_message(source, root))
    cls = getattr(torchvision.datasets, source.torchvision_class)
    try:
        ds = cls(str(root), train=(split == "train"), download=download)
    except RuntimeError as exc:  # torchvision: "Dataset not found or corrupted"
        raise DatasetNotFoundError(f"{missing_message(source, root)} torchvision said: {exc}") from exc
    data = torch.as_tensor(ds.data)
    images = data.unsqueeze(1) if data.ndim == 3 else data.permute(0, 3, 1, 2)
    labels = torch.as_tensor(ds.targets, dtype=torch.int64)
    return ImageDataset(images.contiguous(), labels, list(ds.classes), transform, name=name, split=split)
