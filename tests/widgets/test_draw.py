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


_Y_LABEL = re.compile(r'<text x="43" y="([\d.]+)" text-anchor="end">([^<]*)</text>')
_X_LABEL = re.compile(r'<text x="([\d.]+)" y="(\d+)" text-anchor="(middle|end)">([^<]*)</text>')


def _value(label):
    """A tick label back to a number: ``150k`` is 150000, ``2.5M`` 2500000."""
    units = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
    return float(label[:-1]) * units[label[-1]] if label[-1] in units else float(label)


def test_ticks_are_round_numbers_that_cover_the_data_and_tell_each_other_apart():
    import math
    import random

    from sampan_widgets._draw import nice_ticks

    rng = random.Random(0)
    cases = [(0.1574, 0.7596), (1, 36), (0.003, 7.175), (537.8, 736.3), (12345, 98765), (1e-5, 3e-5), (-0.3, 0.25),
             (0.5, 0.5000001), (2e9, 2.2e9)]
    draw = lambda: rng.uniform(-1, 1) * 10 ** rng.uniform(-6, 10)  # noqa: E731
    cases += [tuple(sorted((draw(), draw()))) for _ in range(400)]
    for low, high in cases:
        most = rng.randint(2, 6)
        ticks, labels = nice_ticks(low, high, most=most)
        step = ticks[1] - ticks[0]
        mantissa = step / 10 ** math.floor(math.log10(step) + 1e-9)
        assert any(math.isclose(mantissa, m, rel_tol=1e-6) for m in (1, 2, 2.5, 5, 10)), (low, high, step)
        assert ticks[0] <= low and ticks[-1] >= high and len(ticks) - 1 <= most, (low, high, ticks)
        assert len(set(labels)) == len(labels), (low, high, labels)  # no two ticks read the same
        for tick, label in zip(ticks, labels):
            assert math.isclose(_value(label), tick, rel_tol=0.01, abs_tol=step / 100), (low, high, label, tick)
        if 1e-3 <= step and max(abs(ticks[0]), abs(ticks[-1])) < 1e13:
            assert max(map(len, labels)) <= 7, (low, high, labels)  # fits the 46 px left of the chart


def test_a_chart_is_labelled_with_round_numbers_that_fit_inside_it():
    # the live loss curve of a 36-step fit and a memory chart over 7.175 s: the old axes read 0.1574 / 0.4585 /
    # 0.7596 and the right-hand "7.175" ran past the picture's edge
    loss = {"label": "loss", "points": [(i, 0.7596 - (0.7596 - 0.1574) * (i - 1) / 35) for i in range(1, 37)]}
    svg = svg_lines([loss], width=340, height=200, title="loss")
    ys = [label for _, label in _Y_LABEL.findall(svg)]
    assert ys == ["0", "0.2", "0.4", "0.6", "0.8"], ys
    xs = [label for *_, label in _X_LABEL.findall(svg)]
    assert xs == ["0", "10", "20", "30", "40"], xs
    memory = {"label": "RSS", "points": [(0.003, 537.8), (3.0, 650.0), (7.175, 736.3)]}
    svg = svg_lines([memory], width=420, height=160)
    for x, _, anchor, label in _X_LABEL.findall(svg):
        right = float(x) + (_drawn_width(label) / 2 if anchor == "middle" else 0)
        assert right <= 420, (x, anchor, label)
    assert [label for _, label in _Y_LABEL.findall(svg)][::2] == ["500", "600", "700"]


def test_a_flat_line_is_drawn_across_the_middle():
    svg = svg_lines([{"label": "acc", "points": [(i, 0.5) for i in range(5)]}], width=340, height=200)
    at = {float(label): float(y) - 3 for y, label in _Y_LABEL.findall(svg)}  # tick value -> its height
    assert min(at) < 0.5 < max(at), at
    y = float(re.search(r'points="\d+ (\d+)', svg).group(1)) / 10
    assert abs(y - at[0.5]) < 1 and min(at.values()) + 40 < y < max(at.values()) - 40, (y, at)  # mid-chart


def test_a_legend_from_a_huge_run_name_is_cut_in_a_few_steps(monkeypatch):
    """A shared store's run name can be any length (SQLite does not hold MLflow to 250 characters); cutting it a
    character at a time, measuring the whole rest each time, took 25 s for 12,000 characters in the kernel."""
    from sampan_widgets import _draw

    calls = []
    measure = _draw.text_width
    monkeypatch.setattr(_draw, "text_width", lambda text: calls.append(len(text)) or measure(text))
    legends = _legends(svg_lines([{"label": "x" * 20_000, "points": [(1, 1), (2, 2)]}], width=420, height=200))
    assert legends[0][2].endswith("…") and _drawn_width(legends[0][2]) <= 420
    assert len(calls) < 20 and max(calls[1:]) < 100, (len(calls), max(calls))
