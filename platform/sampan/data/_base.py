"""The two in-memory dataset types the catalog returns: images with labels, texts with labels."""
from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch.utils.data import Dataset

from sampan.errors import bad_argument


class ImageDataset(Dataset):
    """Images and int64 labels held in memory as tensors.

    Items are ``(image, label)``: ``image`` a float32 ``[C, H, W]`` tensor in
    ``[0, 1]`` (then ``transform`` applied), ``label`` a 0-d int64 tensor, so a
    ``DataLoader`` batch feeds ``torch.nn.CrossEntropyLoss`` directly.

    Attributes:
        images: all images, uint8 or float32 ``[N, C, H, W]`` (as stored; uint8 is scaled on access).
        labels: int64 ``[N]``.
        classes: class names, ``classes[label]``.

    Example:
        >>> ds = ImageDataset(torch.zeros(4, 1, 8, 8), torch.tensor([0, 1, 0, 1]), ["a", "b"])
        >>> ds[1][0].shape, ds[1][1]
        (torch.Size([1, 8, 8]), tensor(1))
    """

    def __init__(
        self,
        images: torch.Tensor,
        labels: torch.Tensor,
        classes: Sequence[str],
        transform: Callable | None = None,
        *,
        name: str = "",
        split: str = "",
    ):
        if not isinstance(images, torch.Tensor) or images.ndim != 4:
            raise ValueError(bad_argument("images", getattr(images, "shape", images), "a tensor [N, C, H, W]",
                                          "stack the images into one uint8 or float32 tensor"))
        if len(labels) != len(images):
            raise ValueError(bad_argument("labels", f"<{len(labels)} labels>", f"one label per image ({len(images)})",
                                          "pass labels of the same length as images"))
        self.images = images
        self.labels = labels.to(torch.int64)
        self.classes = list(classes)
        self.transform = transform
        self.name, self.split = name, split

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int):
        image = self.images[index]
        # a fresh tensor either way, so nothing a caller or transform does in place reaches the dataset
        image = image.float().div_(255.0) if image.dtype == torch.uint8 else image.clone()
        if self.transform is not None:
            image = self.transform(image)
        return image, self.labels[index]

    def __getitems__(self, indices: Sequence[int]) -> list:
        """The items at ``indices`` with one indexing operation instead of one call per item (a ``DataLoader``
        fetches its batches through this): the same items as ``[self[i] for i in indices]``, and as fresh.

        Example:
            >>> ds = ImageDataset(torch.arange(32.).view(2, 1, 4, 4), torch.tensor([0, 1]), ["a", "b"])
            >>> [label.item() for _, label in ds.__getitems__([1, 0])]
            [1, 0]
        """
        if self.transform is not None:
            return [self[i] for i in indices]
        index = torch.as_tensor(indices, dtype=torch.int64)
        images = self.images[index]  # advanced indexing copies: nothing done to the batch reaches the dataset
        images = images.float().div_(255.0) if images.dtype == torch.uint8 else images
        return list(zip(images.unbind(0), self.labels[index].unbind(0)))

    def __repr__(self) -> str:
        shape = list(self.images.shape[1:])
        return f"{type(self).__name__}(name={self.name!r}, split={self.split!r}, size={len(self)}, image_shape={shape}, classes={len(self.classes)})"


class TextDataset(Dataset):
    """Texts and integer labels held in memory. Items are ``(text, label)`` with ``label`` an int.

    Attributes:
        texts: list of str.
        labels: int64 tensor ``[N]``.
        classes: class names.

    Example:
        >>> ds = TextDataset(["好", "差"], [1, 0], ["negative", "positive"])
        >>> ds[0]
        ('好', 1)
    """

    def __init__(
        self,
        texts: Sequence[str],
        labels: Sequence[int] | torch.Tensor,
        classes: Sequence[str],
        transform: Callable | None = None,
        *,
        name: str = "",
        split: str = "",
    ):
        if len(labels) != len(texts):
            raise ValueError(bad_argument("labels", f"<{len(labels)} labels>", f"one label per text ({len(texts)})",
                                          "pass labels of the same length as texts"))
        self.texts = list(texts)
        self.labels = torch.as_tensor(labels, dtype=torch.int64)
        self.classes = list(classes)
        self.transform = transform
        self.name, self.split = name, split

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, index: int):
        text = self.texts[index]
        if self.transform is not None:
            text = self.transform(text)
        return text, int(self.labels[index])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, split={self.split!r}, size={len(self)}, classes={len(self.classes)})"
