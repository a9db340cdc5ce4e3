"""``LiveCurves``: loss and metrics per step and per epoch, train against eval, redrawn in place."""
from __future__ import annotations

import html
import math
import os
import time
from typing import Any, Literal, Sequence

import ipywidgets as W

from sampan.callbacks.base import Callback
from sampan.errors import bad_argument
from sampan_widgets._base import Drawn, Panel, check_number, check_size, in_kernel, png_bundle
from sampan_widgets._draw import COLORS, new_figure, svg_lines, to_png
from sampan_widgets._i18n import tr

_SKIP = {"batch_size", "step", "lr", "loss_scale", "skipped_steps"}
_TRAIN, _EVAL = COLORS[0], COLORS[1]
_CPUS = os.cpu_count() or 1  # the process's CPU time grows at most this much faster than the wall clock


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


class LiveCurves(Callback, Drawn):
    """A ``fit`` callback and a widget: loss and metrics per step (train) and per epoch (train and eval).

    The view is two ipywidgets ``HTML`` values (a status line and inline SVG charts) updated in place from
    the training thread. A step's hook only appends its logs to a buffer; a redraw (which sorts the buffer
    into curves) comes at least ``1 / max_fps`` seconds after the previous one whatever the step rate, and
    later when a redraw is slow, so that redrawing takes at most ``budget`` of the process's CPU time (not of
    the wall time: on a busy machine, where the process gets a fraction of a core, redraws thin out with the
    training), but at least every ``max_interval`` seconds. Epoch ends obey the same spacing; only the end of
    training redraws at once (when something changed since the last redraw), so that the view shows the
    final values when ``fit`` returns. When training ends it renders the final curves with matplotlib (Agg, no pyplot)
    and leaves them as a PNG in the notebook: the PNG is added to this object's own display output when it
    was displayed with ``display(live)`` (frontends with the widget show the widget, a saved or papermill
    notebook shows the image), or displayed on its own when the view was never shown.

    Args:
        metrics: a name, or names, to plot besides the loss (default: every numeric value in the logs).
        max_fps: most redraws per second.
        budget: largest share of the process's CPU time spent redrawing: between two redraws the process
            spends at least the recent CPU cost of a redraw divided by ``budget``.
        max_interval: longest interval between redraws, whatever they cost.
        static: ``"auto"`` (see above), True (always display the final PNG), False (never).
        width, height: size of each chart in pixels.

    Example:
        >>> from sampan_widgets import LiveCurves
        >>> live = LiveCurves()
        >>> # display(live); model.fit(train, val, epochs=5, callbacks=[live])
    """

    def __init__(self, *, metrics: str | Sequence[str] | None = None, max_fps: float = 4.0, budget: float = 0.002,
                 max_interval: float = 2.0,
                 static: Literal["auto"] | bool = "auto", width: int = 340, height: int = 200) -> None:
        Callback.__init__(self)
        if not (isinstance(max_fps, (int, float)) and max_fps > 0):
            raise ValueError(f"Expected `max_fps` to be a number > 0. Received: max_fps={max_fps!r}.")
        number = isinstance(budget, (int, float)) and not isinstance(budget, bool)
        if not (number and 0 < budget <= 1):
            raise ValueError(bad_argument("budget", budget, "a share of the CPU time greater than 0 and at most 1",
                                          "pass budget=0.002 (the default), or budget=1 to redraw at max_fps "
                                          "whatever a redraw costs"))
        check_number("max_interval", max_interval, fix="pass max_interval=2.0 (seconds, the default)")
        check_size("width", width, 340)
        check_size("height", height, 200)
        if static not in ("auto", True, False):
            raise ValueError(bad_argument("static", static, "'auto', True or False",
                                          "pass static=True to always show the final picture, or leave it out"))
        if isinstance(metrics, str):  # one name, not its letters
            metrics = [metrics]
        if metrics is not None and hasattr(metrics, "__iter__"):
            metrics = list(metrics)
        if metrics is not None and not (isinstance(metrics, list) and all(isinstance(m, str) for m in metrics)):
            raise ValueError(bad_argument("metrics", metrics, "a metric name or a list of names",
                                          "pass metrics=['acc'], or leave it out to plot every metric"))
        self.metrics = list(metrics) if metrics is not None else None
        self.min_interval = 1.0 / max_fps
        self.budget = budget
        self.max_interval = max(max_interval, self.min_interval)
        self._cost = 0.0  # CPU seconds of a redraw, smoothed
        self._cpu_mark = 0.0  # the process's CPU time at the last redraw
        self._next_check = -math.inf  # no redraw before this wall time
        self.static, self.width, self.height = static, width, height
        self.steps: dict[str, list[tuple[int, float]]] = {}
        self.epochs: dict[str, list[tuple[int, float]]] = {}
        self.redraws = 0
        self._keep: dict[str, bool] = {}
        self._pending: list[dict] = []
        self._dirty = False
        self.final_png: bytes | None = None
        self._last_draw = -math.inf
        self._status_text = ""
        self._epoch = 0
        self._step = 0
        self._embedded = False
        self._handle: Any = None
        self._status = W.HTML(value=tr("<i>waiting for fit…</i>"))
        self._charts = W.HTML(value="")
        self._panel = Panel([self._status, self._charts])
        self._panel.add_class("sampan-live-curves")

    # ------------------------------------------------------------------ display
    def _ipython_display_(self) -> None:
        from IPython.display import display

        self._handle = display(self._panel._repr_mimebundle_(), raw=True, display_id=True)

    # ------------------------------------------------------------------ callback hooks
    def _wanted(self, name: str) -> bool:
        base = name[5:] if name.startswith("eval_") else name
        return name not in _SKIP and (base == "loss" or self.metrics is None or base in self.metrics)

    def on_train_begin(self, logs=None):
        self._last_draw = self._next_check = -math.inf
        self._status.value = tr("<i>training…</i>")

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, step, logs=None):
        self._pending.append(logs or {})  # sorted into curves at the next redraw: one append a step
        if self._due():
            self.redraw()

    def _ingest(self) -> None:
        pending, self._pending = self._pending, []
        for logs in pending:
            self._step = int(logs.get("step", self._step + 1))
            for name, value in logs.items():
                keep = self._keep.get(name)
                if keep is None:
                    keep = self._keep[name] = self._wanted(name)
                if keep and _is_number(value):
                    self.steps.setdefault(name, []).append((self._step, float(value)))

    def _due(self) -> bool:
        now = time.monotonic()
        if now < self._next_check:  # the common case: one clock read a step
            return False
        if now - self._last_draw >= self.max_interval:
            return True
        owed = self._cost / self.budget - (time.process_time() - self._cpu_mark)  # CPU to spend training first
        if owed <= 0:
            return True
        self._next_check = min(now + owed / _CPUS, self._last_draw + self.max_interval)
        return False

    def on_epoch_end(self, epoch, logs=None):
        self._ingest()
        for name, value in (logs or {}).items():
            if _is_number(value) and self._wanted(name):
                self.epochs.setdefault(name, []).append((self._step, float(value)))
                self._dirty = True
        if self._due():
            self.redraw()

    def on_train_end(self, logs=None):
        if self._pending or self._dirty or not self.redraws:
            self.redraw()
        self._leave_static()

    def on_exception(self, exception):
        self.on_train_end()  # the curves up to the error, drawn and left in the notebook

    # ------------------------------------------------------------------ drawing
    def _panels(self) -> list[tuple[str, list[dict]]]:
        names = [n for n in dict.fromkeys([*self.steps, *self.epochs]) if not n.startswith("eval_")]
        names += [n[5:] for n in self.epochs if n.startswith("eval_") and n[5:] not in names]
        panels = []
        for name in sorted(names, key=lambda n: (n != "loss", n)):
            series = []
            if name in self.steps:
                series.append({"label": tr("train (step)"), "points": self.steps[name], "color": _TRAIN,
                               "opacity": 0.35})
            if name in self.epochs:
                series.append({"label": tr("train (epoch)"), "points": self.epochs[name], "color": _TRAIN,
                               "marker": True})
            if f"eval_{name}" in self.epochs:
                series.append({"label": tr("eval"), "points": self.epochs[f"eval_{name}"], "color": _EVAL,
                               "marker": True, "dash": True})
            panels.append((name, series))
        return panels

    def _status_html(self) -> str:
        total = self.params.get("epochs") if self.params else None
        parts = [f"{tr('epoch')} <b>{self._epoch + 1}{'/' + str(total) if total else ''}</b>",
                 f"{tr('step')} <b>{self._step}</b>"]
        for name, points in [*self.steps.items(), *((k, v) for k, v in self.epochs.items() if k.startswith("eval_"))]:
            parts.append(f"{html.escape(name)} <b>{points[-1][1]:.4g}</b>")
        return '<span class="sampan-live-status">' + " · ".join(parts) + "</span>"

    def redraw(self) -> None:
        """Redraws the view now (the hooks call it, throttled)."""
        start = time.thread_time()
        self._ingest()
        self._dirty = False
        self.redraws += 1
        charts = "".join(svg_lines(series, width=self.width, height=self.height, title=name)
                         for name, series in self._panels())
        with self._panel.hold_sync():
            self._status.value = self._status_html()
            self._charts.value = f'<div style="display:flex;flex-wrap:wrap;gap:8px">{charts}</div>'
        cost = time.thread_time() - start
        self._cost = cost if self.redraws == 1 else 0.5 * (self._cost + cost)  # smooth out one slow redraw
        self._last_draw, self._cpu_mark = time.monotonic(), time.process_time()
        self._next_check = self._last_draw + self.min_interval

    def figure(self):
        """The curves as a matplotlib Figure (Agg canvas, not registered with pyplot)."""
        self._ingest()
        panels = self._panels() or [("loss", [])]
        fig = new_figure(3.6 * len(panels), 2.8)
        for ax, (name, series) in zip(fig.subplots(1, len(panels), squeeze=False)[0], panels):
            for s in series:
                xs, ys = [p[0] for p in s["points"]], [p[1] for p in s["points"]]
                ax.plot(xs, ys, color=s["color"], alpha=s.get("opacity", 1.0), linestyle="--" if s.get("dash") else "-",
                        marker="o" if s.get("marker") else None, markersize=3, label=s["label"])
            ax.set_title(name)
            ax.set_xlabel(tr("step"))
            ax.grid(alpha=0.3)
            if series:
                ax.legend(fontsize=7)
        return fig

    def to_png(self) -> bytes:
        return to_png(self.figure())

    def _leave_static(self) -> None:
        if self.static is False or not in_kernel():
            return
        self.final_png = self.to_png()
        if self._handle is not None and self.static == "auto":
            self._handle.update({**self._panel._repr_mimebundle_(), **png_bundle(self.final_png)}, raw=True)
        elif self.static is True or not self._embedded:
            from IPython.display import Image, display

            display(Image(data=self.final_png, format="png"))
