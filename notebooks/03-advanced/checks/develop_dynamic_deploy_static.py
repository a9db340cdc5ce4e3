"""Checks, hints and reference solution of the lesson develop_dynamic_deploy_static (hidden from the notebook).

``FixedClipLeNet`` is run with the lesson's trained weights and with random ones, on inputs drawn at random
(scaled test images and noise) for which the clip really cuts some logits; its outputs are compared with the
clip computed here from LeNet's own forward pass, so an unclipped network never passes, and
``sampan.jit.explain`` must find a single graph.
"""
import random

import torch

import sampan
from sampan.path.exercise import Exercise, Incorrect
from sampan.vision.models import LeNet


def _clipped(net, x):
    """What ClipLeNet computes, without its graph break: LeNet's logits clamped at 3 x their mean magnitude."""
    logits = LeNet.forward(net, x)
    bound = logits.abs().mean() * 3
    return logits, torch.clamp(logits, -bound, bound)


def _batch(images, rng):
    """A batch of test images scaled up (raw 0-255 pixels and beyond), or of noise."""
    size = rng.randint(2, 16)
    if images is not None and rng.random() < 0.6:
        pick = torch.tensor(rng.sample(range(len(images)), min(size, len(images))))
        return images[pick] * rng.uniform(5.0, 100.0)
    return torch.rand(size, 1, 28, 28) * rng.uniform(1.0, 255.0)


def _cut_batches(net, images, rng, count=3, tries=60):
    """Up to ``count`` batches on which the clip cuts at least one of ``net``'s logits."""
    found = []
    for _ in range(tries):
        x = _batch(images, rng)
        with torch.no_grad():
            raw, expected = _clipped(net, x)
        if (raw != expected).any():
            found.append(x)
            if len(found) == count:
                break
    return found


class fix_graph_break(Exercise):
    hints = (
        {"en": "The graph breaks where a tensor becomes a Python number. Keep the bound a tensor all the way.",
         "zh": "计算图在张量变成 Python 数值的地方断开。让边界值从头到尾都保持为张量。"},
        {"en": "bound = logits.abs().mean() * 3 (no .item()), then torch.clamp(logits, -bound, bound).",
         "zh": "bound = logits.abs().mean() * 3（不要 .item()），再调用 torch.clamp(logits, -bound, bound)。"},
    )
    solution = '''
class FixedClipLeNet(LeNet):
    def forward(self, x):
        logits = super().forward(x)
        bound = logits.abs().mean() * 3
        return torch.clamp(logits, -bound, bound)
'''

    def verify(self, FixedClipLeNet, state_dict=None, images=None):
        if not (isinstance(FixedClipLeNet, type) and issubclass(FixedClipLeNet, torch.nn.Module)):
            raise Incorrect({"en": f"FixedClipLeNet must be a class (a LeNet subclass), got {FixedClipLeNet!r}",
                             "zh": f"FixedClipLeNet 必须是一个类（LeNet 的子类），得到的是 {FixedClipLeNet!r}"})
        rng = random.Random()
        weights = ([("the lesson's trained weights", state_dict)] if state_dict is not None else []) + \
                  [("random weights", None), ("other random weights", None)]
        tested = 0
        for what, state in weights:
            net = FixedClipLeNet().eval()
            if state is not None:
                net.load_state_dict(state)
            batches = _cut_batches(net, images, rng)
            for _ in range(10):  # random weights whose logits never reach the bound: draw others
                if batches or state is not None:
                    break
                net = FixedClipLeNet().eval()
                batches = _cut_batches(net, images, rng)
            for x in batches:
                tested += 1
                with torch.no_grad():
                    got = net(x)
                    raw, expected = _clipped(net, x)
                if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
                    raise Incorrect({"en": f"with {what}, FixedClipLeNet must return logits of shape {tuple(expected.shape)}",
                                     "zh": f"使用{_zh(what)}时，FixedClipLeNet 必须返回形状为 {tuple(expected.shape)} 的 logits"})
                if not torch.allclose(got, expected, rtol=1e-5, atol=1e-5):
                    cut = int((raw != expected).sum())
                    raise Incorrect({"en": f"with {what}, on a batch of {len(x)} images where the clip cuts {cut} logit(s), "
                                           f"the outputs differ from ClipLeNet's by up to {(got - expected).abs().max():.3g}",
                                     "zh": f"使用{_zh(what)}时，在一批 {len(x)} 张、截断了 {cut} 个 logits 的图像上，"
                                           f"输出与 ClipLeNet 最多相差 {(got - expected).abs().max():.3g}"})
        if not tested:  # nothing reached the bound: nothing was tested; say so rather than pass
            raise Incorrect({"en": "the check found no input that the clip cuts; run it again",
                             "zh": "检查没有找到会被截断的输入；请再运行一次"})
        report = sampan.jit.explain(FixedClipLeNet().eval(), x)
        if not report.ok:
            raise Incorrect({"en": f"the outputs are right, but the graph still breaks "
                                   f"({report.graph_break_count} break(s)): print sampan.jit.explain(...) to see where",
                             "zh": f"输出正确，但计算图仍然断开（{report.graph_break_count} 处）："
                                   "打印 sampan.jit.explain(...) 看看断在哪里"})


def _zh(what):
    return {"the lesson's trained weights": "本课训练好的权重", "random weights": "随机权重",
            "other random weights": "另一组随机权重"}[what]
