"""Generated datasets cached in the data directory and verified by the checksum in their card."""
from __future__ import annotations

import warnings
import zipfile
from pathlib import Path
from typing import Callable

import numpy as np

from sampan.data.synthetic import content_sha256
from sampan.utils.io import atomic_write, data_home, writing_data_home


def cache_file(name: str, version: str, split: str) -> Path:
    return data_home() / name / version / f"{split}.npz"


def _read(path: Path) -> tuple[np.ndarray, np.ndarray] | None:
    try:
        with np.load(path, allow_pickle=False) as archive:
            return archive["images"], archive["labels"]
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None


def _write(path: Path, images: np.ndarray, labels: np.ndarray) -> None:
    def writer(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            np.savez(fh, images=images, labels=labels)

    with writing_data_home(_caching(path)):
        atomic_write(path, writer)


def _caching(path: Path) -> str:
    return f"cache the generated {path.parent.parent.name!r} dataset"


def _as_written(images: np.ndarray, labels: np.ndarray, image_shape: tuple[int, ...]) -> bool:
    """Whether cached arrays have the types and shapes a generation writes (the checksum covers the values only:
    the same values as float32, or the same bytes in another shape, hash alike)."""
    return (images.dtype == np.uint8 and labels.dtype == np.int64 and images.shape[1:] == tuple(image_shape)
            and labels.shape == images.shape[:1])


def load_or_generate(
    path: Path, generate: Callable[[], tuple[np.ndarray, np.ndarray]], expected_sha256: str,
    image_shape: tuple[int, ...] = (32, 32, 3),
) -> tuple[np.ndarray, np.ndarray]:
    """Reads ``path`` if its contents hash to ``expected_sha256`` and it holds uint8 images of ``image_shape``
    (height, width, channels) with int64 labels; otherwise generates and writes it.

    A missing, truncated or altered file is regenerated. If a fresh generation
    itself does not match (different numerics on an unusual platform), it is
    used with a ``RuntimeWarning`` rather than refused.
    """
    cached = _read(path) if path.is_file() else None
    if cached is not None and _as_written(*cached, image_shape) and content_sha256(*cached) == expected_sha256:
        return cached
    with writing_data_home(_caching(path)):  # an unusable data directory is refused before the generation's work
        path.parent.mkdir(parents=True, exist_ok=True)
    images, labels = generate()
    actual = content_sha256(images, labels)
    if actual != expected_sha256:
        warnings.warn(
            f"Generated {path.name} for {path.parent.parent.name} hashes to {actual}, not the catalog's "
            f"{expected_sha256}; results may differ slightly from the course's reference numbers.",
            RuntimeWarning,
            stacklevel=3,
        )
    _write(path, images, labels)
    return images, labels
