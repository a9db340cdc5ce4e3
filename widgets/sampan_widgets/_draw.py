"""Pictures without pyplot: matplotlib ``Figure`` objects on the Agg canvas (no global figure to leak), and
small SVG line charts for live views (cheap enough to redraw a few times a second)."""
from __future__ import annotations

import html
import io
import math
import unicodedata
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


def _cjk_labels() -> None:
    """Chinese labels draw with an installed CJK font (:func:`sampan.utils.fonts.use_cjk_font`), put back among
    matplotlib's font fallbacks before every figure: ``plt.style.use``, ``rcdefaults`` or the end of an
    ``rc_context`` that was open at the first figure drop it. The font is looked up once per process."""
    from sampan.utils.fonts import use_cjk_font

    use_cjk_font(warn=False)


def literal(text: object) -> str:
    """``text`` for a matplotlib label, drawn as typed: a run name such as ``cost $5 vs $10`` is not mathtext."""
    return str(text).replace("$", r"\$")


def to_png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _thin(points: Sequence[tuple[float, float]], limit: int) -> Sequence[tuple[float, float]]:
    if len(points) <= limit:
        return points
    stride = math.ceil(len(points) / limit)
    return list(points[::stride]) + ([points[-1]] if (len(points) - 1) % stride else [])


def nice_ticks(low: float, high: float, most: int = 5) -> tuple[list[float], list[str]]:
    """Round-number ticks covering ``[low, high]`` (``low < high``): at most ``most`` steps of 1, 2, 2.5 or 5 times
    a power of ten, the first at or below ``low`` and the last at or above ``high``, with short labels that tell
    every tick apart (``0.25`` not ``0.2500``; ``150k`` not ``1.50e+05``; ``1.5e-05``)."""
    raw = (high - low) / max(most, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    for mult in (1, 2, 2.5, 5, 10, 20, 25, 50, 100):  # a range that straddles round numbers may need a bigger power
        step = mult * power
        first, last = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
        if last - first <= most:
            break
    ticks = [k * step for k in range(first, last + 1)]  # k * step, not repeated sums: 0.1 * 3 stays "0.3"
    labels = _tick_labels(ticks, step, extra=1 if mult in (2.5, 25) else 0)
    ticks[0], ticks[-1] = min(ticks[0], low), max(ticks[-1], high)  # 3 * 1e-05 is 2.9999999999999997e-05
    return ticks, labels


def _tick_labels(ticks: list[float], step: float, extra: int) -> list[str]:
    """Labels for evenly spaced ticks: as many digits as ``step`` needs (``extra`` more for steps of 2.5)."""
    biggest = max(abs(ticks[0]), abs(ticks[-1]))
    if biggest >= 1e5:  # 150k, 2.5M: a y label has ~7 characters of room
        unit, suffix = next((u, x) for u, x in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")) if biggest >= u)
        decimals = max(0, -math.floor(math.log10(step / unit) + 1e-9) + extra)
        return [f"{t / unit:.{decimals}f}{suffix}" if t else "0" for t in ticks]
    decimals = max(0, -math.floor(math.log10(step) + 1e-9) + extra)
    if decimals <= 4:
        return [f"{t:.{decimals}f}" if t else "0" for t in ticks]
    digits = min(8, math.floor(math.log10(biggest)) - math.floor(math.log10(step) + 1e-9) + 1 + extra)
    return [f"{t:.{max(digits, 1)}g}" if t else "0" for t in ticks]


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
    legends = _legend_layout([str(s.get("label", "")) if len(a) else None for s, a in zip(series, arrays)],
                             left=pad_l + 4, right=width - pad_r)
    lines = max((row for _, row, _ in legends if row is not None), default=0) + 1
    total = height + (lines - 1) * _LEGEND_LINE
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{total}" '
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
    if x1 <= x0:
        x1 = x0 + 1
    if y1 <= y0:  # a flat line, drawn across the middle
        y0, y1 = y0 - (abs(y0) * 0.1 or 1.0), y1 + (abs(y1) * 0.1 or 1.0)
    iw, ih = width - pad_l - pad_r, height - pad_t - pad_b
    # the axes run from round number to round number, labelled at each (a person reads 0.2 0.4 0.6, not 0.4585)
    y_ticks, y_labels = nice_ticks(y0, y1, most=max(2, min(5, ih // 24)))
    x_ticks, x_labels = nice_ticks(x0, x1, most=max(2, min(6, iw // 55)))
    (x0, x1), (y0, y1) = (x_ticks[0], x_ticks[-1]), (y_ticks[0], y_ticks[-1])
    scale = np.array([iw / (x1 - x0), -ih / (y1 - y0)])
    offset = np.array([pad_l - x0 * scale[0], pad_t + ih - y0 * scale[1]])
    out.append(f'<rect x="{pad_l}" y="{pad_t}" width="{iw}" height="{ih}" fill="none" stroke="#ccc"/>')
    for y, label in zip(y_ticks, y_labels):
        at = pad_t + ih - (y - y0) / (y1 - y0) * ih
        if y0 < y < y1:
            out.append(f'<line x1="{pad_l}" x2="{pad_l + iw}" y1="{at:.1f}" y2="{at:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{pad_l - 3}" y="{at + 3:.1f}" text-anchor="end">{label}</text>')
    for x, label in zip(x_ticks, x_labels):
        at = pad_l + (x - x0) / (x1 - x0) * iw
        # the last label ends at the right edge, so that it stays inside the picture
        anchor = "end" if at + text_width(label) / 2 > width else "middle"
        out.append(f'<text x="{at:.1f}" y="{pad_t + ih + 12}" text-anchor="{anchor}">{label}</text>')
    for i, (s, a, (x, row, label)) in enumerate(zip(series, arrays, legends)):
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
        out.append(f'<text x="{x:g}" y="{height - 4 + row * _LEGEND_LINE}" fill="{color}">{html.escape(label)}</text>')
    return "".join(out) + "</svg>"


_LEGEND_LINE = 12  # pixels between legend lines
_NARROW, _WIDE, _GAP = 6.5, 11, 12  # a 10px sans-serif character's width, a CJK one's, the space between entries


def text_width(text: str) -> float:
    """About how wide ``text`` (as shown, not HTML-escaped) draws at 10px: CJK and other wide characters ~twice."""
    return sum(_WIDE if unicodedata.east_asian_width(c) in "WF" else _NARROW for c in text)


def _fit(text: str, room: float) -> str:
    """``text``, cut with an ellipsis to what fits in ``room`` pixels."""
    if text_width(text) <= room:
        return text
    text = text[: int(room // _NARROW) + 1]  # no wider character is narrower: the loop below stays short
    while text and text_width(text + "…") > room:
        text = text[:-1]
    return text + "…"


def _legend_layout(labels: Sequence[str | None], *, left: float, right: float) -> list[tuple[float, int | None, str]]:
    """Where each legend entry goes: ``(x, line, text)``, wrapping onto a new line when the next would run past
    ``right``; a label wider than a whole line is cut. ``None`` labels (series without points) take no room."""
    out: list[tuple[float, int | None, str]] = []
    x, row = left, 0
    for label in labels:
        if label is None:
            out.append((x, None, ""))
            continue
        text = _fit(label, right - left)
        w = text_width(text)
        if x > left and x + w > right:
            x, row = left, row + 1
        out.append((x, row, text))
        x += w + _GAP
    return out


def human_bytes(n: float | None) -> str:
    if n is None:
        return "–"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
