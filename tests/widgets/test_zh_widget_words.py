"""In a Chinese lab the widgets' tables, captions and legends are Chinese (SAMPAN_LANG=zh)."""
from __future__ import annotations

import pytest

from sampan.monitor import LeakDetector
from sampan.profiler import PHASES
from sampan_widgets import DatasetBrowser, ExperimentPanel, ResourceMonitor, SummaryView
from sampan_widgets import experiment as experiment_module
from sampan_widgets import profiler_view


@pytest.fixture
def zh(monkeypatch):
    monkeypatch.setenv("SAMPAN_LANG", "zh")


def _legend(fig) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def test_summary_view_headers_and_totals_are_chinese(zh, recorder, model_and_data):
    model, _ = model_and_data()
    page = SummaryView(model, (1, 16)).html.value
    assert "<th>层</th><th>类型</th><th>输出形状</th><th>参数量</th><th>FLOPs</th>" in page
    assert "参数总量 <b>" in page and "· 可训练 " in page and "· 每次前向 FLOPs " in page
    assert "total params" not in page and "<th>layer</th>" not in page


def test_dataset_browser_pages_and_text_table_are_chinese(zh, recorder):
    browser = DatasetBrowser([(f"句子 {i}", i % 2) for i in range(120)], per_page=24)
    assert browser.label.value == "第 1/5 页（样本 0–23，共 120 个）"
    assert "<th>标签</th><th>文本</th>" in browser.text.value


def test_profiler_tables_sentence_and_legend_are_chinese(zh, monkeypatch):
    head = profiler_view.ops_table_html([])
    assert "<th>算子</th><th>调用次数</th><th>CPU 总计（毫秒）</th><th>自身 CPU（毫秒）</th>" in head
    summary = {"steps": 3, "ms": {**{p: 1.0 for p in PHASES}, "total": 7.0}, "share": {p: 1 / 7 for p in PHASES},
               "loop_ms": 0.5, "loop_overhead": 0.1, "compute_ms": 5.0, "input_ms": 1.0}
    page = profiler_view.breakdown_html(summary)
    assert "<th>阶段</th><th>中位数（毫秒）</th><th>占比</th>" in page and "<td>前向</td>" in page
    assert "fit 循环的开销（记录 + 回调）：每步 0.500 毫秒" in page and "loop overhead" not in page
    figures = []
    monkeypatch.setattr(profiler_view, "to_png", lambda fig: figures.append(fig) or b"")
    profiler_view.breakdown_png([{p: 1.0 for p in PHASES}])
    assert _legend(figures[0]) == ["数据", "主机到设备", "前向", "反向", "优化器", "其他", "回调"]


def test_experiment_failure_and_legend_are_chinese(zh, recorder, model_and_data, monkeypatch):
    def make_model(lr):
        model, _ = model_and_data(n=8)
        return model

    _, data = model_and_data(n=32)
    panel = ExperimentPanel(make_model, data, data, epochs=(1, 2, 1))
    figures = []
    monkeypatch.setattr(experiment_module, "to_png", lambda fig: figures.append(fig) or b"")
    panel.run(lr=0.01, batch_size=16, epochs=1)
    assert _legend(figures[-1]) == ["lr=1.0e-02 bs=16 ep=1 训练", "lr=1.0e-02 bs=16 ep=1 验证"]

    def broken(lr):
        raise RuntimeError("boom")

    panel.make_model = broken
    with pytest.raises(RuntimeError):
        panel.run(lr=0.01, batch_size=16, epochs=1)
    assert "lr=1.0e-02 bs=16 ep=1 失败：boom" in panel.status.value


def test_the_resource_monitor_shows_the_leak_warning_in_chinese(zh, recorder):
    monitor = ResourceMonitor(interval=1.0, gpu=False)
    try:
        monitor.detector = LeakDetector(window=10, warmup=2, min_growth=1000, name="process RSS")
        with pytest.warns(Warning):
            for step in range(40):
                monitor.detector.update(step, 10_000 + 300 * step)
        monitor._show_leak(monitor.detector.message)
        assert monitor.leak_warning.startswith("进程常驻内存（RSS） 从第 2 步到第 11 步增长了")
        assert "grew by" not in monitor._status.value
    finally:
        monitor.close()
