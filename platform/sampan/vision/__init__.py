"""Vision: networks (``sampan.vision.models``) and transforms (``sampan.vision.transforms``).

Mirrors ``paddle.vision``. Both submodules import torchvision, so they load on
first use: ``import sampan.vision`` alone costs nothing.

Example:
    >>> from sampan.vision import models, transforms
    >>> net = models.LeNet(num_classes=10)
    >>> t = transforms.Compose([transforms.ToTensor(), transforms.Normalize(mean=[0.5], std=[0.5])])
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["LeNet", "models", "transforms"]

_SUBMODULES = {"models", "transforms"}


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        value = importlib.import_module(f"sampan.vision.{name}")
    elif name == "LeNet":  # paddle.vision.LeNet
        value = importlib.import_module("sampan.vision.models").LeNet
    else:
        raise AttributeError(f"module 'sampan.vision' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # pragma: no cover
    from sampan.vision import models, transforms
    from sampan.vision.models import LeNet
