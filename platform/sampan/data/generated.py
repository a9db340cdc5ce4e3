"""``shapes`` and ``defects``: the synthetic image sets, generated on first use into the data directory.

Example:
    >>> from sampan.data import load_dataset
    >>> train = load_dataset("shapes", "train")
    >>> train[0][0].shape
    torch.Size([3, 32, 32])
"""
from __future__ import annotations

import zlib
from typing import Callable

import torch

from sampan.data import synthetic
from sampan.data._base import ImageDataset
from sampan.data._cache import cache_file, load_or_generate

VERSION = "v1"
SHAPES_SPLIT_SIZES = {"train": 6000, "val": 1000, "test": 1000}
DEFECTS_SPLIT_SIZES = {"train": 2000, "val": 400, "test": 400}
# SHA-256 of each split's contents (synthetic.content_sha256); the same values are in the cards.
SHAPES_SHA256 = {
    "train": "1ee25a950cf899b0da7a7221231738a90aa24a7e1c3c6c7f8fbac486ccad61bb",
    "val": "0dce6483b9fc354f4fac153398404adf880feb13fc076c74ee7f44da314e669e",
    "test": "7cec707a9d018cc2d83b1d8e7678e838622ceb8bdf71282a8a77b7558bc92564",
}
DEFECTS_SHA256 = {
    "train": "da4cc7ddfc57375105d28efaa54db1b4d23fc975b9a73c3b70f3a5bebbc9a09c",
    "val": "0079518d4b4d06a3532a56abc3458725330e6928415dd229dd05d09b09bdc5a2",
    "test": "c0713a517ea9e293a01191f3a9d8b9ff66f74a186000d874f3d5b1fde75f7cbf",
}


def split_seed(name: str, split: str) -> int:
    """The fixed seed of one split: a CRC32 of ``"name/split"`` (stable across Python runs)."""
    return zlib.crc32(f"{name}/{split}".encode())


def shapes_arrays(split: str):
    """``(images, labels)`` numpy arrays of a ``shapes`` split, from the cache or freshly drawn."""
    def generate():
        return synthetic.make_shapes(SHAPES_SPLIT_SIZES[split], seed=split_seed("shapes", split))

    return load_or_generate(cache_file("shapes", VERSION, split), generate, SHAPES_SHA256[split])


def defects_arrays(split: str):
    """``(images, labels)`` numpy arrays of a ``defects`` split, from the cache or freshly drawn."""
    def generate():
        return synthetic.make_defects(DEFECTS_SPLIT_SIZES[split], seed=split_seed("defects", split))

    return load_or_generate(cache_file("defects", VERSION, split), generate, DEFECTS_SHA256[split])


def _dataset(arrays, classes, transform, name: str, split: str) -> ImageDataset:
    images, labels = arrays
    chw = torch.from_numpy(images).permute(0, 3, 1, 2).contiguous()
    return ImageDataset(chw, torch.from_numpy(labels), classes, transform, name=name, split=split)


def load_shapes(split: str, transform: Callable | None = None) -> ImageDataset:
    """Builds the ``shapes`` split; see :func:`sampan.data.load_dataset`."""
    return _dataset(shapes_arrays(split), synthetic.SHAPE_CLASSES, transform, "shapes", split)


def load_defects(split: str, transform: Callable | None = None) -> ImageDataset:
    """Builds the ``defects`` split; see :func:`sampan.data.load_dataset`."""
    return _dataset(defects_arrays(split), synthetic.DEFECT_CLASSES, transform, "defects", split)
