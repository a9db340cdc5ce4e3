"""Checks, hints and reference solutions of the lesson training_craft (hidden from the notebook).

Each check calls the learner's function on the lesson's own case and on cases drawn at random, so a
function that only handles the visible case (or reads the notebook's WARMUP / TOTAL) does not pass.
"""
import math
import random

from sampan.path.exercise import Exercise, Incorrect, expect


def _warmup_cosine(step, warmup, total):
    if step < warmup:
        return step / warmup
    return 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))


class warmup_cosine(Exercise):
    hints = (
        {"en": "Two pieces. Before `warmup` the multiplier is a straight line through 0 and 1; after it, the fraction"
               " of the remaining steps already done (0 → 1) goes into half a cosine wave that falls from 1 to 0.",
         "zh": "分两段。`warmup` 之前，倍数是一条从 0 升到 1 的直线；之后，把剩余步数中已完成的比例（从 0 到 1）"
               "代入半个从 1 降到 0 的余弦波。"},
        {"en": "if step < warmup: return step / warmup; otherwise progress = (step - warmup) / (total - warmup)"
               " and the multiplier is 0.5 * (1 + math.cos(math.pi * progress)).",
         "zh": "若 step < warmup，返回 step / warmup；否则令 progress = (step - warmup) / (total - warmup)，"
               "倍数为 0.5 * (1 + math.cos(math.pi * progress))。"},
    )
    solution = '''
def warmup_cosine(step, warmup, total):
    if step < warmup:
        return step / warmup
    progress = (step - warmup) / (total - warmup)
    return 0.5 * (1 + math.cos(math.pi * progress))
'''

    def verify(self, warmup_cosine):
        rng = random.Random()
        cases = [(10, 100)] + [(w, w + rng.randint(5, 150)) for w in (rng.randint(1, 30) for _ in range(3))]
        for warmup, total in cases:
            for step in range(total + 1):
                got = warmup_cosine(step, warmup, total)
                expect(got, _warmup_cosine(step, warmup, total),
                       f"warmup_cosine({step}, warmup={warmup}, total={total})", atol=1e-6)


def _best_epoch(losses):
    return min(range(len(losses)), key=lambda i: (losses[i], i)) + 1


class best_epoch(Exercise):
    hints = (
        {"en": "Find the position of the smallest value in the list, then remember that epochs are counted from 1"
               " while Python counts positions from 0. When two epochs tie, the earlier one is the best.",
         "zh": "找出列表中最小值所在的位置；别忘了轮次（epoch）从 1 开始数，而 Python 的位置从 0 开始。"
               "两个轮次并列时，取较早的那个。"},
        {"en": "losses.index(min(losses)) gives the 0-based position of the first minimum; add 1.",
         "zh": "losses.index(min(losses)) 给出第一个最小值从 0 开始的位置；再加 1。"},
    )
    solution = '''
def best_epoch(losses):
    return losses.index(min(losses)) + 1
'''

    def verify(self, best_epoch, eval_losses=None, stopper_best=None):
        rng = random.Random()
        cases = [list(eval_losses)] if eval_losses else []
        for _ in range(4):
            n = rng.randint(3, 25)
            cases.append([round(rng.uniform(0.05, 2.0), 3) for _ in range(n)])
        tie = [round(rng.uniform(0.5, 2.0), 3) for _ in range(8)]
        low = min(tie) / 2
        first = rng.randint(1, 4)
        tie[first] = tie[first + 3] = low  # two epochs share the lowest loss: the earlier one is the best
        cases.append(tie)
        for losses in cases:
            got = best_epoch(list(losses))
            if isinstance(got, bool) or not isinstance(got, int) and not hasattr(got, "__index__"):
                raise Incorrect({"en": f"best_epoch must return an int, got {type(got).__name__} {got!r}",
                                 "zh": f"best_epoch 必须返回一个整数，得到的是 {type(got).__name__} {got!r}"})
            expect(int(got), _best_epoch(losses), {"en": f"best_epoch of {len(losses)} losses {_short(losses)}",
                                                   "zh": f"{len(losses)} 个损失值 {_short(losses)} 的 best_epoch"})
        if eval_losses and stopper_best is not None and _best_epoch(list(eval_losses)) != stopper_best:
            raise Incorrect({"en": f"EarlyStopping says epoch {stopper_best}: are these the losses of its run?",
                             "zh": f"EarlyStopping 给出的是第 {stopper_best} 轮：这些是它那次训练的损失吗？"})


def _short(losses):
    text = ", ".join(f"{v:g}" for v in losses[:6])
    return f"[{text}{', ...' if len(losses) > 6 else ''}]"
