"""``mnist``, ``fashion-mnist``, ``cifar10`` through torchvision, from files in the data directory.

Nothing is downloaded unless ``download=True`` is passed. When the files are
absent, :class:`~sampan.errors.DatasetNotFoundError` lists each file and the
folder it belongs in. The decoded images are then held in memory as uint8.
"""
from __future__ import annotations

import gzip
import math
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from sampan.data._base import ImageDataset
from sampan.errors import DatasetFileError, DatasetNotFoundError
from sampan.utils.io import atomic_write, usable_data_home, writing_data_home


@dataclass(frozen=True)
class _Source:
    name: str
    torchvision_class: str
    folder: str  # below data_home()
    files: tuple[str, ...]  # what torchvision reads, in ``folder``
    archives: tuple[str, ...]  # what to download, and where it goes (relative to data_home())
    url: str
    sizes: tuple[int, ...]  # the official ``files``' sizes in bytes: what unpacking may write is capped from them


_IDX = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
_IDX_SIZES = (16 + 60000 * 28 * 28, 8 + 60000, 16 + 10000 * 28 * 28, 8 + 10000)  # header + one byte a pixel or label
_CIFAR_SIZES = (31035704, 31035320, 31035999, 31035696, 31035623, 31035526, 158)  # 178 MiB; plus an 88-byte readme
_HEADROOM = 1.25  # an unpacked file (or archive) may be a quarter over the official size; a gzip bomb is 1000 times
SOURCES = {
    "mnist": _Source(
        "mnist", "MNIST", "MNIST/raw", _IDX, tuple(f"MNIST/raw/{f}.gz" for f in _IDX),
        "https://ossci-datasets.s3.amazonaws.com/mnist/", _IDX_SIZES,
    ),
    "fashion-mnist": _Source(
        "fashion-mnist", "FashionMNIST", "FashionMNIST/raw", _IDX, tuple(f"FashionMNIST/raw/{f}.gz" for f in _IDX),
        "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/", _IDX_SIZES,
    ),
    "cifar10": _Source(
        "cifar10", "CIFAR10", "cifar-10-batches-py",
        ("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch", "batches.meta"),
        ("cifar-10-python.tar.gz",), "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz", _CIFAR_SIZES,
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
        if archive.is_file() and _stale(folder, source.files, archive):
            from sampan.data._archives import extract_tar

            with writing_data_home(f"unpack {archive.name}"):
                # refuses links, devices, absolute and '..' members, anything outside its own folder, and a bomb
                extract_tar(archive, root, only=source.folder, max_bytes=int(sum(source.sizes) * _HEADROOM),
                            origin=source.url)
        return
    for f, size in zip(source.files, source.sizes):
        packed, plain = folder / f"{f}.gz", folder / f
        if packed.is_file() and not plain.is_file():
            _gunzip(packed, plain, source, official=size)


def _stale(folder: Path, files: tuple[str, ...] | list[str], archive: Path) -> bool:
    """Whether the unpacked ``files`` are missing, or older than ``archive`` (a fresh copy put in place of a
    damaged one is unpacked again; unpacking dates its files now)."""
    try:
        return min((folder / f).stat().st_mtime for f in files) < archive.stat().st_mtime
    except FileNotFoundError:
        return True


def _gunzip(packed: Path, plain: Path, source: _Source, *, official: int) -> None:
    """Unpacks one ``.gz`` atomically; a file that is not gzip (or is cut short) is named in the error, and one that
    unpacks to more than ``_HEADROOM`` times the ``official`` size is refused as soon as it does (nothing is left)."""
    cap = int(official * _HEADROOM)
    fix = (f"the official {plain.name} holds {official:,} bytes, so this is not it; delete it and put a fresh copy "
           f"of {packed.name} from {source.url} in {packed.parent}, or the unpacked {plain.name} there.")

    def writer(tmp: Path) -> None:  # atomic_write removes tmp if this raises
        written = 0
        with gzip.open(packed, "rb") as src, open(tmp, "wb") as dst:
            while chunk := src.read(2**20):
                written += len(chunk)
                if written > cap:
                    from sampan.data._archives import too_large_error

                    raise too_large_error(packed, written, cap, fix)
                dst.write(chunk)

    with writing_data_home(f"unpack {packed.name}"):
        try:
            atomic_write(plain, writer)
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise DatasetFileError(
                f"{str(packed)!r} is not a valid gzip file ({exc}). HINT: delete it and put a fresh copy of "
                f"{packed.name} from {source.url} in {packed.parent}, or the unpacked {plain.name} there.",
                path=str(packed)) from exc


_IDX_DTYPES = {0x08: 1, 0x09: 1, 0x0B: 2, 0x0C: 4, 0x0D: 4, 0x0E: 8}  # idx type code -> bytes per item


def _check_idx(file: Path, source: _Source) -> int:
    """Refuses, naming it, an idx file whose header or length is wrong (torchvision would only ``assert``); returns
    its number of items (the first dimension)."""
    size = file.stat().st_size
    with open(file, "rb") as fh:
        head = fh.read(4)
        ndim = head[3] if len(head) == 4 else 0
        dims = fh.read(4 * ndim)
    item = _IDX_DTYPES.get(head[2]) if len(head) == 4 and head[:2] == b"\0\0" else None
    if item is None or not 1 <= ndim <= 3 or len(dims) != 4 * ndim:
        problem = "does not start with an idx header"
    else:
        count = math.prod(int.from_bytes(dims[i:i + 4], "big") for i in range(0, len(dims), 4))
        problem = "" if size == 4 + 4 * ndim + count * item else (
            f"holds {size} bytes where its header announces {4 + 4 * ndim + count * item}")
    if problem:
        raise DatasetFileError(
            f"{str(file)!r} {problem}: it is not a {source.name} idx file, or it is truncated. HINT: delete it "
            f"and put a fresh copy of {file.name}.gz from {source.url} in {file.parent}.", path=str(file))
    return int.from_bytes(dims[:4], "big")


def load(name: str, split: str, transform: Callable | None = None, *, download: bool = False) -> ImageDataset:
    """Builds a torchvision-backed split; see :func:`sampan.data.load_dataset`."""
    import torchvision.datasets

    source, root = SOURCES[name], usable_data_home(f"load {name!r}")
    if not download:
        _unpack_local(source, root)
        if not all((root / source.folder / f).is_file() for f in source.files):
            raise DatasetNotFoundError(missing_message(source, root))
        if source.name != "cifar10":
            prefix = "train" if split == "train" else "t10k"
            pair = [root / source.folder / f for f in source.files if f.startswith(prefix)]
            counts = [_check_idx(file, source) for file in pair]
            if counts[0] != counts[1]:
                raise DatasetFileError(
                    f"{pair[0].name} holds {counts[0]} items and {pair[1].name} {counts[1]}, in {str(pair[0].parent)!r}"
                    f": they come from different downloads. HINT: put a matching set of {', '.join(source.files)} "
                    f"from {source.url} there.", path=str(pair[1]))
    cls = getattr(torchvision.datasets, source.torchvision_class)
    try:
        ds = cls(str(root), train=(split == "train"), download=download)
    except RuntimeError as exc:  # torchvision: "Dataset not found or corrupted", or a failed download
        if download:
            raise DatasetNotFoundError(
                f"Downloading {name!r} from {source.url} failed: {exc}. HINT: check the network, or put the files "
                f"by hand: {missing_message(source, root)}") from exc
        folder, packed = root / source.folder, [root / a for a in source.archives]
        raise DatasetFileError(
            f"The {name} files in {str(folder)!r} are damaged or not the official ones (torchvision said: {exc}). "
            f"HINT: delete {', '.join(source.files)} there and put a fresh copy of "
            f"{', '.join(p.name for p in packed)} from {source.url} in {packed[0].parent}.", path=str(folder)) from exc
    data = torch.as_tensor(ds.data)
    images = data.unsqueeze(1) if data.ndim == 3 else data.permute(0, 3, 1, 2)
    labels = torch.as_tensor(ds.targets, dtype=torch.int64)
    return ImageDataset(images.contiguous(), labels, list(ds.classes), transform, name=name, split=split)
