"""The SVG line charts of the live views: legends stay inside the picture."""
from __future__ import annotations

import html
import re
import unicodedata

from sampan_widgets._draw import svg_lines

_LEGEND = re.compile(r'<text x="([\d.]+)" y="(\d+)" fill="[^"]+">([^<]*)</text>')


def _drawn_width(text):
    """A generous width of ``text`` at 10px sans-serif: 5.5 px a Latin character, 10 px a CJK one."""
    return sum(10 if unicodedata.east_asian_width(c) in "WF" else 5.5 for c in text)


def _legends(svg):
    return [(float(x), int(y), html.unescape(label)) for x, y, label in _LEGEND.findall(svg)]


def test_long_legends_wrap_onto_new_lines_inside_the_picture():
    names = ["sweep-lr-0.001-batch-64-adamw-cosine-warmup", "baseline", "lr-0.1", "学习率扫描-余弦退火-预热-第三次试验",
             "x" * 200]
    series = [{"label": name, "points": [(1, 0.5 + i / 10), (2, 0.6 + i / 10)]} for i, name in enumerate(names)]
    svg = svg_lines(series, width=420, height=240)
    legends = _legends(svg)
    assert len(legends) == len(names)
    assert all(x + _drawn_width(label) <= 420 for x, _, label in legends), legends  # nothing runs off the right
    rows = sorted({y for _, y, _ in legends})
    assert len(rows) >= 2 and rows[0] == 236  # the first line where it always was, the others below it
    height = int(re.search(r'<svg [^>]*height="(\d+)"', svg).group(1))
    assert height == 240 + 12 * (len(rows) - 1) and rows[-1] < height  # the picture grows to hold them
    assert legends[-1][2].endswith("…")  # a label wider than a whole line is cut, not drawn past the edge


def test_a_legend_is_measured_as_shown_not_as_escaped():
    series = [{"label": "&" * 30, "points": [(1, 1), (2, 2)]}, {"label": "b", "points": [(1, 2), (2, 1)]}]
    legends = _legends(svg_lines(series, width=420, height=200))
    assert [label for *_, label in legends] == ["&" * 30, "b"]
    (x0, y0, _), (x1, y1, _) = legends
    assert y0 == y1 == 196 and x1 < 300  # "&amp;" counts as one character: "b" follows on the same line
