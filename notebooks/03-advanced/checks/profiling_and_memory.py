"""Checks, hints and reference solutions of the lesson profiling_and_memory (hidden from the notebook).

``activation_mib`` is compared with what autograd really saves (counted with ``saved_tensors_hooks``) on the
lesson's network and on networks of shapes drawn at random; ``no_leak`` runs the learner's ``collect`` on
random networks and batches and looks for an autograd graph left on what it returns.
"""
import random

import torch
from torch import nn

from sampan.path.exercise import Exercise, Incorrect


def _random_mlp(rng):
    widths = [rng.choice((32, 64, 128, 256, 512)) for _ in range(rng.randint(2, 4))] + [rng.choice((2, 10))]
    layers = []
    for i in range(len(widths) - 1):
        layers += [nn.Linear(widths[i], widths[i + 1]), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def _what(value):
    return f"a {type(value).__name__} of {len(value)}" if isinstance(value, (list, tuple)) else type(value).__name__


def _saved_mib(net, batch_size):
    """MiB that autograd saves for backward in ``net``'s forward pass (each tensor once, weights excluded)."""
    params = {p.data_ptr() for p in net.parameters()}
    seen, total = set(), 0

    def pack(t):
        nonlocal total
        if t.data_ptr() not in params and t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            total += t.numel() * t.element_size()
        return t

    first = next(m for m in net.modules() if isinstance(m, nn.Linear))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        net(torch.randn(batch_size, first.in_features))
    return total / 2**20


class activation_mib(Exercise):
    hints = (
        {"en": "Walk over the layers and ask which tensor each one keeps for backward; count the values per "
               "sample, then multiply by the batch size and 4 bytes.",
         "zh": "逐层遍历，问一问每一层为反向传播保存了哪个张量；先数出每个样本的数值个数，再乘以批大小和 4 个字节。"},
        {"en": "batch_size * sum(m.in_features for m in net if isinstance(m, nn.Linear)) * 4 / 2**20",
         "zh": "batch_size * sum(m.in_features for m in net if isinstance(m, nn.Linear)) * 4 / 2**20"},
    )
    solution = '''
def activation_mib(net, batch_size):
    values_per_sample = sum(m.in_features for m in net if isinstance(m, nn.Linear))
    return batch_size * values_per_sample * 4 / 2**20
'''

    def verify(self, activation_mib, net=None):
        rng = random.Random()
        cases = [(net, 512)] if net is not None else []
        cases += [(_random_mlp(rng), rng.choice((16, 100, 256, 1000))) for _ in range(3)]
        for case_net, batch in cases:
            shape = " → ".join(str(m.out_features) for m in case_net if isinstance(m, nn.Linear))
            got = activation_mib(case_net, batch)
            if not isinstance(got, (int, float)) and not (isinstance(got, torch.Tensor) and got.numel() == 1):
                raise Incorrect({"en": f"activation_mib must return a number, got {type(got).__name__}",
                                 "zh": f"activation_mib 必须返回一个数，得到的是 {type(got).__name__}"})
            measured = _saved_mib(case_net, batch)
            if abs(float(got) / measured - 1) > 0.1:
                raise Incorrect({"en": f"for a network of {case_net[0].in_features} inputs → {shape} at batch {batch}, "
                                       f"autograd saves {measured:.3g} MiB; your estimate is {float(got):.3g} MiB",
                                 "zh": f"对输入为 {case_net[0].in_features}、各层输出为 {shape} 的网络，批大小 {batch} 时"
                                       f"自动微分保存了 {measured:.3g} MiB；你的估计是 {float(got):.3g} MiB"})


class no_leak(Exercise):
    hints = (
        {"en": "Part 2 fixed the same loop: the outputs you keep must not carry their autograd graph.",
         "zh": "第 2 部分修好的正是同样的循环：你保存的输出不能带着它的计算图。"},
        {"en": "with torch.no_grad(): return [forward(b) for b in batches]   (or .detach() each output)",
         "zh": "with torch.no_grad(): return [forward(b) for b in batches]（或者对每个输出调用 .detach()）"},
    )
    solution = '''
@torch.no_grad()
def collect(forward, batches):
    return [forward(b) for b in batches]
'''

    def verify(self, collect):
        rng = random.Random()
        for _ in range(3):
            net = _random_mlp(rng)
            batches = [torch.randn(rng.randint(1, 64), net[0].in_features) for _ in range(rng.randint(2, 5))]
            got = collect(net, batches)
            if not isinstance(got, (list, tuple)) or len(got) != len(batches):
                raise Incorrect({"en": f"collect(forward, batches) with {len(batches)} batches must return a list of "
                                       f"{len(batches)} outputs, got {_what(got)}",
                                 "zh": f"对 {len(batches)} 个批次，collect(forward, batches) 必须返回包含 "
                                       f"{len(batches)} 个输出的列表，得到的是 {_what(got)}"})
            for i, (out, batch) in enumerate(zip(got, batches)):
                if not isinstance(out, torch.Tensor):
                    raise Incorrect({"en": f"output {i} must be a tensor, got {type(out).__name__}",
                                     "zh": f"第 {i} 个输出必须是张量，得到的是 {type(out).__name__}"})
                if out.grad_fn is not None or out.requires_grad:
                    raise Incorrect({"en": f"output {i} still holds its autograd graph (grad_fn={type(out.grad_fn).__name__}): "
                                           "it keeps every activation of its batch alive",
                                     "zh": f"第 {i} 个输出仍然带着计算图（grad_fn={type(out.grad_fn).__name__}）："
                                           "它让这一批的所有激活值都无法释放"})
                with torch.no_grad():
                    expected = net(batch)
                if out.shape != expected.shape or not torch.allclose(out, expected, atol=1e-6):
                    raise Incorrect({"en": f"output {i} is not forward(batch {i}): the values must stay the same",
                                     "zh": f"第 {i} 个输出不等于 forward(第 {i} 个批次)：数值必须保持不变"})
