"""Image classifiers: Paddle's ``LeNet`` and torchvision's ResNet / MobileNetV3, plus a local weight zoo.

``pretrained=True`` never downloads: it reads ``data_home()/zoo/<name>.pt``, a
``state_dict`` that a course lesson wrote with :func:`save_to_zoo`.

Example:
    >>> import torch
    >>> from sampan.vision.models import LeNet, resnet18
    >>> LeNet()(torch.zeros(2, 1, 28, 28)).shape
    torch.Size([2, 10])
    >>> resnet18(num_classes=4, in_channels=1)(torch.zeros(2, 1, 32, 32)).shape
    torch.Size([2, 4])
"""
from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from sampan.errors import CheckpointError, bad_argument, check_int, outside_sampan
from sampan.utils.io import atomic_write, writing_data_home, zoo_dir

__all__ = [
    "LeNet",
    "load_from_zoo",
    "mobilenet_v3_small",
    "resnet18",
    "resnet50",
    "save_to_zoo",
    "zoo_path",
]

_ZOO_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# parameters of the classification head, skipped when num_classes differs from the saved weights
_HEADS = {"resnet18": ("fc.",), "resnet50": ("fc.",), "mobilenet_v3_small": ("classifier.3.",), "lenet": ("fc.2.",)}


def _check_num_classes(num_classes: Any) -> int:
    if not isinstance(num_classes, int) or isinstance(num_classes, bool):
        raise ValueError(bad_argument("num_classes", num_classes, "an int (0 or less: no classifier, features out)",
                                      "pass num_classes=10"))
    return num_classes


class LeNet(nn.Module):
    """The classic LeNet for 28x28 images, layer for layer as ``paddle.vision.models.LeNet``.

    Args:
        num_classes: output logits; ``0`` or less returns the ``[B, 16, 5, 5]`` features instead.
        in_channels: input channels (1 for grey images).

    Example:
        >>> import torch
        >>> from sampan.vision.models import LeNet
        >>> LeNet(num_classes=10)(torch.zeros(1, 1, 28, 28)).shape
        torch.Size([1, 10])
    """

    def __init__(self, num_classes: int = 10, in_channels: int = 1):
        super().__init__()
        _check_num_classes(num_classes)
        check_int("in_channels", in_channels)
        self.num_classes = num_classes
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 6, 3, stride=1, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2, 2),
            nn.Conv2d(6, 16, 5, stride=1, padding=0),
            nn.ReLU(),
            nn.MaxPool2d(2, 2),
        )
        if num_classes > 0:
            self.fc = nn.Sequential(nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        if self.num_classes > 0:
            x = self.fc(torch.flatten(x, 1))
        return x


def _replace_stem(net: nn.Module, arch: str, in_channels: int) -> None:
    """Swaps the first convolution for one taking ``in_channels`` (same kernel, stride, padding)."""
    if arch.startswith("resnet"):
        old = net.conv1
        net.conv1 = nn.Conv2d(in_channels, old.out_channels, old.kernel_size, old.stride, old.padding, bias=False)
    else:
        old = net.features[0][0]
        net.features[0][0] = nn.Conv2d(in_channels, old.out_channels, old.kernel_size, old.stride, old.padding,
                                       bias=False)


# the layers of each torchvision network before its average pool, and its classifier head
_BODIES = {"resnet18": (("conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4"), "fc"),
           "resnet50": (("conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4"), "fc"),
           "mobilenet_v3_small": (("features",), "classifier")}


class _FeatureNet(nn.Module):
    """A torchvision network run as Paddle runs its ResNets and MobileNets: the average pool only with
    ``with_pool``, the classifier only with ``num_classes > 0``; without them, the feature map comes out as it is
    (``[B, C, 1, 1]`` pooled, ``[B, C, H/32, W/32]`` not). Its layers keep their torchvision names, so its
    ``state_dict`` is the network's own (less the parts left out) and zoo weights load into it.

    Built by :func:`resnet18`, :func:`resnet50` and :func:`mobilenet_v3_small` for ``num_classes <= 0`` or
    ``with_pool=False``; otherwise they return the torchvision network itself. Private: what ``sampan export
    --network sampan.vision.models:...`` lists are the builders.

    Attributes:
        arch: the torchvision architecture (``"resnet18"``).
        num_classes: the logits (0 or less: no classifier).
        with_pool: whether the average pool runs.
    """

    def __init__(self, net: nn.Module, arch: str, *, num_classes: int, with_pool: bool):
        super().__init__()
        body, head = _BODIES[arch]
        self.arch, self.num_classes, self.with_pool, self._body, self._head = arch, num_classes, with_pool, body, head
        for name in body:
            self.add_module(name, getattr(net, name))
        if with_pool:
            self.avgpool = net.avgpool
        if num_classes > 0:
            self.add_module(head, getattr(net, head))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for name in self._body:
            x = self._modules[name](x)
        if self.with_pool:
            x = self.avgpool(x)
        if self.num_classes > 0:
            if x.shape[-2:] != (1, 1):  # as in Paddle, the classifier takes one vector per image
                raise ValueError(bad_argument(
                    "with_pool", self.with_pool, f"True when the feature map is larger than 1x1 ({tuple(x.shape)})",
                    "pass with_pool=True, or num_classes=0 for the feature map, or smaller images (32x32)"))
            x = self._modules[self._head](torch.flatten(x, 1))
        return x


def _torchvision(arch: str, pretrained: bool | str, num_classes: int, in_channels: int, with_pool: bool = True,
                 **kwargs: Any) -> nn.Module:
    import torchvision.models

    _check_num_classes(num_classes)
    check_int("in_channels", in_channels)
    if not isinstance(with_pool, bool):
        raise ValueError(bad_argument("with_pool", with_pool, "True or False",
                                      "pass with_pool=False for the feature map before the average pool"))
    if not isinstance(pretrained, (bool, str)):
        raise ValueError(bad_argument("pretrained", pretrained, "True, False or a zoo name", "pass pretrained=True"))
    net = getattr(torchvision.models, arch)(weights=None, **({"num_classes": num_classes} if num_classes > 0 else {}),
                                            **kwargs)
    if in_channels != 3:
        _replace_stem(net, arch, in_channels)
    if num_classes <= 0 or not with_pool:
        net = _FeatureNet(net, arch, num_classes=num_classes, with_pool=with_pool)
    if pretrained:
        load_from_zoo(net, arch if pretrained is True else pretrained, head=_HEADS[arch])
    return net


def resnet18(pretrained: bool | str = False, *, num_classes: int = 1000, in_channels: int = 3, with_pool: bool = True,
             **kwargs: Any) -> nn.Module:
    """ResNet-18 (``torchvision.models.resnet18``; Paddle: ``paddle.vision.models.resnet18``).

    Args:
        pretrained: ``True`` loads ``zoo_path("resnet18")``; a string loads that zoo entry; never downloads.
            When ``num_classes`` differs from the saved head, the head is left freshly initialised; without a
            head (``num_classes <= 0``) the saved one is skipped.
        num_classes: output logits; ``0`` or less (as in Paddle): no classifier, the features come out
            (``[B, 512, 1, 1]``; the network is then a Sampan module with torchvision's layers and names).
        in_channels: input channels; other than 3 replaces the first convolution.
        with_pool: ``False`` (as in Paddle) leaves out the average pool: with ``num_classes <= 0`` the feature map
            ``[B, 512, H/32, W/32]`` comes out.
        **kwargs: passed to torchvision (e.g. ``norm_layer``).

    Example:
        >>> import torch
        >>> from sampan.vision.models import resnet18
        >>> resnet18(num_classes=10)(torch.zeros(2, 3, 32, 32)).shape
        torch.Size([2, 10])
        >>> resnet18(num_classes=0, with_pool=False)(torch.zeros(2, 3, 64, 64)).shape
        torch.Size([2, 512, 2, 2])
    """
    return _torchvision("resnet18", pretrained, num_classes, in_channels, with_pool, **kwargs)


def resnet50(pretrained: bool | str = False, *, num_classes: int = 1000, in_channels: int = 3, with_pool: bool = True,
             **kwargs: Any) -> nn.Module:
    """ResNet-50 (``torchvision.models.resnet50``); arguments as :func:`resnet18` (2048 feature channels).

    Example:
        >>> from sampan.vision.models import resnet50
        >>> resnet50(num_classes=2).fc.out_features
        2
    """
    return _torchvision("resnet50", pretrained, num_classes, in_channels, with_pool, **kwargs)


def mobilenet_v3_small(
    pretrained: bool | str = False, *, num_classes: int = 1000, in_channels: int = 3, with_pool: bool = True,
    **kwargs: Any
) -> nn.Module:
    """MobileNetV3-Small (``torchvision.models.mobilenet_v3_small``); arguments as :func:`resnet18` (576 feature
    channels; ``num_classes <= 0`` leaves out the whole classifier, as Paddle does).

    Example:
        >>> import torch
        >>> from sampan.vision.models import mobilenet_v3_small
        >>> mobilenet_v3_small(num_classes=4)(torch.zeros(2, 3, 64, 64)).shape
        torch.Size([2, 4])
        >>> mobilenet_v3_small(num_classes=0)(torch.zeros(2, 3, 64, 64)).shape
        torch.Size([2, 576, 1, 1])
    """
    return _torchvision("mobilenet_v3_small", pretrained, num_classes, in_channels, with_pool, **kwargs)


def zoo_path(name: str) -> Path:
    """Where the local zoo keeps weights called ``name``: ``data_home()/zoo/<name>.pt``.

    Example:
        >>> from sampan.vision.models import zoo_path
        >>> zoo_path("resnet18").name
        'resnet18.pt'
    """
    if not isinstance(name, str) or not _ZOO_NAME.match(name):
        raise ValueError(bad_argument(
            "name", name, "a zoo name of letters, digits, '_', '-' and '.'", "pass e.g. name='resnet18-shapes'"
        ))
    return zoo_dir() / f"{name}.pt"


def save_to_zoo(net: nn.Module, name: str) -> Path:
    """Saves ``net``'s ``state_dict`` (on CPU) to :func:`zoo_path` atomically; returns the path.

    Accepts an ``nn.Module`` or a ``sampan.Model`` (its ``network`` is saved).

    Example:
        >>> from sampan.vision.models import LeNet, save_to_zoo
        >>> path = save_to_zoo(LeNet(), "lenet-digits")
    """
    module = net if isinstance(net, nn.Module) else getattr(net, "network", None)
    if not isinstance(module, nn.Module):
        raise TypeError(bad_argument("net", net, "a torch.nn.Module or a sampan.Model", "pass the trained network"))
    state = {k: v.detach().cpu() for k, v in module.state_dict().items()}
    with writing_data_home(f"save {name!r} to the model zoo"):
        return atomic_write(zoo_path(name), lambda tmp: torch.save(state, tmp))


def _missing_weights(name: str, path: Path) -> FileNotFoundError:
    return FileNotFoundError(
        f"No pretrained weights {name!r} in the local zoo: {path} does not exist. Sampan never downloads "
        f"weights; the course produces them. Train the network (the transfer-learning lesson trains one on "
        f"`shapes`) and save it with sampan.vision.models.save_to_zoo(net, {name!r}), or pass pretrained=False."
    )


def load_from_zoo(net: nn.Module, name: str, *, head: tuple[str, ...] = ()) -> nn.Module:
    """Loads zoo weights ``name`` into ``net`` (``torch.load(weights_only=True)``) and returns ``net``.

    Args:
        net: the network to fill.
        name: the zoo entry (see :func:`zoo_path`).
        head: parameter-name prefixes of the classifier head; those whose shape differs from the
            saved ones (another ``num_classes``) keep their fresh initialisation, with a warning. A network
            built with ``num_classes <= 0`` (no classifier) skips the saved one.

    Raises:
        FileNotFoundError: no such zoo entry; the message says how to produce it.
        sampan.errors.CheckpointError: the weights belong to another architecture.

    Example:
        >>> from sampan.vision.models import LeNet, load_from_zoo
        >>> net = load_from_zoo(LeNet(), "lenet-digits")  # doctest: +SKIP
    """
    path = zoo_path(name)
    if not path.is_file():
        raise _missing_weights(name, path)
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated or not a torch file
        raise CheckpointError(f"Cannot read zoo weights {path}: {exc}", path=str(path)) from exc
    own = net.state_dict()
    mismatched = [(k, tuple(saved[k].shape), tuple(v.shape)) for k, v in own.items()
                  if k in saved and saved[k].shape != v.shape]
    fresh_head = [k for k, _, _ in mismatched if k.startswith(head)] if head else []
    mismatched = [m for m in mismatched if m[0] not in fresh_head]
    missing = [k for k in own if k not in saved]
    # num_classes <= 0: the saved classifier has no place in this network and is not used
    left_out = (f"{net._head}.",) if isinstance(net, _FeatureNet) and net.num_classes <= 0 else ()
    unexpected = [k for k in saved if k not in own and not k.startswith(left_out)]
    if missing or unexpected or mismatched:
        raise CheckpointError(
            f"Zoo weights {path} do not fit this network: missing {missing[:5]}, unexpected {unexpected[:5]}, "
            f"mismatched {mismatched[:5]}. HINT: build the same architecture (and in_channels) that was saved.",
            path=str(path), missing=missing, unexpected=unexpected, mismatched=mismatched,
        )
    if fresh_head:
        warnings.warn(f"{name}: classifier head {fresh_head} has another num_classes; left freshly initialised.",
                      stacklevel=outside_sampan())
    net.load_state_dict({k: v for k, v in saved.items() if k in own and k not in fresh_head}, strict=False)
    return net
