"""Numpy drawing primitives for the synthetic image sets.

Only ``+ - * /``, comparisons and ``math`` on scalars touch pixel values, so a
drawing is bit-identical on every machine (no SIMD transcendental functions),
which is what lets the catalog cards hold a checksum of the generated data.
"""
from __future__ import annotations

import math

import numpy as np

SUPERSAMPLE = 2


def grid(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Pixel-centre coordinates of a ``size`` x ``size`` image, supersampled ``SUPERSAMPLE`` times."""
    n = size * SUPERSAMPLE
    coords = (np.arange(n, dtype=np.float64) + 0.5) / SUPERSAMPLE
    ys, xs = np.meshgrid(coords, coords, indexing="ij")
    return xs, ys


def coverage(mask: np.ndarray) -> np.ndarray:
    """Averages a supersampled boolean mask down to per-pixel coverage in [0, 1]."""
    n = mask.shape[0] // SUPERSAMPLE
    return mask.reshape(n, SUPERSAMPLE, n, SUPERSAMPLE).mean(axis=(1, 3))


def regular_polygon(cx: float, cy: float, radius: float, sides: int, angle: float) -> list[tuple[float, float]]:
    """Vertices of a regular polygon (scalar trigonometry from ``math``)."""
    return [
        (cx + radius * math.cos(angle + 2 * math.pi * k / sides), cy + radius * math.sin(angle + 2 * math.pi * k / sides))
        for k in range(sides)
    ]


def star_polygon(cx: float, cy: float, radius: float, points: int, angle: float, inner: float = 0.45) -> list:
    verts = []
    for k in range(2 * points):
        r = radius if k % 2 == 0 else radius * inner
        a = angle + math.pi * k / points
        verts.append((cx + r * math.cos(a), cy + r * math.sin(a)))
    return verts


def polygon_mask(xs: np.ndarray, ys: np.ndarray, verts: list[tuple[float, float]]) -> np.ndarray:
    """Even-odd rule point-in-polygon test, vectorised over the grid."""
    inside = np.zeros(xs.shape, dtype=bool)
    for (x1, y1), (x2, y2) in zip(verts, verts[1:] + verts[:1]):
        if y1 == y2:
            continue
        crosses = (ys >= min(y1, y2)) & (ys < max(y1, y2))
        x_at = x1 + (ys - y1) * ((x2 - x1) / (y2 - y1))
        inside ^= crosses & (xs < x_at)
    return inside


def segment_distance2(xs: np.ndarray, ys: np.ndarray, p: tuple[float, float], q: tuple[float, float]) -> np.ndarray:
    """Squared distance from every grid point to the segment ``p``-``q``."""
    dx, dy = q[0] - p[0], q[1] - p[1]
    length2 = dx * dx + dy * dy or 1e-12
    t = np.clip(((xs - p[0]) * dx + (ys - p[1]) * dy) / length2, 0.0, 1.0)
    ex, ey = xs - (p[0] + t * dx), ys - (p[1] + t * dy)
    return ex * ex + ey * ey


def blend(background: np.ndarray, colour: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """``background * (1 - alpha) + colour * alpha`` for an HxWx3 float image and HxW alpha."""
    a = alpha[..., None]
    return background * (1.0 - a) + colour[None, None, :] * a


def to_uint8(image: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)
