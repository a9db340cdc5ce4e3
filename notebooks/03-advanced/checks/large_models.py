"""Checks, hints and reference solutions of the lesson large_models (hidden from the notebook).

``merge_gradients`` runs the learner's function on networks, batches and merge factors drawn at random and
compares the gradients with the full batch's, computed here on a copy; a forward hook makes sure the batch
really went through in micro-batches. ``bubble_fraction`` is compared with a step-by-step simulation of the
GPipe schedule (no formula), ``bytes_per_rank`` with ``torch.chunk`` applied to tensors of the given shapes
on the meta device (how FSDP2 cuts a parameter along dim 0).
"""
import copy
import math
import random

import torch
from torch import nn

from sampan.path.exercise import Exercise, Incorrect, expect


def _random_mlp(rng: random.Random, inputs: int) -> nn.Sequential:
    widths = [inputs] + [rng.choice((8, 16, 32, 48)) for _ in range(rng.randint(1, 3))] + [rng.choice((3, 5, 10))]
    layers = []
    for i in range(len(widths) - 1):
        layers += [nn.Linear(widths[i], widths[i + 1]), nn.Tanh()]
    return nn.Sequential(*layers[:-1])


class merge_gradients(Exercise):
    hints = (
        {"en": "Cut x and y into k equal slices; run forward and backward on each slice without clearing the "
               "gradients in between. backward() adds into .grad. What must each slice's loss be multiplied by "
               "so that the k gradients add up to the gradient of the mean over the whole batch?",
         "zh": "把 x 和 y 切成 k 个等长的片段；对每个片段做前向和反向传播，中间不要清零梯度。backward() 会把梯度累加到 "
               ".grad 上。每个片段的损失要乘以多少，k 份梯度加起来才等于整批均值损失的梯度？"},
        {"en": "for xb, yb in zip(x.chunk(k), y.chunk(k)): (loss_fn(net(xb), yb) / k).backward()",
         "zh": "for xb, yb in zip(x.chunk(k), y.chunk(k)): (loss_fn(net(xb), yb) / k).backward()"},
    )
    solution = '''
def merge_gradients(net, loss_fn, x, y, k):
    for xb, yb in zip(x.chunk(k), y.chunk(k)):
        loss = loss_fn(net(xb), yb) / k   # each slice's mean loss weighs 1/k of the batch's mean
        loss.backward()                   # adds into .grad: no zero_grad between the slices
'''

    def verify(self, merge_gradients):
        rng = random.Random()
        for _ in range(4):
            inputs, k = rng.choice((4, 8, 16)), rng.choice((2, 3, 4, 8))
            n = k * rng.randint(2, 12)
            net = _random_mlp(rng, inputs)
            classes = net[-1].out_features
            x, y = torch.randn(n, inputs), torch.randint(0, classes, (n,))
            loss_fn = nn.CrossEntropyLoss()
            reference = copy.deepcopy(net)
            loss_fn(reference(x), y).backward()
            seen = []
            net.register_forward_pre_hook(lambda module, args: seen.append(int(args[0].shape[0])))
            before = [p.detach().clone() for p in net.parameters()]
            net.zero_grad(set_to_none=True)
            merge_gradients(net, loss_fn, x.clone(), y.clone(), k)
            case = {"en": f"a batch of {n} in k={k} micro-batches", "zh": f"{n} 个样本分成 k={k} 个微批次"}
            if not seen:
                raise Incorrect({"en": f"{case['en']}: the network was never called",
                                 "zh": f"{case['zh']}：网络一次也没有被调用"})
            if max(seen) > n // k:
                raise Incorrect({"en": f"{case['en']}: the network saw a batch of {max(seen)} samples; the point of "
                                       f"gradient merge is that it never sees more than {n // k} at once",
                                 "zh": f"{case['zh']}：网络一次处理了 {max(seen)} 个样本；梯度合并的意义就在于"
                                       f"每次不超过 {n // k} 个"})
            if any(not torch.equal(b, p) for b, p in zip(before, net.parameters())):
                raise Incorrect({"en": f"{case['en']}: the weights changed; only accumulate the gradients, the "
                                       "optimizer steps later",
                                 "zh": f"{case['zh']}：权重被改动了；这里只累积梯度，优化器之后才更新"})
            for (name, p), ref in zip(net.named_parameters(), reference.parameters()):
                if p.grad is None:
                    raise Incorrect({"en": f"{case['en']}: parameter {name} has no gradient",
                                     "zh": f"{case['zh']}：参数 {name} 没有梯度"})
                ratio = (p.grad.norm() / ref.grad.norm().clamp_min(1e-12)).item()
                if abs(ratio - 1) > 1e-3 and abs(ratio - round(ratio)) < 1e-3:
                    raise Incorrect({"en": f"{case['en']}: the gradient of {name} is {ratio:.0f} times the full "
                                           "batch's: each micro-batch's loss needs a weight",
                                     "zh": f"{case['zh']}：{name} 的梯度是整批梯度的 {ratio:.0f} 倍："
                                           "每个微批次的损失需要一个权重"})
                expect(p.grad, ref.grad, {"en": f"{case['en']}: the gradient of {name}",
                                          "zh": f"{case['zh']}：{name} 的梯度"}, rtol=1e-4, atol=1e-6)


def _gpipe_makespan(stages: int, micro: int, forward: float, backward: float) -> tuple[float, float]:
    """Simulates one GPipe step: every stage runs all forwards, then all backwards, each when its input is ready.

    Returns the step's duration and the busy time of one rank.
    """
    f_end = [[0.0] * micro for _ in range(stages)]
    b_end = [[0.0] * micro for _ in range(stages)]
    free = [0.0] * stages
    for s in range(stages):
        for m in range(micro):
            start = max(free[s], f_end[s - 1][m] if s else 0.0)
            f_end[s][m] = free[s] = start + forward
    for s in reversed(range(stages)):
        for m in range(micro):
            ready = b_end[s + 1][m] if s + 1 < stages else f_end[s][micro - 1]
            start = max(free[s], ready)
            b_end[s][m] = free[s] = start + backward
    return max(b_end[0]), micro * (forward + backward)


class bubble_fraction(Exercise):
    hints = (
        {"en": "Draw the GPipe picture for 3 stages and 2 micro-batches on squared paper, one square per forward or "
               "backward of one micro-batch. How many columns wide is the whole step, and how many squares of one "
               "row are filled?",
         "zh": "在方格纸上画出 3 个阶段、2 个微批次的 GPipe 示意图，每个微批次的一次前向或反向占一格。整个步骤一共多少列？"
               "一行里有几格是满的？"},
        {"en": "The step lasts (micro_batches + stages - 1) slots of forward+backward; each rank works in "
               "micro_batches of them. The idle share is the rest divided by the total.",
         "zh": "一个步骤持续 (micro_batches + stages - 1) 个“前向+反向”时段，每个 rank 只在其中 micro_batches 个时段里工作。"
               "空闲比例等于其余时段除以总时段。"},
    )
    solution = '''
def bubble_fraction(stages, micro_batches):
    return (stages - 1) / (micro_batches + stages - 1)
'''

    def verify(self, bubble_fraction):
        rng = random.Random()
        cases = [(2, 4), (4, 8)] + [(rng.randint(2, 8), rng.randint(1, 32)) for _ in range(4)]
        for stages, micro in cases:
            forward = rng.choice((1.0, 2.0))
            makespan, busy = _gpipe_makespan(stages, micro, forward, 2 * forward)
            expected = 1 - busy / makespan
            got = bubble_fraction(stages, micro)
            if not isinstance(got, (int, float)) and not (torch.is_tensor(got) and got.numel() == 1):
                raise Incorrect({"en": f"bubble_fraction({stages}, {micro}) must return a number, got "
                                       f"{type(got).__name__}",
                                 "zh": f"bubble_fraction({stages}, {micro}) 必须返回一个数，得到的是 {type(got).__name__}"})
            expect(float(got), expected, f"bubble_fraction(stages={stages}, micro_batches={micro})", rtol=1e-6)


def _random_shapes(rng: random.Random) -> list[tuple[int, ...]]:
    shapes = []
    for _ in range(rng.randint(2, 5)):
        out, inp = rng.randint(1, 300), rng.randint(1, 300)
        shapes += [(out, inp), (out,)]
    if rng.random() < 0.5:
        shapes.append((rng.randint(1, 9), rng.randint(1, 9), 3, 3))  # a convolution's weight
    return shapes


def _rank0_numel(shapes, world_size: int, strategy: str) -> int:
    total = 0
    for shape in shapes:
        t = torch.empty(shape, device="meta")
        total += (t.chunk(world_size, dim=0)[0] if strategy == "fsdp" else t).numel()
    return total


class bytes_per_rank(Exercise):
    hints = (
        {"en": "Count the fp32 tensors a rank keeps per parameter with Adam right after backward (the parameter, "
               "its gradient, two moment buffers). DDP keeps them whole; FSDP2 cuts each along dim 0 into "
               "world_size pieces, and rank 0 gets the first, largest piece.",
         "zh": "数一数使用 Adam 时，反向传播刚结束，每个参数在一个 rank 上对应几个 fp32 张量（参数本身、梯度、两个矩估计缓冲区）。"
               "DDP 保存完整的张量；FSDP2 沿第 0 维把每个张量切成 world_size 份，rank 0 拿到第一份、也是最大的一份。"},
        {"en": "4 tensors x 4 bytes x elements; for fsdp a shape (d0, *rest) leaves ceil(d0 / world_size) * prod(rest) "
               "elements on rank 0 (math.ceil, math.prod).",
         "zh": "4 个张量 x 4 字节 x 元素个数；fsdp 时形状 (d0, *rest) 在 rank 0 上留下 ceil(d0 / world_size) * prod(rest) "
               "个元素（math.ceil、math.prod）。"},
    )
    solution = '''
import math

def bytes_per_rank(shapes, world_size, strategy):
    elements = 0
    for shape in shapes:
        rows = shape[0] if strategy == "ddp" else math.ceil(shape[0] / world_size)
        elements += rows * math.prod(shape[1:])
    return 4 * 4 * elements   # parameter + gradient + Adam's two moments, 4 bytes each
'''

    def verify(self, bytes_per_rank, shapes=None):
        rng = random.Random()
        cases = [(list(shapes), 2)] if shapes else []
        cases += [(_random_shapes(rng), rng.choice((2, 3, 4, 8))) for _ in range(4)]
        for case_shapes, world in cases:
            for strategy in ("ddp", "fsdp"):
                expected = 16 * _rank0_numel(case_shapes, world, strategy)
                got = bytes_per_rank([tuple(s) for s in case_shapes], world, strategy)
                what = {"en": f"bytes_per_rank({len(case_shapes)} shapes, world_size={world}, {strategy!r})",
                        "zh": f"bytes_per_rank（{len(case_shapes)} 个形状，world_size={world}，{strategy!r}）"}
                if isinstance(got, (int, float)) and got and math.isclose(got / expected, 0.5, rel_tol=1e-9):
                    raise Incorrect({"en": f"{what['en']} is half the expected bytes: did you count the gradient and "
                                           "both of Adam's moment buffers beside the parameter?",
                                     "zh": f"{what['zh']}只有应有字节数的一半：除了参数本身，梯度和 Adam 的两个矩估计缓冲区都算上了吗？"})
                expect(got, expected, what)
