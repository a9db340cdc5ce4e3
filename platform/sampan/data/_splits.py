"""A fixed, stratified train / val / test split without importing scikit-learn."""
from __future__ import annotations

import numpy as np

SPLITS = ("train", "val", "test")


def stratified_split(labels: np.ndarray, val: int, test: int, seed: int) -> dict[str, np.ndarray]:
    """Splits indices ``0..N-1`` into train / val / test with the class mix of ``labels`` in each.

    Every sample gets the key "its rank within its class / class size" (ranks in
    a seeded random order); sorting by that key interleaves the classes in
    proportion, so any prefix is stratified. The first ``test`` go to test, the
    next ``val`` to val, the rest to train. Each split's indices come back sorted.
    """
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(labels))
    key = np.empty(len(labels), dtype=np.float64)
    for c in np.unique(labels):
        members = order[labels[order] == c]
        key[members] = (np.arange(len(members)) + 0.5) / len(members)
    ranked = order[np.argsort(key[order], kind="stable")]
    return {
        "test": np.sort(ranked[:test]),
        "val": np.sort(ranked[test : test + val]),
        "train": np.sort(ranked[test + val :]),
    }
