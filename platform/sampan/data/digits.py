"""``digits``: scikit-learn's 1,797 real 8x8 handwritten digits (UCI, CC BY 4.0), split 1257 / 270 / 270.

The images ship inside scikit-learn (``sklearn.datasets.load_digits``), so
this dataset works offline everywhere. Pixel values 0..16 become float32 in
``[0, 1]``; ``size=28`` resizes bilinearly for a 28x28 network such as LeNet.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from sampan.data._base import ImageDataset
from sampan.data._packages import package_file
from sampan.data._splits import stratified_split
from sampan.errors import bad_argument

SPLIT_SIZES = {"train": 1257, "val": 270, "test": 270}
SPLIT_SEED = 0
CLASSES = [str(d) for d in range(10)]


def source_file() -> Path:
    """scikit-learn's ``datasets/data/digits.csv.gz``, the file ``sklearn.datasets.load_digits`` reads."""
    return package_file("sklearn", "datasets", "data", "digits.csv.gz")


@functools.lru_cache(maxsize=1)
def _raw() -> tuple[torch.Tensor, torch.Tensor, dict[str, np.ndarray]]:
    table = np.loadtxt(source_file(), delimiter=",", dtype=np.float32)
    images = torch.from_numpy(table[:, :64].reshape(-1, 1, 8, 8) / 16.0)
    target = table[:, 64].astype(np.int64)
    splits = stratified_split(target, SPLIT_SIZES["val"], SPLIT_SIZES["test"], SPLIT_SEED)
    labels = torch.from_numpy(target)
    return images, labels, splits


def load(split: str, transform: Callable | None = None, *, size: int = 8) -> ImageDataset:
    """Builds the ``digits`` split; see :func:`sampan.data.load_dataset`."""
    if not isinstance(size, int) or isinstance(size, bool) or size < 8:
        raise ValueError(bad_argument("size", size, "an int of at least 8 (the images are 8x8)", "pass size=28 for LeNet"))
    images, labels, splits = _raw()
    index = torch.from_numpy(splits[split])
    chosen = images[index]
    if size != 8:
        chosen = torch.nn.functional.interpolate(chosen, size=(size, size), mode="bilinear", align_corners=False)
    return ImageDataset(chosen.contiguous(), labels[index], CLASSES, transform, name="digits", split=split)
