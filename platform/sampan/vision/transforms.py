"""Image transforms with Paddle's names, on ``torchvision.transforms.v2``.

Most names are torchvision's own classes. The few that differ follow Paddle:
:class:`ToTensor` turns a PIL image or HWC uint8 array into a float ``[C, H, W]``
tensor in ``[0, 1]``; the flips take ``prob``; :class:`Normalize` accepts
scalars and ``data_format``; :class:`Transpose` reorders array axes.

Sampan's catalog datasets already yield float CHW tensors in ``[0, 1]``, so
normalise with means and stds on that scale (``Normalize(mean=[0.5], std=[0.5])``),
not Paddle's 0..255 scale (``127.5``).

Example:
    >>> import numpy as np
    >>> t = Compose([ToTensor(), Resize(16), Normalize(mean=0.5, std=0.5)])
    >>> t(np.zeros((28, 28, 3), dtype=np.uint8)).shape
    torch.Size([3, 16, 16])
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import torch
from torchvision.transforms import v2
from torchvision.transforms.v2 import (
    CenterCrop,
    ColorJitter,
    Compose,
    Grayscale,
    Lambda,
    Pad,
    RandomAffine,
    RandomApply,
    RandomChoice,
    RandomCrop,
    RandomErasing,
    RandomGrayscale,
    RandomResizedCrop,
    RandomRotation,
    Resize,
)

from sampan.errors import bad_argument

__all__ = [
    "CenterCrop",
    "ColorJitter",
    "Compose",
    "Grayscale",
    "Lambda",
    "Normalize",
    "Pad",
    "RandomAffine",
    "RandomApply",
    "RandomChoice",
    "RandomCrop",
    "RandomErasing",
    "RandomGrayscale",
    "RandomHorizontalFlip",
    "RandomResizedCrop",
    "RandomRotation",
    "RandomVerticalFlip",
    "Resize",
    "ToTensor",
    "Transpose",
    "v2",
]


class Transpose:
    """Reorders the axes of an array or tensor; ``order=(2, 0, 1)`` turns HWC into CHW (Paddle's ``Transpose``).

    Example:
        >>> Transpose()(np.zeros((4, 5, 3))).shape
        (3, 4, 5)
    """

    def __init__(self, order: Sequence[int] = (2, 0, 1)):
        self.order = tuple(order)

    def __call__(self, image: Any) -> Any:
        if isinstance(image, torch.Tensor):
            return image.permute(*self.order)
        return np.transpose(np.asarray(image), self.order)

    def __repr__(self) -> str:
        return f"Transpose(order={self.order})"


def _check_format(data_format: str) -> None:
    if data_format not in ("CHW", "HWC"):
        raise ValueError(bad_argument("data_format", data_format, "'CHW' or 'HWC'", "pass data_format='CHW'"))


class ToTensor(v2.Compose):
    """PIL image / HWC uint8 ndarray / tensor -> float32 tensor in ``[0, 1]`` (Paddle's ``ToTensor``).

    Calls ``v2.ToImage()``, ``v2.ToDtype(torch.float32, scale=True)``, ``v2.ToPureTensor()``.
    A float tensor passes through unchanged, so it is safe on catalog datasets too.

    Args:
        data_format: ``"CHW"`` (default) or ``"HWC"``.

    Example:
        >>> ToTensor()(np.full((2, 2, 3), 255, dtype=np.uint8)).shape
        torch.Size([3, 2, 2])
    """

    def __init__(self, data_format: Literal["CHW", "HWC"] = "CHW"):
        _check_format(data_format)
        steps = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.ToPureTensor()]
        if data_format == "HWC":
            steps.append(Transpose((1, 2, 0)))
        super().__init__(steps)
        self.data_format = data_format


class Normalize(v2.Normalize):
    """``(x - mean) / std`` per channel (``v2.Normalize``; Paddle's ``Normalize``). Scalars are allowed.

    Args:
        mean: one value or one per channel.
        std: one value or one per channel.
        data_format: ``"CHW"`` (default) or ``"HWC"`` for channel-last tensors.
        inplace: modify the input tensor.

    Example:
        >>> Normalize(mean=0.5, std=0.5)(torch.ones(1, 2, 2)).tolist()
        [[[1.0, 1.0], [1.0, 1.0]]]
    """

    def __init__(self, mean: float | Sequence[float], std: float | Sequence[float],
                 data_format: Literal["CHW", "HWC"] = "CHW", inplace: bool = False):
        _check_format(data_format)
        as_list = lambda v: [float(v)] if isinstance(v, (int, float)) else [float(x) for x in v]  # noqa: E731
        super().__init__(as_list(mean), as_list(std), inplace=inplace)
        self.data_format = data_format

    def forward(self, *inputs: Any) -> Any:
        if self.data_format == "HWC":
            image = inputs[0]
            return super().forward(image.permute(2, 0, 1)).permute(1, 2, 0)
        return super().forward(*inputs)


class RandomHorizontalFlip(v2.RandomHorizontalFlip):
    """Flips left-right with probability ``prob`` (``v2.RandomHorizontalFlip``; Paddle's name and ``prob``).

    Example:
        >>> RandomHorizontalFlip(prob=1.0)(torch.tensor([[[1.0, 2.0]]])).tolist()
        [[[2.0, 1.0]]]
    """

    def __init__(self, prob: float = 0.5, *, p: float | None = None):
        super().__init__(p=prob if p is None else p)


class RandomVerticalFlip(v2.RandomVerticalFlip):
    """Flips top-bottom with probability ``prob`` (``v2.RandomVerticalFlip``; Paddle's name and ``prob``).

    Example:
        >>> RandomVerticalFlip(prob=1.0)(torch.tensor([[[1.0], [2.0]]])).tolist()
        [[[2.0], [1.0]]]
    """

    def __init__(self, prob: float = 0.5, *, p: float | None = None):
        super().__init__(p=prob if p is None else p)
