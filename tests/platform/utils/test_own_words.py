"""Sampan's own words follow the learner's language (``SAMPAN_LANG``): the progress bars, the model summary,
EarlyStopping's message, the environment check and the dataset catalog."""
from __future__ import annotations

import re

import pytest
import torch

from sampan.utils import i18n


@pytest.fixture
def chinese(monkeypatch):
    monkeypatch.setenv("SAMPAN_LANG", "zh")


def test_words_fields_and_the_english_fallback():
    assert i18n.tr("Epoch {epoch}/{epochs}", lang="zh", epoch=2, epochs=7) == "第 2/7 轮"
    assert i18n.tr("Epoch {epoch}/{epochs}", lang="en", epoch=2, epochs=7) == "Epoch 2/7"
    assert i18n.tr("a sentence nobody translated", lang="zh") == "a sentence nobody translated"
    assert i18n.width("层ab") == 4 and i18n.ljust("类型", 6) == "类型  "


def test_every_entry_keeps_its_fields():
    """A translation that drops or renames a {field} would raise KeyError or print the wrong number."""
    for english, chinese in i18n._ZH.items():
        assert sorted(re.findall(r"{(\w+)", english)) == sorted(re.findall(r"{(\w+)", chinese)), english


def test_the_summary_table_lines_up_in_chinese(chinese, capsys):
    from sampan.hapi.summary import summary

    summary(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)), (1, 4))
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["层", "类型", "输出形状", "参数量", "FLOPs"]
    assert "总参数量：58" in lines and "FLOPs（一次前向传播）：96" in lines
    # every row of the table is as wide as its rules on a terminal, where a Chinese character takes two columns
    table = [line for line in lines[:lines.index("总参数量：58")] if line]
    assert {i18n.width(line) for line in table} == {len(lines[0])}


def test_fit_bars_and_early_stopping_speak_chinese(chinese, capsys):
    from torch.utils.data import TensorDataset

    import sampan
    from sampan.callbacks import EarlyStopping, ProgressBar

    torch.manual_seed(0)
    data = TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,)))
    model = sampan.Model(torch.nn.Linear(4, 2))
    model.prepare(torch.optim.SGD(model.parameters(), lr=0.0), torch.nn.CrossEntropyLoss())
    model.fit(data, data, epochs=3, batch_size=16, verbose=0,
              callbacks=[ProgressBar(verbose=2), EarlyStopping(monitor="eval_loss", patience=1, mode="min")])
    out = capsys.readouterr().out
    assert "第 1/3 轮 - " in out and "Epoch" not in out.replace("EarlyStopping", "")
    assert re.search(r"EarlyStopping：在第 2 轮后停止训练；eval_loss 的最好值 [\d.]+ 出现在第 1 轮。", out), out
    model.evaluate(data, batch_size=16, verbose=2)
    assert capsys.readouterr().out.startswith("验证 - ")


def test_the_environment_check_speaks_chinese_and_keeps_its_keys(chinese):
    from sampan.check import cuda_stack_verdict, run_check

    report = run_check(compile=False, distributed=False, verbose=False)
    item = report["cpu: forward + backward"]  # the key stays English: lessons and scripts look items up by it
    assert item.label == "CPU：前向 + 反向" and item.detail.startswith("损失 ")
    assert "Sampan 环境检查" in str(report) and "CPU：前向 + 反向" in report._repr_markdown_()
    assert cuda_stack_verdict("12.6", "12.4", 90100) == "torch 为 CUDA 12.6 构建，带 cuDNN 9.1.0；驱动支持 CUDA 12.4：兼容"
    assert cuda_stack_verdict(None, None, None) == "torch 是纯 CPU 版本：不需要 CUDA 驱动和 cuDNN"


def test_every_dataset_of_the_catalog_is_described_in_chinese():
    from sampan.data.catalog import CATALOG
    from sampan.path.lang import cjk_share

    for info in CATALOG.values():
        assert info.describe("zh") != info.description and cjk_share(info.describe("zh")) > 0.3, info.name
        assert info.describe("en") == info.description


def test_explain_gives_its_counts_and_hints_in_chinese(chinese):
    import importlib

    from sampan.jit import explain

    module = importlib.import_module("sampan.jit.explain")
    for _, hint in [*module._HINTS, ((), module._UNSUPPORTED_HINT)]:  # every hint a learner can get
        assert hint in i18n._ZH, hint

    class Branchy(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # a branch on a tensor's value: a graph break
                return x * 2
            return x

    text = str(explain(Branchy(), torch.ones(3)))
    assert re.match(r"\d 个图，1 处图中断（graph break），捕获了 \d+ 个算子。\n", text) and "提示：根据张量的*值*" in text
    assert "整个 forward 是一张静态图。" in str(explain(torch.nn.Linear(3, 2), torch.ones(1, 3)))


def test_the_step_breakdown_table_speaks_chinese(chinese):
    from sampan.profiler import StepTimer

    timer = StepTimer(skip=0)
    data = torch.utils.data.TensorDataset(torch.randn(48, 4), torch.randint(0, 2, (48,)))
    import sampan

    model = sampan.Model(torch.nn.Linear(4, 2))
    model.prepare(torch.optim.SGD(model.parameters(), lr=0.1), torch.nn.CrossEntropyLoss())
    model.fit(data, batch_size=16, epochs=1, verbose=0, callbacks=[timer])
    table = timer.table()
    assert table.startswith("| 阶段 | 中位数（毫秒） | 占比 | 内容 |") and "| data | " in table  # phases stay keys
    assert "等待数据加载器送来下一个批次" in table and "fit 循环的开销：每步 " in table


def test_an_unknown_language_gives_english_and_one_warning_not_a_stopped_fit(monkeypatch, capsys):
    from torch.utils.data import TensorDataset

    import sampan
    from sampan.callbacks import ProgressBar

    i18n._warn_once.cache_clear()
    monkeypatch.setenv("SAMPAN_LANG", "fr")
    data = TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,)))
    model = sampan.Model(torch.nn.Linear(4, 2))
    model.prepare(torch.optim.SGD(model.parameters(), lr=0.1), torch.nn.CrossEntropyLoss())
    with pytest.warns(UserWarning, match=r"Received: \$SAMPAN_LANG='fr'.*in English") as seen:
        model.fit(data, epochs=2, batch_size=8, verbose=0, callbacks=[ProgressBar(verbose=2)])
    assert len(seen) == 1 and seen[0].filename == __file__  # once, and at the learner's line
    assert "Epoch 2/2 - " in capsys.readouterr().out
