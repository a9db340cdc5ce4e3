"""The widgets' words in the learner's language: English, or Simplified Chinese when ``SAMPAN_LANG`` (set by
``sampan lab --lang zh`` and ``sampan dashboard --lang zh``) or the locale says ``zh``.

Example:
    >>> import os; os.environ["SAMPAN_LANG"] = "zh"
    >>> tr("epoch")
    '轮次'
    >>> tr("{n} run(s)").format(n=3)
    '3 次运行'
"""
from __future__ import annotations

__all__ = ["tr"]

_ZH = {
    # axes and series
    "step": "步", "epoch": "轮次", "loss": "损失", "eval": "验证", "train (step)": "训练（每步）",
    "train (epoch)": "训练（每轮）", "predicted": "预测类别", "true": "真实类别", "ms": "毫秒",
    "MiB": "MiB", "no metric": "无指标", "{metric} by step": "{metric}（按步）",
    "memory (MiB) over time (s)": "内存（MiB）随时间（秒）变化", "waiting for data": "等待数据",
    "time per step by phase": "每步各阶段用时", "memory after each step": "每步之后的内存",
    # LiveCurves
    "<i>waiting for fit…</i>": "<i>等待 fit 开始……</i>", "<i>training…</i>": "<i>训练中……</i>",
    # Experiment
    "learning rate": "学习率", "batch size": "批大小", "epochs": "轮数", "run": "运行", "clear": "清除",
    "<i>choose settings and press run</i>": "<i>选好设置后点击“运行”</i>", "running {label}…": "正在运行 {label}……",
    "{n} run(s); last: {label}: {summary}": "共 {n} 次运行；最近一次：{label}：{summary}",
    "<i>cleared</i>": "<i>已清除</i>", "{n} run(s)": "{n} 次运行", "{label} failed: {error}": "{label} 失败：{error}",
    "train": "训练",
    # RunCompare
    "MLflow filter, e.g. params.optimizer = 'Adam'": "MLflow 过滤条件，例如 params.optimizer = 'Adam'",
    "filter": "过滤", "metric": "指标", "refresh": "刷新", "runs": "运行", "status": "状态",
    "no run selected": "未选择运行", "{differ} of {total} parameters differ": "{total} 个参数中有 {differ} 个不同",
    "no parameters": "没有参数", "parameters": "参数", "no metric logged yet": "还没有记录指标",
    "tracking store": "记录存储",
    # ProfilerView
    "CPU total": "CPU 总计", "self CPU": "自身 CPU", "device total": "设备总计", "calls": "调用次数",
    "self device": "自身设备", "CPU memory": "CPU 内存", "device memory": "设备内存",
    "sort by": "排序依据", "<i>nothing profiled yet</i>": "<i>还没有性能分析结果</i>", "trace": "追踪文件",
    "export chrome trace": "导出 Chrome 追踪", "top operators": "最耗时的算子", "step breakdown": "每步分解",
    "memory": "内存", "<i>profile something first</i>": "<i>请先做一次性能分析</i>", "written to": "已写入",
    "operator": "算子", "CPU total ms": "CPU 总计（毫秒）", "self CPU ms": "自身 CPU（毫秒）",
    "device total ms": "设备总计（毫秒）", "CPU mem": "CPU 内存", "device mem": "设备内存", "input shapes": "输入形状",
    "phase": "阶段", "median ms": "中位数（毫秒）", "share": "占比",
    "<i>no fit breakdown (a code block was profiled)</i>": "<i>没有 fit 的分解（分析的是一段代码）</i>",
    "fit's loop overhead (bookkeeping + callbacks): {loop:.3f} ms per step = <b>{share:.1%}</b> of the "
    "{compute:.3f} ms of compute it wraps (forward + backward + optimizer); input (data + host-to-device): "
    "{input:.3f} ms.":
        "fit 循环的开销（记录 + 回调）：每步 {loop:.3f} 毫秒，占它包裹的 {compute:.3f} 毫秒计算"
        "（前向 + 反向 + 优化器）的 <b>{share:.1%}</b>；输入（数据 + 主机到设备）：{input:.3f} 毫秒。",
    # the phases of a step (sampan.profiler.PHASES)
    "data": "数据", "h2d": "主机到设备", "forward": "前向", "backward": "反向", "optimizer": "优化器",
    "other": "其他", "callbacks": "回调",
    "Expected `trace` to be a file name ending in .json, in this folder (no folder, not starting with a dot). "
    "Received: trace={value}. HINT: type a name such as sampan_trace.json.":
        "“追踪文件”（trace）应当是当前文件夹中以 .json 结尾的文件名（不含文件夹，不以点开头）。收到的是：trace={value}。"
        "提示：输入例如 sampan_trace.json 这样的名字。",
    "A file named {value} already exists here; the trace was not written (an export never replaces a file). "
    "HINT: type a new file name.": "这里已经有名为 {value} 的文件，追踪文件没有写入（导出从不覆盖已有文件）。提示：输入一个新的文件名。",
    "The trace was not written: {error}": "追踪文件没有写入：{error}",
    # ResourceMonitor
    "<i>no sample yet</i>": "<i>还没有采样</i>", "host": "主机", "process": "进程", "process RSS": "进程常驻内存（RSS）",
    "system memory": "系统内存", "device": "设备", "util": "利用率", "allocated": "已分配", "reserved": "已预留",
    "peak": "峰值",
    # the sampler's notes (sampan.monitor), shown under the table
    "No NVIDIA GPU found: showing the host only.": "没有找到 NVIDIA GPU：只显示主机的数据。",
    "GPU sampling is off (gpu=False).": "GPU 采样已关闭（gpu=False）。",
    # views
    "◀ previous": "◀ 上一页", "next ▶": "下一页 ▶", "normalize rows": "按行归一化",
    "accuracy <b>{accuracy:.2%}</b> on {count} samples": "在 {count} 个样本上的准确率为 <b>{accuracy:.2%}</b>",
    "layer": "层", "type": "类型", "output shape": "输出形状", "params": "参数量",  # FLOPs stays FLOPs
    "total params <b>{total}</b> · trainable {trainable} · FLOPs per forward {flops}":
        "参数总量 <b>{total}</b> · 可训练 {trainable} · 每次前向 FLOPs {flops}",
    "page {page} / {pages} (samples {first}–{last} of {count})": "第 {page}/{pages} 页（样本 {first}–{last}，共 {count} 个）",
    "label": "标签", "text": "文本",
}


def tr(text: str) -> str:
    """``text`` in the learner's language (unknown words stay as they are)."""
    from sampan.utils.i18n import language  # an unknown SAMPAN_LANG: English and one warning, never an error

    return _ZH.get(text, text) if language() == "zh" else text
