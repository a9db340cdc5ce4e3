"""Image transforms with Paddle's names, on ``torchvision.transforms.v2``.

The classes are torchvision's, with what Paddle's do on top: like Paddle's, every
transform takes a PIL image, a CHW tensor or a NumPy array (HWC, or HW for one
channel), and returns an array for an array (torchvision's v2 transforms would
pass arrays through untouched). :class:`ToTensor` turns a PIL image or HWC array
into a float32 ``[C, H, W]`` tensor, scaling only uint8 into ``[0, 1]``; the flips
take ``prob``; :class:`Normalize` accepts scalars and ``data_format``;
:class:`Transpose` reorders array axes.

Sampan's catalog datasets already yield float CHW tensors in ``[0, 1]``, so
normalise with means and stds on that scale (``Normalize(mean=[0.5], std=[0.5])``),
not Paddle's 0..255 scale (``127.5``).

Example:
    >>> import numpy as np
    >>> from sampan.vision.transforms import Compose, Normalize, Resize, ToTensor
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
from torchvision.transforms.v2 import Lambda, RandomApply, RandomChoice

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


class Compose(v2.Compose):
    """torchvision's ``v2.Compose`` (Paddle's ``Compose``): applies ``transforms`` in order. A transform given
    as a class (``ToTensor`` for ``ToTensor()``) is refused here, by name, rather than when the first image
    meets it.

    Example:
        >>> from sampan.vision.transforms import Compose, Normalize, ToTensor
        >>> t = Compose([ToTensor(), Normalize(mean=0.5, std=0.5)])
    """

    def __init__(self, transforms: Sequence[Any]):
        for t in transforms if isinstance(transforms, Sequence) else ():
            if isinstance(t, type):
                raise TypeError(bad_argument("transforms", transforms, f"transform instances; {t.__name__} is a "
                                             "class", f"create it: {t.__name__}(), with its arguments"))
        super().__init__(transforms)


def _image_array(image: np.ndarray, transform: str) -> np.ndarray:
    if image.ndim not in (2, 3):
        raise ValueError(bad_argument("image", f"<ndarray of shape {image.shape}>",
                                      f"one HWC or HW image for {transform}",
                                      "transform one image at a time (a batch is not an image)"))
    return image


class _TakesArrays:
    """Runs a torchvision v2 transform on a HWC / HW ndarray as on a CHW tensor and returns an ndarray of the
    input's layout and dtype, as Paddle's transforms (cv2 backend) do; other inputs go to torchvision as they are."""

    def forward(self, *inputs: Any) -> Any:
        if len(inputs) != 1 or not isinstance(inputs[0], np.ndarray):
            return super().forward(*inputs)
        array = _image_array(inputs[0], type(self).__name__)
        hwc = torch.tensor(array[..., None] if array.ndim == 2 else array)
        out = super().forward(hwc.permute(2, 0, 1)).permute(1, 2, 0)
        out = out[..., 0] if array.ndim == 2 and out.shape[-1] == 1 else out
        return np.ascontiguousarray(out.numpy())


def _taking_arrays(base: type) -> type:
    name = base.__name__
    doc = (f"torchvision's ``v2.{name}`` (Paddle's ``{name}``), same arguments; like Paddle's it also takes a "
           "HWC / HW ndarray and returns one.")
    return type(name, (_TakesArrays, base), {"__doc__": doc, "__module__": __name__})


CenterCrop = _taking_arrays(v2.CenterCrop)
ColorJitter = _taking_arrays(v2.ColorJitter)
Grayscale = _taking_arrays(v2.Grayscale)
Pad = _taking_arrays(v2.Pad)
RandomAffine = _taking_arrays(v2.RandomAffine)
RandomCrop = _taking_arrays(v2.RandomCrop)
RandomErasing = _taking_arrays(v2.RandomErasing)
RandomGrayscale = _taking_arrays(v2.RandomGrayscale)
RandomResizedCrop = _taking_arrays(v2.RandomResizedCrop)
RandomRotation = _taking_arrays(v2.RandomRotation)
Resize = _taking_arrays(v2.Resize)


class Transpose:
    """Reorders the axes of an array or tensor; ``order=(2, 0, 1)`` turns HWC into CHW (Paddle's ``Transpose``).

    As in Paddle, a HW array (or PIL image) is taken as HW1 first, so one channel becomes ``[1, H, W]``.

    Example:
        >>> import numpy as np
        >>> from sampan.vision.transforms import Transpose
        >>> Transpose()(np.zeros((4, 5, 3))).shape
        (3, 4, 5)
        >>> Transpose()(np.zeros((4, 5))).shape
        (1, 4, 5)
    """

    def __init__(self, order: Sequence[int] = (2, 0, 1)):
        self.order = tuple(order)

    def __call__(self, image: Any) -> Any:
        if isinstance(image, torch.Tensor):
            return image.permute(*self.order)
        array = np.asarray(image)
        if array.ndim == 2 and len(self.order) == 3:
            array = array[..., None]
        if array.ndim != len(self.order):
            raise ValueError(bad_argument("image", f"<array of shape {array.shape}>",
                                          f"an array with {len(self.order)} axes for order={self.order}",
                                          "pass a HWC or HW image, or an order with one entry per axis"))
        return np.transpose(array, self.order)

    def __repr__(self) -> str:
        return f"Transpose(order={self.order})"


def _check_format(data_format: str) -> None:
    if isinstance(data_format, str) and data_format in ("CHW", "HWC"):
        return
    fix = ("pass data_format='CHW'" if isinstance(data_format, str) else  # an image, as in ToTensor(img)
           "create the transform, then call it on the image: ToTensor()(image)")
    shown = f"<{type(data_format).__name__} of shape {list(data_format.shape)}>" if hasattr(data_format, "shape") \
        else data_format
    raise ValueError(bad_argument("data_format", shown, "'CHW' or 'HWC'", fix))


def _float32(image: torch.Tensor) -> torch.Tensor:
    """uint8 -> float32 in ``[0, 1]``; any other dtype -> float32 with its values (Paddle and torchvision's v1
    ``ToTensor`` scale only uint8; ``v2.ToDtype(scale=True)`` would divide int32 / int64 by their maximum)."""
    return image.to(torch.float32).div_(255) if image.dtype == torch.uint8 else image.to(torch.float32)


class ToTensor(v2.Compose):
    """PIL image / HWC or HW ndarray / tensor -> float32 ``[C, H, W]`` tensor (Paddle's ``ToTensor``).

    uint8 values (arrays, tensors, 8-bit PIL images) are scaled into ``[0, 1]``; other dtypes keep their
    values, as in Paddle (which also keeps their dtype; here they become float32). Calls ``v2.ToImage()``,
    ``v2.ToPureTensor()``, then converts. A float tensor passes through unchanged, so it is safe on catalog
    datasets too.

    Args:
        data_format: ``"CHW"`` (default) or ``"HWC"``.

    Example:
        >>> import numpy as np
        >>> from sampan.vision.transforms import ToTensor
        >>> ToTensor()(np.full((2, 2, 3), 255, dtype=np.uint8)).shape
        torch.Size([3, 2, 2])
    """

    def __init__(self, data_format: Literal["CHW", "HWC"] = "CHW"):
        _check_format(data_format)
        steps = [v2.ToImage(), v2.ToPureTensor(), _float32]
        if data_format == "HWC":
            steps.append(Transpose((1, 2, 0)))
        super().__init__(steps)
        self.data_format = data_format


class Normalize(v2.Normalize):
    """``(x - mean) / std`` per channel (``v2.Normalize``; Paddle's ``Normalize``). Scalars are allowed.

    A NumPy array is normalised as float32 and returned as an array, as Paddle does (a HW array is one
    channel); ``data_format`` says where its channels are.

    Args:
        mean: one value or one per channel.
        std: one value or one per channel.
        data_format: ``"CHW"`` (default) or ``"HWC"`` for channel-last tensors and arrays.
        inplace: modify the input tensor.

    Example:
        >>> import torch
        >>> from sampan.vision.transforms import Normalize
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
        image = inputs[0]
        if isinstance(image, np.ndarray):
            array = _image_array(image, "Normalize")
            channel = 0 if self.data_format == "CHW" else -1
            tensor = torch.tensor(array, dtype=torch.float32)
            tensor = tensor.unsqueeze(channel) if array.ndim == 2 else tensor
            out = self._channels_first(tensor)
            return (out.squeeze(channel) if array.ndim == 2 else out).numpy()
        if self.data_format == "HWC":
            return self._channels_first(image)
        return super().forward(*inputs)

    def _channels_first(self, image: torch.Tensor) -> torch.Tensor:
        if self.data_format == "HWC":
            return super().forward(image.permute(2, 0, 1)).permute(1, 2, 0)
        return super().forward(image)


class RandomHorizontalFlip(_TakesArrays, v2.RandomHorizontalFlip):
    """Flips left-right with probability ``prob`` (``v2.RandomHorizontalFlip``; Paddle's name, ``prob`` and ndarrays).

    Example:
        >>> import torch
        >>> from sampan.vision.transforms import RandomHorizontalFlip
        >>> RandomHorizontalFlip(prob=1.0)(torch.tensor([[[1.0, 2.0]]])).tolist()
        [[[2.0, 1.0]]]
    """

    def __init__(self, prob: float = 0.5, *, p: float | None = None):
        super().__init__(p=prob if p is None else p)


class RandomVerticalFlip(_TakesArrays, v2.RandomVerticalFlip):
    """Flips top-bottom with probability ``prob`` (``v2.RandomVerticalFlip``; Paddle's name, ``prob`` and ndarrays).

    Example:
        >>> import torch
        >>> from sampan.vision.transforms import RandomVerticalFlip
        >>> RandomVerticalFlip(prob=1.0)(torch.tensor([[[1.0], [2.0]]])).tolist()
        [[[2.0], [1.0]]]
    """

    def __init__(self, prob: float = 0.5, *, p: float | None = None):
        super().__init__(p=prob if p is None else p)
