"""``ResourceMonitor``: GPU (device and PyTorch views) and host figures, live, from a background sampler."""
from __future__ import annotations

import collections
import html
import threading
from typing import Any

import ipywidgets as W

from sampan.errors import bad_argument
from sampan.monitor import MonitorCallback, ResourceSampler
from sampan_widgets._base import Drawn, Panel
from sampan_widgets._draw import COLORS, human_bytes, svg_lines
from sampan_widgets._i18n import tr

_CSS = ("<style>.sampan-res td,.sampan-res th{padding:1px 8px;text-align:right;font:12px monospace}"
        ".sampan-res th{text-align:left}.sampan-bar{display:inline-block;height:8px;background:#1f77b4}</style>")


def _bar(used: float | None, total: float | None) -> str:
    if not used or not total:
        return ""
    width = max(1, min(100, round(100 * used / total)))
    return f'<span class="sampan-bar" style="width:{width}px"></span>'


def status_html(row: dict | None, *, note: str | None = None, warning: str | None = None) -> str:
    """The table of the latest sample: host, then one block per GPU (NVML device view, torch.cuda view)."""
    if not row:
        return tr("<i>no sample yet</i>")
    lines = [_CSS, '<table class="sampan-res">',
             f"<tr><th>{tr('host')}</th><td>CPU {row.get('cpu', 0):.0f}%</td>"
             f"<td>{tr('process')} {row.get('proc_cpu', 0):.0f}%</td>"
             f"<td></td></tr>",
             f"<tr><th>{tr('process RSS')}</th><td>{human_bytes(row.get('rss'))}</td><td></td><td></td></tr>",
             f"<tr><th>{tr('system memory')}</th>"
             f"<td>{human_bytes(row.get('sys_used'))} / {human_bytes(row.get('sys_total'))}"
             f"</td><td>{_bar(row.get('sys_used'), row.get('sys_total'))}</td><td></td></tr>"]
    gpus = sorted({int(k[3:k.index("_")]) for k in row if k.startswith("gpu")})
    for i in gpus:
        g = lambda key: row.get(f"gpu{i}_{key}")  # noqa: E731
        if g("util") is not None:
            lines.append(f"<tr><th>GPU {i} ({tr('device')})</th><td>{tr('util')} {g('util'):.0f}%</td>"
                         f"<td>{human_bytes(g('mem_used'))} / {human_bytes(g('mem_total'))}</td>"
                         f"<td>{_bar(g('mem_used'), g('mem_total'))}</td></tr>")
        if g("allocated") is not None:
            lines.append(f"<tr><th>GPU {i} (PyTorch)</th><td>{tr('allocated')} {human_bytes(g('allocated'))}</td>"
                         f"<td>{tr('reserved')} {human_bytes(g('reserved'))}</td>"
                         f"<td>{tr('peak')} {human_bytes(g('peak'))}</td></tr>")
    lines.append("</table>")
    step = f" · {tr('step')} {row['step']}" if row.get("step") is not None else ""
    lines.append(f'<div class="sampan-res-time">t = {row["time"]:.1f} s{step}</div>')
    if note:
        lines.append(f'<div class="sampan-res-note" style="color:#666">{html.escape(tr(note))}</div>')
    if warning:
        lines.append(f'<div class="sampan-res-leak" style="color:#b00">⚠ {html.escape(warning)}</div>')
    return "".join(lines)


def chart_html(samples: list[dict], *, width: int = 420, height: int = 150) -> str:
    """Memory over time: process RSS, and per GPU torch allocated / reserved and NVML used."""
    mib = 1024 * 1024
    series: list[dict] = []
    keys = [("rss", "RSS")] + [(k, k.replace("_", " ")) for k in (samples[-1] if samples else {})
                               if k.startswith("gpu") and k.split("_", 1)[1] in ("allocated", "reserved", "mem_used")]
    for i, (key, label) in enumerate(keys):
        pts = [(s["time"], s[key] / mib) for s in samples if s.get(key) is not None]
        if pts:
            series.append({"label": label, "points": pts, "color": COLORS[i % len(COLORS)]})
    return svg_lines(series, width=width, height=height, title=tr("memory (MiB) over time (s)"))


class ResourceMonitor(MonitorCallback, Drawn):
    """A widget, a context manager and a ``fit`` callback showing GPU and host resources live.

    A :class:`sampan.monitor.ResourceSampler` thread samples every ``interval`` seconds; after each sample it
    sets the view's ``HTML`` values (trait assignment only, never ``with out:`` from the thread). As a ``fit``
    callback it starts at train begin, tags samples with the step, checks memory step after step for a leak
    and stops at train end if it started there; after a fit that raised it keeps sampling until the next fit
    ends or ``stop()``. Closing the widget stops the thread.

    Args:
        interval: seconds between samples (default 1: like ``nvidia-smi -l 1``; each sample is a moment of
            Python work beside the training, so a lower rate costs the training less).
        window: seconds of history drawn in the chart.
        gpu: sample GPUs.
        leak_check, leak_options, probe_interval: see :class:`sampan.monitor.MonitorCallback`.

    Example:
        >>> from sampan_widgets import ResourceMonitor
        >>> monitor = ResourceMonitor(interval=0.5)
        >>> # display(monitor); model.fit(train, callbacks=[monitor]); monitor.to_dataframe()
    """

    def __init__(self, interval: float = 1.0, *, window: float = 120.0, gpu: bool = True, leak_check: bool = True,
                 leak_options: dict | None = None, probe_interval: float = 0.1,
                 max_samples: int = 100_000) -> None:
        if isinstance(window, bool) or not isinstance(window, (int, float)) or not window > 0:
            raise ValueError(bad_argument("window", window, "a number of seconds greater than 0",
                                          "pass window=120 (the default) to chart the last two minutes"))
        super().__init__(ResourceSampler(interval, gpu=gpu, max_samples=max_samples), leak_check=leak_check,
                         leak_options=leak_options, probe_interval=probe_interval, on_leak=self._show_leak)
        self.window = window
        self.leak_warning: str | None = None
        self.updates = 0
        self._recent: collections.deque[dict] = collections.deque()  # the chart's window, kept as samples come
        self._lock = threading.Lock()
        self._embedded = False
        self._status = W.HTML(value=status_html(None, note=self.sampler.note))
        self._chart = W.HTML(value="")
        self._panel = Panel([self._status, self._chart], on_close=self.stop)
        self._panel.add_class("sampan-resource-monitor")
        self.sampler.add_listener(self._on_sample)

    # ------------------------------------------------------------------ sampler thread side
    def _on_sample(self, row: dict) -> None:
        with self._lock:  # O(1) a sample: no copy of the whole history, however long the run
            recent = self._recent
            if not recent or recent[-1] is not row:  # a leak warning redraws the latest sample again
                if recent and row["time"] < recent[-1]["time"]:
                    recent.clear()  # the sampler was restarted on a new clock
                recent.append(row)
            while recent[0]["time"] < row["time"] - self.window:
                recent.popleft()
            recent = list(recent)
        status = status_html(row, note=self.sampler.note, warning=self.leak_warning)
        chart = chart_html(recent)
        with self._lock, self._panel.hold_sync():
            self._status.value = status
            self._chart.value = chart
            self.updates += 1

    # ------------------------------------------------------------------ control
    def start(self) -> "ResourceMonitor":
        self.sampler.start()
        return self

    def stop(self) -> None:
        self.sampler.stop()

    @property
    def running(self) -> bool:
        return self.sampler.running

    def __enter__(self) -> "ResourceMonitor":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def samples(self) -> list[dict]:
        return self.sampler.samples

    def to_csv(self, path) -> None:
        self.sampler.to_csv(path)

    def to_dataframe(self):
        return self.sampler.to_dataframe()

    # ------------------------------------------------------------------ fit callback (MonitorCallback's hooks)
    def on_train_begin(self, logs=None):
        self.leak_warning = None
        super().on_train_begin(logs)

    def on_exception(self, exception):
        """A fit that raised (an error, an out-of-memory, Ctrl-C) leaves the widget showing memory as it is freed:
        the next fit's end, ``stop()`` or closing the widget stops it (a headless ``MonitorCallback`` stops here)."""

    def _show_leak(self, message: str) -> None:
        self.leak_warning = message  # LeakDetector.message: already in the learner's language
        self._on_sample(self.sampler.latest or self.sampler.sample_now())
