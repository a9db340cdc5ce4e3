"""Checks, hints and reference solutions of the lesson compress_a_model (hidden from the notebook).

``scale_zero_point`` calls the learner's ``qparams`` on the visible range and on ranges drawn at
random (one entirely positive, one entirely negative). ``keep_sensitive_float`` runs the learner's
``keep_in_float`` on the MLP that :meth:`keep_sensitive_float.task` handed out and on hidden MLPs
whose sensitive layers (one or two, chosen at random) differ from it, so a fixed list of names fails.
"""
import copy
import math
import random

import torch
from torch import nn

from sampan.path.exercise import Exercise, Incorrect

_RNG = random.SystemRandom()  # fresh draws on every run, whatever seed the lesson set
LINEARS = ("0", "2", "4", "6")
_SIZES = (16, 48, 48, 48, 8)
_TARGET = 0.99


def _expected_qparams(x_min: float, x_max: float) -> tuple[float, float]:
    low, high = min(x_min, 0.0), max(x_max, 0.0)
    scale = (high - low) / 255
    return scale, -low / scale  # the zero point before rounding


class scale_zero_point(Exercise):
    hints = (
        {"en": "The integers 0…255 must cover the observed range, and 0.0 must land exactly on one of them: "
               "widen the range to include 0 before anything else.",
         "zh": "整数 0…255 要覆盖观测到的取值范围，而且 0.0 必须恰好落在其中一个整数上：先把范围扩展到包含 0。"},
        {"en": "x_min, x_max = min(x_min, 0), max(x_max, 0); scale = (x_max - x_min) / 255; "
               "zero_point = the int nearest to -x_min / scale.",
         "zh": "x_min, x_max = min(x_min, 0), max(x_max, 0)；scale = (x_max - x_min) / 255；"
               "zero_point = 离 -x_min / scale 最近的整数。"},
    )
    solution = '''
def qparams(x_min, x_max):
    x_min, x_max = min(x_min, 0.0), max(x_max, 0.0)   # 0.0 must be one of the levels
    scale = (x_max - x_min) / 255
    zero_point = int(round(-x_min / scale))
    return scale, zero_point
'''

    def verify(self, qparams):
        cases = [(-1.0, 3.0),
                 (-_RNG.uniform(0.05, 4.0), _RNG.uniform(0.05, 4.0)),
                 (_RNG.uniform(0.1, 1.0), _RNG.uniform(1.5, 6.0)),     # entirely positive
                 (-_RNG.uniform(1.5, 6.0), -_RNG.uniform(0.1, 1.0))]   # entirely negative
        for x_min, x_max in cases:
            shown = f"qparams({x_min:.4g}, {x_max:.4g})"
            got = qparams(x_min, x_max)
            if not isinstance(got, (tuple, list)) or len(got) != 2:
                raise Incorrect({"en": f"{shown} must return a pair (scale, zero_point), got {got!r}",
                                 "zh": f"{shown} 必须返回一对值 (scale, zero_point)，得到的是 {got!r}"})
            scale, zero_point = (float(v) for v in got)
            want_scale, exact_zero = _expected_qparams(x_min, x_max)
            if not math.isclose(scale, want_scale, rel_tol=1e-6):
                raise Incorrect({"en": f"{shown}: scale {scale:.6g} is not right (the range must include 0, "
                                       "and 255 steps span it)",
                                 "zh": f"{shown}：scale = {scale:.6g} 不对（范围必须包含 0，并由 255 个步长覆盖）"})
            if zero_point != int(zero_point) or abs(zero_point - exact_zero) > 0.5 + 1e-9:
                raise Incorrect({"en": f"{shown}: zero_point {zero_point:g} is not the integer that stands for 0.0",
                                 "zh": f"{shown}：zero_point = {zero_point:g} 不是代表 0.0 的那个整数"})


def _planted_mlp(planted: tuple[str, ...], gen: torch.Generator):
    """An MLP 16-48-48-48-8 whose ``planted`` Linear layers each have one huge weight column that
    reads an input which is always zero: harmless in float, ruinous under per-row int8."""
    layers = []
    for i, (n_in, n_out) in enumerate(zip(_SIZES, _SIZES[1:])):
        layers.append(nn.Linear(n_in, n_out))
        if i < len(_SIZES) - 2:
            layers.append(nn.ReLU())
    mlp = nn.Sequential(*layers).eval()
    with torch.no_grad():
        for p in mlp.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    probe = torch.randn(512, _SIZES[0], generator=gen)
    with torch.no_grad():
        for name in planted:
            index = int(name)
            column = int(torch.randint(0, mlp[index].in_features, (), generator=gen))
            mlp[index].weight[:, column] = 200.0
            if index == 0:
                probe[:, column] = 0.0                     # a feature the data never uses
            else:                                          # a hidden unit that never fires
                mlp[index - 2].weight[column] = 0.0
                mlp[index - 2].bias[column] = -1.0
        reference = mlp(probe).argmax(1)

    def agreement(model) -> float:
        """The share of probe inputs on which ``model`` predicts the class the float MLP predicts."""
        with torch.no_grad():
            return float((model(probe).argmax(1) == reference).float().mean())

    return mlp, agreement


def _task(planted: tuple[str, ...]):
    """A planted MLP where keeping exactly ``planted`` in float is needed and enough (drawn until so)."""
    from sampan.quantization import quantize_dynamic

    # a draw passes 22-52 % of the time (measured per planted set, 40 draws each; mostly "enough" fails): 20 tries
    # failed a test run now and then, 200 fail about once in 10^22 and cost the same on average (2-5 draws)
    for _ in range(200):
        gen = torch.Generator().manual_seed(_RNG.randrange(2**31))
        mlp, agreement = _planted_mlp(planted, gen)
        enough = agreement(quantize_dynamic(mlp, skip=list(planted))) >= 0.995
        needed = all(agreement(quantize_dynamic(mlp, skip=[n for n in planted if n != left])) < 0.9
                     for left in planted)
        if enough and needed:
            return mlp, agreement
    raise RuntimeError(f"could not draw a planted MLP for {planted}")  # our own invariant, not the learner's


def _draw_planted(count: int, avoid: set[tuple[str, ...]]) -> tuple[str, ...]:
    while True:
        planted = tuple(sorted(_RNG.sample(LINEARS, count), key=int))
        if planted not in avoid:
            return planted


class keep_sensitive_float(Exercise):
    hints = (
        {"en": "Rank the layers with sampan.quantization.sensitivity(model, agreement): it quantizes one layer "
               "at a time and reports how much agreement each one loses.",
         "zh": "用 sampan.quantization.sensitivity(model, agreement) 给各层排序：它每次只量化一层，"
               "并报告每一层让一致率下降了多少。"},
        {"en": "Walk table.ranked() (most sensitive first), appending layer names to keep until "
               "agreement(quantize_dynamic(model, skip=keep)) >= 0.99; return keep.",
         "zh": "按 table.ranked() 的顺序（最敏感的在前）逐个把层名加入 keep，直到 "
               "agreement(quantize_dynamic(model, skip=keep)) >= 0.99；返回 keep。"},
    )
    solution = '''
def keep_in_float(model, agreement):
    table = sampan.quantization.sensitivity(model, agreement)   # one layer quantized at a time
    keep = []
    for layer, _loss in table.ranked():                         # most sensitive first
        if agreement(quantize_dynamic(model, skip=keep)) >= 0.99:
            break
        keep.append(layer)
    return keep
'''

    def __init__(self, owner=None):
        super().__init__(owner)
        self._visible = None

    def task(self):
        """An MLP with one or two layers that int8 ruins (which ones is drawn at random) and its ``agreement``.

        Example:
            >>> mlp, agreement = ex.keep_sensitive_float.task()  # doctest: +SKIP
        """
        planted = _draw_planted(_RNG.choice((1, 2)), set())
        mlp, agreement = _task(planted)
        self._visible = (planted, mlp, agreement)
        return copy.deepcopy(mlp), agreement

    def verify(self, keep_in_float):
        from sampan.quantization import quantize_dynamic

        tasks = [self._visible] if self._visible is not None else []
        seen = {t[0] for t in tasks}
        for count in (1, 2, _RNG.choice((1, 2))):        # hidden MLPs, each blaming other layers
            planted = _draw_planted(count, seen)
            seen.add(planted)
            tasks.append((planted, *_task(planted)))
        for number, (planted, mlp, agreement) in enumerate(tasks, start=1):
            which = {"en": "the MLP of the lesson" if number == 1 and self._visible is not None else
                     f"hidden MLP {number}", "zh": "本课的 MLP" if number == 1 and self._visible is not None
                     else f"第 {number} 个你看不到的 MLP"}
            keep = keep_in_float(copy.deepcopy(mlp), agreement)
            if not isinstance(keep, (list, tuple)) or not all(isinstance(n, str) for n in keep):
                raise Incorrect({"en": f"keep_in_float must return a list of layer names (str), got {keep!r}",
                                 "zh": f"keep_in_float 必须返回由层名（str）组成的列表，得到的是 {keep!r}"})
            unknown = [n for n in keep if n not in LINEARS]
            if unknown:
                raise Incorrect({"en": f"{unknown} are not Linear layers of {which['en']} (its Linear layers: "
                                       f"{list(LINEARS)})",
                                 "zh": f"{unknown} 不是{which['zh']}中的 Linear 层（它的 Linear 层是 {list(LINEARS)}）"})
            score = agreement(quantize_dynamic(mlp, skip=list(keep)))
            if score < _TARGET:
                raise Incorrect({"en": f"on {which['en']}, keeping {list(keep)} in float gives agreement {score:.3f}, "
                                       f"below {_TARGET}",
                                 "zh": f"在{which['zh']}上，只把 {list(keep)} 保留为浮点，一致率为 {score:.3f}，"
                                       f"低于 {_TARGET}"})
            if len(set(keep)) > len(planted):
                raise Incorrect({"en": f"on {which['en']}, {list(keep)} keeps {len(set(keep))} layers in float; "
                                       f"{len(planted)} would be enough",
                                 "zh": f"在{which['zh']}上，{list(keep)} 把 {len(set(keep))} 层保留为浮点；"
                                       f"其实 {len(planted)} 层就够了"})
