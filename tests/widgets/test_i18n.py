"""The widgets speak the learner's language: Chinese labels under SAMPAN_LANG=zh, English otherwise."""
from __future__ import annotations

import pytest

from sampan_widgets import ConfusionMatrixView, LiveCurves
from sampan_widgets._i18n import _ZH, tr
from sampan_widgets.resource_monitor import status_html


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_labels_follow_the_language(lang, monkeypatch):
    monkeypatch.setenv("SAMPAN_LANG", lang)
    curves = LiveCurves()
    matrix = ConfusionMatrixView([0] * 6 + [1] * 9, [0] * 5 + [1] + [0] * 2 + [1] * 7)
    row = {"time": 1.0, "cpu": 10.0, "proc_cpu": 5.0, "rss": 2**20, "sys_used": 2**30, "sys_total": 2**31, "step": 3}
    texts = [curves._status.value, matrix.normalize.description, matrix.caption.value, status_html(row)]
    if lang == "zh":
        assert texts[0] == "<i>等待 fit 开始……</i>" and texts[1] == "按行归一化"
        assert "准确率为 <b>80.00%</b>" in texts[2] and "系统内存" in texts[3] and "步 3" in texts[3]
    else:
        assert texts[0] == "<i>waiting for fit…</i>" and texts[1] == "normalize rows"
        assert "accuracy <b>80.00%</b> on 15 samples" in texts[2] and "system memory" in texts[3]


def test_the_live_status_line_says_epoch_and_step_in_chinese(monkeypatch):
    monkeypatch.setenv("SAMPAN_LANG", "zh")
    live = LiveCurves()
    live.on_train_begin({})
    live.on_train_batch_end(0, {"loss": 0.5, "batch_size": 8, "step": 1})
    live.redraw()
    status = live._status.value
    assert "轮次 <b>1</b>" in status and "步 <b>1</b>" in status
    assert "epoch" not in status and "step" not in status, status


def test_every_chinese_label_is_chinese_and_keeps_its_placeholders(monkeypatch):
    import re
    import string

    monkeypatch.setenv("SAMPAN_LANG", "zh")
    for english, chinese in _ZH.items():
        fields = lambda text: sorted(f for _, f, _, _ in string.Formatter().parse(text) if f)  # noqa: E731
        assert fields(english) == fields(chinese), english
        assert english in ("MiB",) or re.search(r"[\u4e00-\u9fff]", chinese), f"{english!r} -> {chinese!r}"
    assert tr("not a known label") == "not a known label"


def test_the_profiler_views_export_messages_have_chinese(monkeypatch):
    from sampan_widgets import profiler_view

    monkeypatch.setenv("SAMPAN_LANG", "zh")
    for message in (profiler_view._REFUSED, profiler_view._EXISTS):
        assert tr(message) != message and "{value}" in tr(message)


def test_the_monitors_note_under_its_table_is_chinese(monkeypatch):
    """The training monitor in Chinese ended with "No NVIDIA GPU found: showing the host only." in English."""
    from sampan.monitor._readers import GpuReader
    from sampan_widgets import ResourceMonitor
    from sampan_widgets.resource_monitor import status_html

    monkeypatch.setenv("SAMPAN_LANG", "zh")
    monitor = ResourceMonitor(gpu=False)
    monitor._on_sample(monitor.sampler.sample_now())
    assert "GPU 采样已关闭（gpu=False）。" in monitor._status.value and "sampling is off" not in monitor._status.value
    note = GpuReader(use_nvml=False).note  # None on a machine with a CUDA GPU, which has nothing to explain
    row = monitor.sampler.latest
    assert note is None or "没有找到 NVIDIA GPU：只显示主机的数据。" in status_html(row, note=note)


def test_chinese_labels_keep_their_font_after_the_style_is_reset():
    """The widgets' pictures put the CJK font back among matplotlib's fallbacks before every figure: a first figure
    drawn inside an ``rc_context`` (or a ``plt.style.use`` / ``rcdefaults`` later) dropped it, and every Chinese
    label after that was drawn as boxes."""
    import warnings

    import matplotlib

    from sampan_widgets._draw import new_figure, to_png

    with matplotlib.rc_context():  # the test leaves the process's settings as they were
        with matplotlib.rc_context():
            new_figure()  # a first figure in a context whose end restores the fonts
        matplotlib.rcdefaults()  # as plt.style.use or rcdefaults in a learner's notebook
        fig = new_figure(3, 2)
        fig.add_subplot().set_title("预测类别与真实类别")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            to_png(fig)
    assert not [w for w in caught if "missing from font" in str(w.message)], [str(w.message) for w in caught]
