"""Pictures without pyplot: matplotlib ``Figure`` objects on the Agg canvas (no global figure to leak), and
small SVG line charts for live views (cheap enough to redraw a few times a second)."""
from __future__ import annotations

import html
import io
import math
from typing import Sequence

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def new_figure(width: float = 6.4, height: float = 3.0, dpi: int = 100):
    """A matplotlib Figure bound to an Agg canvas; garbage-collected like any object (pyplot never sees it)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


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
    """An inline SVG line chart.

    Args:
        series: dicts with ``label``, ``points`` ``[(x, y), ...]``, optional ``color``, ``dash`` (bool),
            ``marker`` (bool, draw dots) and ``opacity``.
    """
    pad_l, pad_r, pad_t, pad_b = 46, 8, 18 if title else 6, 28
    # thin first, so a redraw costs the same after 100 steps or 100,000
    thinned = [[p for p in _thin(s["points"], max_points) if math.isfinite(p[1])] for s in series]
    pts = [p for good in thinned for p in good]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'style="font:10px sans-serif;background:#fff">']
    if title:
        out.append(f'<text x="{width / 2}" y="12" text-anchor="middle" font-weight="bold">{html.escape(title)}</text>')
    if not pts:
        out.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="#888">waiting for data</text>')
        return "".join(out) + "</svg>"
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    x1, y1 = (x1 if x1 > x0 else x0 + 1), (y1 if y1 > y0 else y0 + abs(y0) * 0.1 + 1e-9)
    iw, ih = width - pad_l - pad_r, height - pad_t - pad_b
    sx = lambda x: pad_l + (x - x0) / (x1 - x0) * iw  # noqa: E731
    sy = lambda y: pad_t + ih - (y - y0) / (y1 - y0) * ih  # noqa: E731
    out.append(f'<rect x="{pad_l}" y="{pad_t}" width="{iw}" height="{ih}" fill="none" stroke="#ccc"/>')
    for y in (y0, (y0 + y1) / 2, y1):
        out.append(f'<text x="{pad_l - 3}" y="{sy(y) + 3:.1f}" text-anchor="end">{_fmt(y)}</text>')
    for x in (x0, x1):
        out.append(f'<text x="{sx(x):.1f}" y="{pad_t + ih + 12}" text-anchor="middle">{_fmt(x)}</text>')
    legend_x = pad_l + 4
    for i, (s, good) in enumerate(zip(series, thinned)):
        color = s.get("color") or COLORS[i % len(COLORS)]
        if not good:
            continue
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in good)
        dash = ' stroke-dasharray="4 3"' if s.get("dash") else ""
        op = s.get("opacity", 1.0)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" stroke-opacity="{op}"{dash} '
                   f'points="{path}"/>')
        if s.get("marker"):
            out.extend(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5" fill="{color}"/>' for x, y in good)
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
