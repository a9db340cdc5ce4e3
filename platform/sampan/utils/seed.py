"""Seeding and deterministic mode (``paddle.seed`` / Lightning's ``seed_everything``)."""
from __future__ import annotations

import os
import random

import numpy as np
import torch


def seed_everything(seed: int = 0, *, deterministic: bool = False) -> int:
    """Seeds Python, NumPy and torch (all devices); optionally turns on deterministic algorithms.

    Args:
        seed: the seed.
        deterministic: also call :func:`enable_determinism`.

    Returns:
        The seed, so it can be logged.

    Example:
        >>> from sampan import seed_everything
        >>> seed_everything(42)
        42
    """
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"Expected `seed` to be an int. Received: seed={seed!r}.")
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed % (2**32))  # what Python accepts there: 0 to 4294967295
    if deterministic:
        enable_determinism()
    return seed


def enable_determinism() -> None:
    """Makes torch pick deterministic kernels (``torch.use_deterministic_algorithms``)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
