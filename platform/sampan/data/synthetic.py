"""Deterministic synthetic image sets: ``shapes`` (10 classes) and ``defects`` (imbalanced).

Both are drawn with numpy from a fixed seed, so the same call gives the same
bytes on every machine; the catalog stores their SHA-256 in
``datasets/shapes/card.yaml`` and ``datasets/defects/card.yaml``.

Example:
    >>> from sampan.data import make_shapes
    >>> images, labels = make_shapes(20, seed=0)
    >>> images.shape, images.dtype, labels.dtype
    ((20, 32, 32, 3), dtype('uint8'), dtype('int64'))
"""
from __future__ import annotations

import hashlib
import math
from typing import Callable, Sequence

import numpy as np

from sampan.data import _draw
from sampan.errors import bad_argument

SHAPE_CLASSES = (
    "circle", "square", "triangle", "cross", "ring",
    "star", "ellipse", "diamond", "horizontal_bars", "vertical_bars",
)
DEFECT_CLASSES = ("clean", "scratch", "spot", "crack")
DEFECT_WEIGHTS = (0.70, 0.12, 0.10, 0.08)

__all__ = ["DEFECT_CLASSES", "DEFECT_WEIGHTS", "SHAPE_CLASSES", "content_sha256", "make_defects", "make_shapes"]


def content_sha256(images: np.ndarray, labels: np.ndarray) -> str:
    """SHA-256 of an image set's contents (uint8 images, then little-endian int64 labels)."""
    digest = hashlib.sha256()
    digest.update(np.ascontiguousarray(images, dtype=np.uint8).tobytes())
    digest.update(np.ascontiguousarray(labels, dtype="<i8").tobytes())
    return digest.hexdigest()


# ---------------------------------------------------------------- shapes


def _shape_mask(kind: str, xs, ys, cx: float, cy: float, r: float, angle: float) -> np.ndarray:
    dx, dy = xs - cx, ys - cy
    if kind == "circle":
        return dx * dx + dy * dy <= r * r
    if kind == "ring":
        d2 = dx * dx + dy * dy
        return (d2 <= r * r) & (d2 >= (0.55 * r) ** 2)
    if kind == "ellipse":
        c, s = math.cos(angle), math.sin(angle)
        u, v = (dx * c + dy * s) / r, (dy * c - dx * s) / (0.5 * r)
        return u * u + v * v <= 1.0
    if kind == "square":
        return np.maximum(np.abs(dx), np.abs(dy)) <= 0.8 * r
    if kind == "diamond":
        return np.abs(dx) + np.abs(dy) <= r
    if kind == "triangle":
        return _draw.polygon_mask(xs, ys, _draw.regular_polygon(cx, cy, r, 3, -math.pi / 2 + 0.3 * angle))
    if kind == "star":
        return _draw.polygon_mask(xs, ys, _draw.star_polygon(cx, cy, r, 5, -math.pi / 2 + 0.3 * angle))
    if kind == "cross":
        w = 0.3 * r
        ax, ay = np.abs(dx), np.abs(dy)
        return ((ax <= w) & (ay <= r)) | ((ay <= w) & (ax <= r))
    if kind in ("horizontal_bars", "vertical_bars"):
        along = dy if kind == "horizontal_bars" else dx
        box = (np.abs(dx) <= r) & (np.abs(dy) <= r)
        return box & (((along + r) // (2 * r / 5)) % 2 == 0)
    raise AssertionError(kind)


def _contrasting_colours(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    dark = rng.integers(0, 100, size=3).astype(np.float64)
    light = rng.integers(140, 256, size=3).astype(np.float64)
    return (dark, light) if rng.integers(0, 2) else (light, dark)


def make_shapes(num_samples: int, *, seed: int = 0, size: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """Draws ``num_samples`` RGB images of the 10 :data:`SHAPE_CLASSES`, balanced, from ``seed``.

    Each image has a random background and a contrasting shape colour, a random
    centre, size and rotation, and a little pixel noise.

    Args:
        num_samples: how many images.
        seed: the generator seed; the same seed gives the same bytes.
        size: image height and width in pixels.

    Returns:
        ``(images, labels)``: uint8 ``[N, size, size, 3]`` and int64 ``[N]``.

    Example:
        >>> from sampan.data import make_shapes
        >>> images, labels = make_shapes(10, seed=1)
        >>> sorted(labels.tolist()) == list(range(10))
        True
    """
    _check_count(num_samples, size)
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(num_samples, dtype=np.int64) % len(SHAPE_CLASSES))
    xs, ys = _draw.grid(size)
    images = np.empty((num_samples, size, size, 3), dtype=np.uint8)
    scale = size / 32.0
    for i, label in enumerate(labels):
        r = float(rng.uniform(7.0, 12.0)) * scale
        cx, cy = (float(v) for v in rng.uniform(r + 1, size - r - 1, size=2))
        angle = float(rng.uniform(0.0, math.pi))
        background, colour = _contrasting_colours(rng)
        alpha = _draw.coverage(_shape_mask(SHAPE_CLASSES[label], xs, ys, cx, cy, r, angle))
        image = _draw.blend(np.broadcast_to(background, (size, size, 3)), colour, alpha)
        image += rng.integers(-10, 11, size=image.shape)
        images[i] = _draw.to_uint8(image)
    return images, labels


# ---------------------------------------------------------------- defects


def _surface(rng: np.random.Generator, size: int) -> np.ndarray:
    """A brushed-metal texture: a grey level, streaks along one axis, a slight tint."""
    level = float(rng.uniform(100.0, 160.0))
    streaks = rng.integers(-12, 13, size=size).astype(np.float64)
    grain = streaks[None, :] if rng.integers(0, 2) else streaks[:, None]
    tint = rng.integers(-8, 9, size=3).astype(np.float64)
    surface = level + np.broadcast_to(grain, (size, size))[..., None] + tint[None, None, :]
    return surface + rng.integers(-5, 6, size=(size, size, 3))


def _scratch(rng, xs, ys, size: int) -> tuple[np.ndarray, float]:
    length = float(rng.uniform(0.45, 0.85)) * size
    angle = float(rng.uniform(0.0, math.pi))
    cx, cy = (float(v) for v in rng.uniform(0.3 * size, 0.7 * size, size=2))
    hx, hy = 0.5 * length * math.cos(angle), 0.5 * length * math.sin(angle)
    near = _draw.segment_distance2(xs, ys, (cx - hx, cy - hy), (cx + hx, cy + hy)) <= 0.6 ** 2
    return near, float(rng.choice([-1.0, 1.0])) * float(rng.uniform(60.0, 90.0))


def _spot(rng, xs, ys, size: int) -> tuple[np.ndarray, float]:
    mask = np.zeros(xs.shape, dtype=bool)
    for _ in range(int(rng.integers(1, 4))):
        r = float(rng.uniform(1.5, 3.5)) * size / 32
        cx, cy = (float(v) for v in rng.uniform(0.2 * size, 0.8 * size, size=2))
        mask |= (xs - cx) ** 2 + (ys - cy) ** 2 <= r * r
    return mask, -float(rng.uniform(60.0, 90.0))


def _crack(rng, xs, ys, size: int) -> tuple[np.ndarray, float]:
    mask = np.zeros(xs.shape, dtype=bool)
    x, y = (float(v) for v in rng.uniform(0.3 * size, 0.7 * size, size=2))
    heading = float(rng.uniform(0.0, 2 * math.pi))
    for _ in range(int(rng.integers(4, 7))):
        heading += float(rng.uniform(-0.9, 0.9))
        step = float(rng.uniform(0.08, 0.16)) * size
        nx = min(max(x + step * math.cos(heading), 0.0), float(size))
        ny = min(max(y + step * math.sin(heading), 0.0), float(size))
        mask |= _draw.segment_distance2(xs, ys, (x, y), (nx, ny)) <= 0.8 ** 2
        x, y = nx, ny
    return mask, -float(rng.uniform(70.0, 100.0))


_DEFECT_DRAWERS: dict[str, Callable] = {"scratch": _scratch, "spot": _spot, "crack": _crack}


def _class_counts(num_samples: int, weights: Sequence[float]) -> np.ndarray:
    """Largest-remainder allocation: counts that sum to ``num_samples`` in proportion to ``weights``."""
    w = np.asarray(weights, dtype=np.float64)
    exact = num_samples * w / w.sum()
    counts = np.floor(exact).astype(np.int64)
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[: num_samples - counts.sum()]] += 1
    return counts


def make_defects(
    num_samples: int, *, seed: int = 0, weights: Sequence[float] = DEFECT_WEIGHTS, size: int = 32
) -> tuple[np.ndarray, np.ndarray]:
    """Draws an imbalanced set of synthetic metal-surface images: clean, scratch, spot, crack.

    Args:
        num_samples: how many images.
        seed: the generator seed; the same seed gives the same bytes.
        weights: class proportions in :data:`DEFECT_CLASSES` order (clean is the majority by default).
        size: image height and width in pixels.

    Returns:
        ``(images, labels)``: uint8 ``[N, size, size, 3]`` and int64 ``[N]``.

    Example:
        >>> import numpy as np
        >>> from sampan.data import make_defects
        >>> images, labels = make_defects(100, seed=0)
        >>> np.bincount(labels).tolist()
        [70, 12, 10, 8]
    """
    _check_count(num_samples, size)
    if len(weights) != len(DEFECT_CLASSES) or min(weights) < 0 or sum(weights) <= 0:
        raise ValueError(bad_argument(
            "weights", weights, f"{len(DEFECT_CLASSES)} non-negative proportions for {DEFECT_CLASSES}",
            f"pass e.g. weights={DEFECT_WEIGHTS}",
        ))
    rng = np.random.default_rng(seed)
    counts = _class_counts(num_samples, weights)
    labels = rng.permutation(np.repeat(np.arange(len(DEFECT_CLASSES), dtype=np.int64), counts))
    xs, ys = _draw.grid(size)
    images = np.empty((num_samples, size, size, 3), dtype=np.uint8)
    for i, label in enumerate(labels):
        image = _surface(rng, size)
        kind = DEFECT_CLASSES[label]
        if kind != "clean":
            mask, shift = _DEFECT_DRAWERS[kind](rng, xs, ys, size)
            image = image + shift * _draw.coverage(mask)[..., None]
        images[i] = _draw.to_uint8(image)
    return images, labels


def _check_count(num_samples: int, size: int) -> None:
    if not isinstance(num_samples, int) or num_samples < 1:
        raise ValueError(bad_argument("num_samples", num_samples, "a positive int", "pass num_samples=100 or more"))
    if not isinstance(size, int) or size < 16:
        raise ValueError(bad_argument("size", size, "an int of at least 16", "pass size=32"))
