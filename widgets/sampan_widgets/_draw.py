"""Pictures without pyplot: matplotlib ``Figure`` objects on the Agg canvas (no global figure to leak), and
small SVG line charts for live views (cheap enough to redraw a few times a second)."""
from __future__ import annotations

import html
import io
import math
from typing import Sequence

import numpy as np

from sampan_widgets._i18n import tr

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def new_figure(width: float = 6.4, height: float = 3.0, dpi: int = 100):
    """A matplotlib Figure bound to an Agg canvas; garbage-collected like any object (pyplot never sees it)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    _cjk_labels()
    fig = Figure(figsize=(width, height), dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _cjk_labels(done: list[bool] = []) -> None:  # noqa: B006 (once per process)
    """Chinese labels draw with an installed CJK font (sampan.utils.fonts), checked once per process."""
    if not done:
        from sampan.utils.fonts import use_cjk_font

        use_cjk_font(warn=False)
        done.append(True)


def to_png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _thin(points: Sequence[tuple[float, float]], limit: int) -> Sequence[tuple[float, float]]:
    if len(points) <= limit:
        return points
    stride = math.ceil(len(points) / limit)
    return list(points[::stride]) + ([points[-1]] if (len(points) - 1) % stride else [])


def _fmt(v: float) -> str:
    if v == 0 or 1e-3 <= abs(v) < 1e5:
        return f"{v:.4g}"
    return f"{v:.2e}"


def svg_lines(series: Sequence[dict], *, width: int = 320, height: int = 160, title: str = "",
              max_points: int = 200) -> str:
    """An inline SVG line chart; each series is thinned to ``max_points`` first and scaled with numpy, so a
    redraw costs about the same after a hundred steps or a hundred thousand.

    Args:
        series: dicts with ``label``, ``points`` ``[(x, y), ...]``, optional ``color``, ``dash`` (bool),
            ``marker`` (bool, draw dots) and ``opacity``.
    """
    pad_l, pad_r, pad_t, pad_b = 46, 8, 18 if title else 6, 28
    arrays = []
    for s in series:
        a = np.asarray(_thin(s["points"], max_points), dtype=np.float64).reshape(-1, 2)
        arrays.append(a[np.isfinite(a).all(axis=1)])
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'style="font:10px sans-serif;background:#fff">']
    if title:
        out.append(f'<text x="{width / 2}" y="12" text-anchor="middle" font-weight="bold">{html.escape(title)}</text>')
    if not any(len(a) for a in arrays):
        waiting = html.escape(tr("waiting for data"))
        out.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="#888">{waiting}</text>')
        return "".join(out) + "</svg>"
    every = np.concatenate([a for a in arrays if len(a)])
    x0, y0 = every.min(axis=0)
    x1, y1 = every.max(axis=0)
    x1, y1 = (x1 if x1 > x0 else x0 + 1), (y1 if y1 > y0 else y0 + abs(y0) * 0.1 + 1e-9)
    iw, ih = width - pad_l - pad_r, height - pad_t - pad_b
    scale = np.array([iw / (x1 - x0), -ih / (y1 - y0)])
    offset = np.array([pad_l - x0 * scale[0], pad_t + ih - y0 * scale[1]])
    sy = lambda y: pad_t + ih - (y - y0) / (y1 - y0) * ih  # noqa: E731
    out.append(f'<rect x="{pad_l}" y="{pad_t}" width="{iw}" height="{ih}" fill="none" stroke="#ccc"/>')
    for y in (y0, (y0 + y1) / 2, y1):
        out.append(f'<text x="{pad_l - 3}" y="{sy(y) + 3:.1f}" text-anchor="end">{_fmt(y)}</text>')
    for x, anchor in ((x0, pad_l), (x1, pad_l + iw)):
        out.append(f'<text x="{anchor}" y="{pad_t + ih + 12}" text-anchor="middle">{_fmt(x)}</text>')
    legend_x = pad_l + 4
    for i, (s, a) in enumerate(zip(series, arrays)):
        color = s.get("color") or COLORS[i % len(COLORS)]
        if not len(a):
            continue
        # tenths of a pixel as ints (formatting ints is 6x faster than floats), drawn at scale(0.1)
        tenths = np.rint((a * scale + offset) * 10).astype(np.int64)
        path = " ".join(map(str, tenths.ravel().tolist()))
        dash = ' stroke-dasharray="40 30"' if s.get("dash") else ""
        op = s.get("opacity", 1.0)
        out.append(f'<polyline transform="scale(0.1)" fill="none" stroke="{color}" stroke-width="15" '
                   f'stroke-opacity="{op}"{dash} points="{path}"/>')
        if s.get("marker"):
            out.extend(f'<circle cx="{x / 10}" cy="{y / 10}" r="2.5" fill="{color}"/>' for x, y in tenths.tolist())
        label = html.escape(str(s.get("label", "")))
        out.append(f'<text x="{legend_x}" y="{height - 4}" fill="{color}">{label}</text>')
        legend_x += 7 * len(label) + 12
    return "".join(out) + "</svg>"


def human_bytes(n: float | None) -> str:
    if n is None:
        return "–"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
