"""``RunCompare``: recorded runs side by side — a table with the differing parameters highlighted,
overlaid curves of any metric, and parallel coordinates from parameters to a metric, linked to the
selection. Everything goes through the kernel (no tracking-server port), so it works behind JupyterHub's
proxy and in Voilà; a saved or papermill-executed notebook keeps a picture of it."""
from __future__ import annotations

import html
import math
import threading
import warnings
from typing import Any, Callable, Sequence

import ipywidgets as W

from sampan.errors import bad_argument, first_line
from sampan.experiments import compare
from sampan.experiments.store import StoreError
from sampan_widgets._base import Drawn, Panel, check_number, check_size, in_kernel, png_bundle
from sampan_widgets._draw import COLORS, literal, new_figure, svg_lines, to_png
from sampan_widgets._i18n import tr

_HIGHLIGHT = "#fff3c4"
_TABLE_CSS = ("<style>.sampan-compare-table td,.sampan-compare-table th{padding:2px 8px;white-space:nowrap}"
              ".sampan-compare-table td{border-top:1px solid #eee}</style>")


def _num(text: Any) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return html.escape("" if value is None else str(value))


def _check_arguments(filter_string: Any, metric: Any, select: Any, max_runs: Any, refresh_s: Any, width: Any,
                     height: Any) -> None:
    """RunCompare's arguments, each refused with a message naming it before anything is drawn."""
    from sampan.errors import check_int

    if not isinstance(filter_string, str):
        raise ValueError(bad_argument("filter_string", filter_string, "a string in MLflow's search syntax",
                                      "pass e.g. \"metrics.eval_acc > 0.9\", or \"\" for every run"))
    if metric is not None and not isinstance(metric, str):
        raise ValueError(bad_argument("metric", metric, "a metric name, or None for the first one the runs logged",
                                      "pass metric=\"eval_acc\""))
    check_int("select", select, fix="pass select=5 (runs selected at first)")
    check_int("max_runs", max_runs, fix="pass max_runs=200")
    check_number("refresh_s", refresh_s, fix="pass refresh_s=2.0 (seconds between refreshes)")
    check_size("width", width, 420)
    check_size("height", height, 240)


class RunCompare(Drawn):
    """Compare recorded runs in a notebook or a Voilà dashboard.

    Args:
        filter_string: MLflow search filter, e.g. ``"tags.`sampan.lesson` = 'experiments'"``.
        metric: the metric to overlay and to end the parallel coordinates (default: ``eval_acc`` if logged).
        select: how many of the newest runs are selected at first.
        max_runs: runs loaded into the list.
        sweep: a ``sampan.experiments.sweep`` handle: the view refreshes every ``refresh_s`` until it ends.
        refresh_s: seconds between refreshes while a sweep runs.

    Example:
        >>> view = RunCompare("tags.`sampan.kind` = 'fit'", metric="eval_acc")  # doctest: +SKIP
        >>> view.select(view.runs[:3])  # doctest: +SKIP
    """

    def __init__(self, filter_string: str = "", *, metric: str | None = None, select: int = 5, max_runs: int = 200,
                 sweep: Any = None, refresh_s: float = 2.0, width: int = 420, height: int = 240) -> None:
        _check_arguments(filter_string, metric, select, max_runs, refresh_s, width, height)
        self.filter_string, self.max_runs, self.width, self.height = filter_string, max_runs, width, height
        self.error: str | None = None  # why the last refresh failed (the runs before it are kept)
        self.error_source: str | None = None  # "filter" (MLflow cannot search it) or "store" (cannot be opened)
        self.picture_error: str | None = None  # why the static picture could not be drawn (the widget still shows)
        self._on_refresh: list[Callable[["RunCompare"], Any]] = []
        self.runs: list[compare.RunRow] = []
        self.selected: list[str] = []
        self._curves: dict[tuple[str, str], list] = {}
        self._filter = W.Text(value=filter_string, placeholder=tr("MLflow filter, e.g. params.optimizer = 'Adam'"),
                              description=tr("filter"), continuous_update=False, layout=W.Layout(width="60%"))
        self._metric = W.Dropdown(description=tr("metric"), options=[metric] if metric else [], value=metric)
        self._refresh_button = W.Button(description=tr("refresh"), icon="refresh")
        self._list = W.SelectMultiple(description=tr("runs"), rows=8, layout=W.Layout(width="98%"))
        self._table = W.HTML()
        self._curves_view = W.HTML()
        self._parallel = W.HTML()
        self._panel = Panel([W.HBox([self._filter, self._metric, self._refresh_button]), self._list, self._table,
                             W.HBox([self._curves_view, self._parallel])], on_close=self._stop)
        self._panel.add_class("sampan-run-compare")
        self._list.add_class("sampan-run-list")
        self._handle = None
        self._stop_event = threading.Event()
        self._refresh_button.on_click(lambda _: self.refresh())
        self._filter.observe(lambda _: self.refresh(), names="value")
        self.refresh(select=select, metric=metric)
        self._list.observe(lambda change: self.select(list(change["new"])), names="value")
        self._metric.observe(lambda change: self.redraw(), names="value")
        if sweep is not None:
            threading.Thread(target=self._follow, args=(sweep, refresh_s), daemon=True,
                             name="sampan-run-compare").start()

    # ------------------------------------------------------------------ data
    def refresh(self, *, select: int | None = None, metric: str | None = None) -> None:
        """Reloads the runs from the store (keeping the selection where it still exists).

        A filter MLflow cannot search, or a tracking store that cannot be opened (a bad ``$SAMPAN_TRACKING_URI``,
        a folder that cannot be written), is shown above the table (and kept in ``error``); the runs stay as they
        were. The callbacks given to :meth:`on_refresh` run after every refresh, failed or not.
        """
        try:
            self._reload(select, metric)
        finally:
            for callback in list(self._on_refresh):
                callback(self)

    def on_refresh(self, callback: Callable[["RunCompare"], Any]) -> None:
        """Calls ``callback(view)`` after every refresh (a button press, a new filter, a sweep's tick), e.g. to
        keep a headline's run count up to date."""
        self._on_refresh.append(callback)

    def _reload(self, select: int | None, metric: str | None) -> None:
        from mlflow.exceptions import MlflowException

        self.filter_string = self._filter.value
        try:
            self.runs = compare.list_runs(self.filter_string, max_results=self.max_runs)
        except (MlflowException, StoreError, OSError) as exc:
            self.error = first_line(exc)
            self.error_source = "filter" if isinstance(exc, MlflowException) else "store"
            self.redraw()
            return
        self.error = self.error_source = None
        ids = {r.run_id for r in self.runs}
        keep = [i for i in self.selected if i in ids]
        if select is not None or not keep:
            keep = [r.run_id for r in self.runs[: select or 5]]
        names = compare.metric_names(self.runs)
        default = next((n for n in ("eval_acc", "acc", "loss") if n in names), names[0] if names else None)
        if metric and names and metric not in names:
            warnings.warn(bad_argument("metric", metric, f"a metric the runs logged ({', '.join(names)})",
                                       f"pass one of those; the view shows {default!r} meanwhile"), stacklevel=3)
            metric = default
        wanted = metric or self._metric.value or default
        with self._panel.hold_sync():
            self._metric.options = names or ([wanted] if wanted else [])
            self._metric.value = wanted if wanted in (names or [wanted]) else None
            self._list.options = [(self._label(r), r.run_id) for r in self.runs]
        self._curves.clear()
        self.select(keep)

    def _label(self, r: compare.RunRow) -> str:
        metric = self._metric.value
        value = r.metrics.get(metric) if metric else None
        extra = f"  {metric}={value:.4g}" if value is not None else ""
        return f"{r.name}  [{r.status.lower()}]{extra}"

    def select(self, run_ids: Sequence[Any]) -> None:
        """Selects runs (ids or ``RunRow``) and redraws."""
        self.selected = [getattr(r, "run_id", r) for r in run_ids]
        if tuple(self._list.value) != tuple(self.selected):
            self._list.value = tuple(i for i in self.selected if i in {r.run_id for r in self.runs})
        self.redraw()

    def _rows(self) -> list[compare.RunRow]:
        by_id = {r.run_id: r for r in self.runs}
        return [by_id[i] for i in self.selected if i in by_id]

    def curves(self, metric: str | None = None) -> dict[str, list[tuple[int, float]]]:
        """The selected runs' histories of ``metric`` (cached until the next refresh)."""
        metric = metric or self._metric.value
        missing = [i for i in self.selected if (i, metric) not in self._curves]
        if metric and missing:
            for run_id, points in compare.histories(missing, metric).items():
                self._curves[(run_id, metric)] = points
        return {i: self._curves.get((i, metric), []) for i in self.selected}

    # ------------------------------------------------------------------ drawing
    def redraw(self) -> None:
        rows, metric = self._rows(), self._metric.value
        with self._panel.hold_sync():
            self._table.value = self._error_html() + self.table_html(rows)
            self._curves_view.value = self.curves_svg(rows, metric)
            self._parallel.value = self.parallel_svg(metric)

    def _error_html(self) -> str:
        if not self.error:
            return ""
        if self.error_source == "store":
            return (f'<div class="sampan-store-error" style="color:#b00">{html.escape(tr("tracking store"))}: '
                    f'{html.escape(self.error)}</div>')
        return (f'<div class="sampan-filter-error" style="color:#b00">{html.escape(tr("filter"))} '
                f'<code>{html.escape(self.filter_string)}</code>: {html.escape(self.error)}</div>')

    def table_html(self, rows: Sequence[compare.RunRow]) -> str:
        """The compare table: the parameters that differ (on a yellow background), then the final metrics (blue
        headers), then the parameters that are the same in every selected run, in grey; what tells the runs apart
        is on screen without scrolling."""
        if not rows:
            return f"<i>{html.escape(tr('no run selected'))}</i>"
        t = compare.compare_table(rows)
        differ = set(t["differing"])
        n = len(t["params"])
        params = list(zip(t["params"], range(2, 2 + n)))
        columns = ([(p, i, f"background:{_HIGHLIGHT}", f' style="background:{_HIGHLIGHT}"') for p, i in params
                    if p in differ]
                   + [(m, 2 + n + j, "background:#e8f0fe", "") for j, m in enumerate(t["metrics"])]
                   + [(p, i, "background:#f4f4f4;color:#777;font-weight:normal", ' style="color:#777"')
                      for p, i in params if p not in differ])
        head = "".join(f'<th style="{style}">{html.escape(name)}</th>' for name, _, style, _ in columns)
        body = []
        for k, cells in enumerate(t["rows"]):
            color = COLORS[k % len(COLORS)]
            tds = [f'<td style="color:{color};font-weight:bold;white-space:nowrap">{_cell(cells[0])}</td>'
                   f"<td>{_cell(cells[1])}</td>"]
            tds.extend(f"<td{td_style}>{_cell(cells[i])}</td>" for _, i, _, td_style in columns)
            body.append(f'<tr class="sampan-run-row">{"".join(tds)}</tr>')
        note = (tr("{differ} of {total} parameters differ").format(differ=len(differ), total=n)
                if t["params"] else tr("no parameters"))
        return (f'<div style="overflow-x:auto">{_TABLE_CSS}'
                f'<div style="font-size:90%;color:#555">{html.escape(note)}</div>'
                f'<table class="sampan-compare-table" style="border-collapse:collapse;font-size:85%">'
                f'<tr><th>{html.escape(tr("run"))}</th><th>{html.escape(tr("status"))}</th>{head}</tr>'
                f'{"".join(body)}</table></div>')

    def curves_svg(self, rows: Sequence[compare.RunRow], metric: str | None) -> str:
        if not metric:
            return f"<i>{html.escape(tr('no metric logged yet'))}</i>"
        curves = self.curves(metric)
        series = [{"label": r.name, "points": curves.get(r.run_id, []), "color": COLORS[i % len(COLORS)],
                   "marker": len(curves.get(r.run_id, [])) <= 30} for i, r in enumerate(rows)]
        return svg_lines(series, width=self.width, height=self.height,
                         title=tr("{metric} by step").format(metric=metric))

    def parallel_svg(self, metric: str | None) -> str:
        """Parallel coordinates: one axis per differing parameter, then the metric; the selection in color. Each axis
        is labelled with its values: a number axis with its lowest and highest value (``log`` when it spans more
        than 50x), a category axis with each category."""
        axes = compare.differing_params(self.runs)[:8] + ([metric] if metric else [])
        if len(axes) < 2 or not self.runs:
            return ""
        w, h, pad = self.width, self.height, 24
        columns, ticks = [], []
        for name in axes:
            values = [r.metrics.get(name) if name == metric else r.params.get(name) for r in self.runs]
            nums = [_num(v) for v in values]
            if all(n is not None for n in nums if n is not None) and any(n is not None for n in nums) and \
                    all((v is None) == (n is None) for v, n in zip(values, nums)):
                lo, hi = min(n for n in nums if n is not None), max(n for n in nums if n is not None)
                log = name != metric and lo > 0 and hi / lo > 50
                f = (lambda x, lo=lo, hi=hi, log=log: 0.5 if hi == lo else
                     ((math.log(x) - math.log(lo)) / (math.log(hi) - math.log(lo)) if log else (x - lo) / (hi - lo)))
                columns.append([None if n is None else f(n) for n in nums])
                ticks.append([(0.5, f"{lo:.3g}")] if hi == lo else
                             [(0.0, f"{lo:.3g}"), (1.0, f"{hi:.3g}" + (" (log)" if log else ""))])
            else:
                levels = sorted({str(v) for v in values if v is not None})
                columns.append([None if v is None else (levels.index(str(v)) + 0.5) / len(levels) for v in values])
                ticks.append([((j + 0.5) / len(levels), level[:12]) for j, level in enumerate(levels)])
        xs = [pad + i * (w - 2 * pad) / (len(axes) - 1) for i in range(len(axes))]
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" style="font:10px sans-serif;'
               f'background:#fff"><text x="{w / 2}" y="12" text-anchor="middle" font-weight="bold">'
               f'{html.escape(tr("parameters"))} → {html.escape(metric or "")}</text>']
        selected = {rid: i for i, rid in enumerate(self.selected)}
        order = sorted(range(len(self.runs)), key=lambda k: self.runs[k].run_id in selected)
        for k in order:
            pts = [(x, col[k]) for x, col in zip(xs, columns) if col[k] is not None]
            if len(pts) < 2:
                continue
            i = selected.get(self.runs[k].run_id)
            color, width, op = (COLORS[i % len(COLORS)], 2, 0.95) if i is not None else ("#bbb", 1, 0.5)
            path = " ".join(f"{x:.1f},{h - pad - y * (h - 2 * pad - 10):.1f}" for x, y in pts)
            out.append(f'<polyline fill="none" stroke="{color}" stroke-width="{width}" stroke-opacity="{op}" '
                       f'points="{path}"/>')
        for i, (x, name, marks) in enumerate(zip(xs, axes, ticks)):
            out.append(f'<line x1="{x}" y1="{pad}" x2="{x}" y2="{h - pad}" stroke="#444"/>'
                       f'<text x="{x}" y="{h - 6}" text-anchor="middle">{html.escape(name[:14])}</text>')
            last = i == len(axes) - 1  # its values go left of the axis, inside the picture
            for y, text in marks:
                out.append(f'<text class="tick" x="{x - 4 if last else x + 4}" '
                           f'y="{h - pad - y * (h - 2 * pad - 10) + 3:.1f}" text-anchor="{"end" if last else "start"}" '
                           f'fill="#444" font-size="9" stroke="#fff" stroke-width="3" paint-order="stroke">'  # legible over lines
                           f'{html.escape(text)}</text>')
        return "".join(out) + "</svg>"

    # ------------------------------------------------------------------ static picture
    def figure(self):
        """Curves and the compare table's key columns as a matplotlib Figure (for saved notebooks).

        Every text is drawn as typed (``literal``): a run name or a value with ``$`` signs is not mathtext.
        """
        rows, metric = self._rows(), self._metric.value
        fig = new_figure(9.0, 3.2)
        ax_curve, ax_table = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.1, 1]})
        for i, (r, points) in enumerate(zip(rows, self.curves(metric).values() if metric else [])):
            if points:
                ax_curve.plot(*zip(*points), marker="o", markersize=3, color=COLORS[i % len(COLORS)],
                              label=literal(r.name))
        ax_curve.set_title(literal(metric) if metric else tr("no metric"))
        ax_curve.set_xlabel(tr("step"))
        ax_curve.grid(alpha=0.3)
        if rows:
            ax_curve.legend(fontsize=7)
        t = compare.compare_table(rows, [metric] if metric else [])
        cols = t["differing"][:4] + t["metrics"]
        cells = [[literal(row[0][:18]), *(literal(str(row[2 + t["params"].index(c)])[:10]) if c in t["params"] else
                                          _cell(row[-1]) for c in cols)] for row in t["rows"]]
        ax_table.axis("off")
        if cells:
            table = ax_table.table(cellText=cells, colLabels=[tr("run"), *map(literal, cols)], loc="center",
                                   fontsize=7)
            for j, c in enumerate(cols, start=1):
                if c in t["differing"]:
                    for i in range(len(cells) + 1):
                        table[i, j].set_facecolor(_HIGHLIGHT)
        return fig

    def _ipython_display_(self) -> None:
        from IPython.display import display

        bundle = self._panel._repr_mimebundle_()
        if in_kernel():  # frontends with the widget show it; a saved notebook shows the picture
            bundle = {**bundle, **self._picture()}
        self._handle = display(bundle, raw=True, display_id=True)

    def _picture(self) -> dict:
        """The static picture's PNG bundle, or ``{}`` (and the reason in ``picture_error``) when it cannot be
        drawn: the picture is for saved notebooks, and must never keep the live widget from showing."""
        try:
            bundle = png_bundle(to_png(self.figure()))
        except Exception as exc:  # noqa: BLE001 - any drawing failure: show the widget without its picture
            self.picture_error = f"{type(exc).__name__}: {first_line(exc)}"
            return {}
        self.picture_error = None
        return bundle

    # ------------------------------------------------------------------ following a sweep
    def _follow(self, sweep: Any, every: float) -> None:
        while not self._stop_event.wait(every):
            done = sweep.done
            try:
                self.refresh()
            except Exception:  # the store is busy: try again at the next tick
                continue
            if done:
                return

    def _stop(self) -> None:
        self._stop_event.set()
