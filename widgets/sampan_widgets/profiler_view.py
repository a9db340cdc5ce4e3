"""``ProfilerView``: top operators (sortable), the per-step breakdown of ``fit`` and a memory timeline."""
from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Callable

import ipywidgets as W

from sampan.errors import first_line
from sampan.profiler import PHASES, ProfileReport, profile_fit, profile_steps
from sampan_widgets._base import Drawn, Panel
from sampan_widgets._draw import COLORS, human_bytes, new_figure, to_png
from sampan_widgets._i18n import tr

_SORTS = [("CPU total", "cpu_total"), ("self CPU", "self_cpu_total"), ("device total", "device_total"),
          ("self device", "self_device_total"), ("calls", "count"), ("CPU memory", "cpu_memory"),
          ("device memory", "device_memory")]  # labels shown through tr()


def ops_table_html(rows: list[dict]) -> str:
    head = "<tr>" + "".join(f"<th>{tr(h)}</th>" for h in _OPS_HEAD) + "</tr>"
    body = "".join(
        f"<tr><td>{html.escape(r['name'])}</td><td>{r['count']}</td><td>{r['cpu_total']:.3f}</td>"
        f"<td>{r['self_cpu_total']:.3f}</td><td>{r['device_total']:.3f}</td><td>{human_bytes(r['cpu_memory'])}</td>"
        f"<td>{human_bytes(r['device_memory'])}</td><td>{html.escape(r['input_shapes'][:60])}</td></tr>"
        for r in rows)
    return f'<table class="sampan-ops" style="font:12px monospace">{head}{body}</table>'


_OPS_HEAD = ("operator", "calls", "CPU total ms", "self CPU ms", "device total ms", "CPU mem", "device mem",
             "input shapes")  # shown through tr()
_OVERHEAD = ("fit's loop overhead (bookkeeping + callbacks): {loop:.3f} ms per step = <b>{share:.1%}</b> of the "
             "{compute:.3f} ms of compute it wraps (forward + backward + optimizer); input (data + host-to-device): "
             "{input:.3f} ms.")


def breakdown_html(summary: dict) -> str:
    if not summary or not summary.get("steps"):
        return tr("<i>no fit breakdown (a code block was profiled)</i>")
    rows = "".join(f"<tr><td>{tr(p)}</td><td>{summary['ms'][p]:.3f}</td><td>{summary['share'][p]:.1%}</td></tr>"
                   for p in PHASES)
    head = "".join(f"<th>{tr(h)}</th>" for h in ("phase", "median ms", "share"))
    overhead = tr(_OVERHEAD).format(loop=summary["loop_ms"], share=summary["loop_overhead"],
                                    compute=summary["compute_ms"], input=summary["input_ms"])
    return (f'<table class="sampan-breakdown" style="font:12px monospace"><tr>{head}</tr>{rows}'
            f"<tr><th>{tr('step')}</th><th>{summary['ms']['total']:.3f}</th><th></th></tr></table>"
            f"<p>{overhead}</p>")


def breakdown_png(records: list[dict]) -> bytes:
    fig = new_figure(6.4, 2.6)
    ax = fig.subplots()
    bottom = [0.0] * len(records)
    steps = list(range(len(records)))
    for i, phase in enumerate(PHASES):
        values = [r[phase] for r in records]
        ax.bar(steps, values, bottom=bottom, color=COLORS[i % len(COLORS)], label=tr(phase))
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_xlabel(tr("step"))
    ax.set_ylabel(tr("ms"))
    ax.set_title(tr("time per step by phase"))
    ax.legend(fontsize=7, ncols=4)
    return to_png(fig)


def memory_png(timeline: list[dict]) -> bytes:
    fig = new_figure(6.4, 2.4)
    ax = fig.subplots()
    steps = [r["step"] for r in timeline]
    for i, key in enumerate(k for k in ("allocated", "reserved", "peak", "rss") if timeline and k in timeline[0]):
        ax.plot(steps, [r[key] / 2**20 for r in timeline], marker="o", markersize=3, color=COLORS[i], label=key)
    ax.set_xlabel(tr("step"))
    ax.set_ylabel(tr("MiB"))
    ax.set_title(tr("memory after each step"))
    ax.legend(fontsize=7)
    return to_png(fig)


class ProfilerView(Drawn):
    """Runs :mod:`sampan.profiler` over N steps of a ``fit`` or a code block and shows the result: top
    operators as a table sortable by any column, the per-step phase breakdown, a memory timeline and a
    button that exports the chrome trace.

    Args:
        steps: steps recorded; warmup: steps run first and left out.
        row_limit: operators shown.
        trace_path: where the export button writes the chrome trace. Whoever uses the view (in a Voilà dashboard,
            anyone who opens it) may type another name in the box: only a plain ``.json`` file name in the current
            folder, never an existing file (``trace_path`` itself is replaced by each export).

    Example:
        >>> from sampan_widgets import ProfilerView
        >>> view = ProfilerView(steps=10)
        >>> # display(view); view.profile_fit(model, train_set, batch_size=64)
    """

    def __init__(self, *, steps: int = 10, warmup: int = 2, row_limit: int = 20,
                 trace_path: str = "sampan_trace.json") -> None:
        from sampan.errors import bad_argument, check_int
        from sampan.profiler.report import _check_steps

        _check_steps(steps, warmup)  # refused here, not at the first profile
        check_int("row_limit", row_limit, fix="pass row_limit=20 (operators shown)")
        if not isinstance(trace_path, str) or not trace_path.strip():
            raise ValueError(bad_argument("trace_path", trace_path, "a file name ending in .json",
                                          "pass trace_path=\"sampan_trace.json\""))
        self.steps, self.warmup, self.row_limit = steps, warmup, row_limit
        self._trace_path = trace_path  # the author's choice: the one name in the box that may name a folder
        self.report: ProfileReport | None = None
        self._embedded = False
        self.sort = W.Dropdown(options=[(tr(label), key) for label, key in _SORTS], value="cpu_total",
                                description=tr("sort by"))
        self.ops = W.HTML(tr("<i>nothing profiled yet</i>"))
        self.breakdown = W.HTML("")
        self.breakdown_image = W.Image(format="png")
        self.memory_image = W.Image(format="png")
        self.path = W.Text(value=trace_path, description=tr("trace"))
        self.export_button = W.Button(description=tr("export chrome trace"), icon="download")
        self.export_status = W.HTML("")
        tabs = W.Tab(children=[W.VBox([self.sort, self.ops]), W.VBox([self.breakdown_image, self.breakdown]),
                               self.memory_image])
        for i, title in enumerate(("top operators", "step breakdown", "memory")):
            tabs.set_title(i, tr(title))
        self._panel = Panel([tabs, W.HBox([self.path, self.export_button, self.export_status])])
        self._panel.add_class("sampan-profiler-view")
        self.sort.observe(lambda _: self._show_ops(), names="value")
        self.export_button.on_click(lambda _: self.export())

    def profile_fit(self, model: Any, train_data: Any, **fit_kwargs: Any) -> ProfileReport:
        """Profiles ``warmup + steps`` steps of ``model.fit(train_data, **fit_kwargs)`` and shows them."""
        return self.show(profile_fit(model, train_data, steps=self.steps, warmup=self.warmup, **fit_kwargs))

    def profile(self, fn: Callable[[], Any]) -> ProfileReport:
        """Profiles ``warmup + steps`` calls of ``fn()`` and shows them."""
        return self.show(profile_steps(fn, steps=self.steps, warmup=self.warmup))

    def show(self, report: ProfileReport) -> ProfileReport:
        self.report = report
        self._show_ops()
        summary = report.breakdown()
        self.breakdown.value = breakdown_html(summary)
        records = report.timer.records[report.timer.skip:] if report.timer is not None else []
        self.breakdown_image.value = breakdown_png(records) if records else b""
        self.memory_image.value = memory_png(report.memory_timeline())
        return report

    def _show_ops(self) -> None:
        if self.report is not None:
            self.ops.value = ops_table_html(self.report.top_ops(sorted_by=self.sort.value, row_limit=self.row_limit))

    def export(self, path: str | None = None) -> Path | None:
        """Writes the chrome trace (to ``path`` or the path box) and says where, as often as asked.

        The box (what a viewer types) takes ``trace_path`` (replaced) or a new ``.json`` file name in the current
        folder; a refusal or
        a failure is said in the status beside the button (the button's click has nowhere else to show it).
        ``path`` from code may be any path and replaces an existing file; its failure is also raised.
        """
        if self.report is None:
            self.export_status.value = tr("<i>profile something first</i>")
            return None
        try:
            if path is not None:
                out = self.report.export_chrome_trace(path)
            else:
                target = _typed_trace_path(self.path.value, trusted=self._trace_path)
                if target is None:
                    return self._say(tr(_REFUSED).format(value=_shown(self.path.value)))
                # the author's own trace_path is replaced on each export; a name typed in the box never replaces
                out = self.report.profiler.export(target, overwrite=self.path.value == self._trace_path)
        except FileExistsError:
            return self._say(tr(_EXISTS).format(value=_shown(self.path.value)))
        except Exception as exc:  # noqa: BLE001 - said where the viewer looks; code callers also get it raised
            self._say(tr("The trace was not written: {error}").format(error=f"{type(exc).__name__}: {first_line(exc)}"))
            if path is not None:
                raise
            return None
        self.export_status.value = f"{tr('written to')} <code>{html.escape(str(out))}</code>"
        return out

    def _say(self, message: str) -> None:
        self.export_status.value = f'<span class="sampan-export-error" style="color:#b00">{html.escape(message)}</span>'


_REFUSED = ("Expected `trace` to be a file name ending in .json, in this folder (no folder, not starting with a dot). "
            "Received: trace={value}. HINT: type a name such as sampan_trace.json.")
_EXISTS = ("A file named {value} already exists here; the trace was not written (an export never replaces a file). "
           "HINT: type a new file name.")


def _shown(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:80] + "…")


def _typed_trace_path(value: str, *, trusted: str) -> Path | None:
    """Where a typed trace name may be written: ``value`` when it is a plain ``.json`` file name (no folder, no
    drive, no leading dot, printable) or the author's own ``trusted`` path; else ``None``."""
    if value == trusted:
        return Path(value)
    name = value.strip()
    plain = (name == value and 5 < len(name) <= 120 and name.isprintable() and name.lower().endswith(".json")
             and not name.startswith(".") and not any(c in name for c in '/\\:') and Path(name).name == name)
    return Path(name) if plain else None
