"""Checks, hints and reference solutions of the lesson gan_digits (hidden from the notebook).

The losses are tried on logits drawn at random, of several shapes, against the binary cross-entropy written
out with softplus (BCE-with-logits of x against 1 is softplus(-x), against 0 it is softplus(x)); they must also
stay differentiable, since the training loop calls backward() on them. ``interpolate`` is tried on random
noise vectors of random sizes and lengths.
"""
import random

import torch
import torch.nn.functional as F

from sampan.path.exercise import Exercise, Incorrect, expect


def _random_logits(rng, count=4):
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    for _ in range(count):
        shape = rng.choice([(rng.randint(2, 64),), (rng.randint(2, 64), 1)])
        yield torch.randn(shape, generator=gen) * rng.uniform(0.5, 4)


def _scalar_loss(value, what):
    """``what``: the case, ``{"en": ..., "zh": ...}``."""
    if not isinstance(value, torch.Tensor) or value.dim() != 0:
        shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
        raise Incorrect({"en": f"{what['en']} must return a single-number tensor (a scalar loss), got {shape}",
                         "zh": f"{what['zh']}必须返回只含一个数的张量（标量损失），得到的是 {shape}"})
    if not value.requires_grad:
        raise Incorrect({"en": f"{what['en']} is cut off from the graph (no grad_fn): the training loop calls"
                               " backward() on it, so stay with tensors (no .item(), no NumPy)",
                         "zh": f"{what['zh']}与计算图断开了（没有 grad_fn）：训练循环要对它调用 backward()，"
                               "所以请全程使用张量（不要 .item()，不要 NumPy）"})


class d_loss(Exercise):
    hints = (
        {"en": "Two binary cross-entropies on logits, each averaged over its batch, then added: the real logits"
               " against the label 1, the fake logits against the label 0. `F.binary_cross_entropy_with_logits`"
               " takes a target tensor of the same shape.",
         "zh": "两个基于 logits 的二元交叉熵（binary cross-entropy），各自在批内取平均后相加：真实图像的 logits 对标签 1，"
               "生成图像的 logits 对标签 0。`F.binary_cross_entropy_with_logits` 需要一个同形状的目标张量。"},
        {"en": "F.binary_cross_entropy_with_logits(real_logits, torch.ones_like(real_logits))"
               " + F.binary_cross_entropy_with_logits(fake_logits, torch.zeros_like(fake_logits))",
         "zh": "F.binary_cross_entropy_with_logits(real_logits, torch.ones_like(real_logits))"
               " + F.binary_cross_entropy_with_logits(fake_logits, torch.zeros_like(fake_logits))"},
    )
    solution = '''
def d_loss(real_logits, fake_logits):
    return (F.binary_cross_entropy_with_logits(real_logits, torch.ones_like(real_logits))
            + F.binary_cross_entropy_with_logits(fake_logits, torch.zeros_like(fake_logits)))
'''

    def verify(self, d_loss):
        rng = random.Random()
        for real, fake in zip(_random_logits(rng), _random_logits(rng)):
            real, fake = real.requires_grad_(True), fake.requires_grad_(True)
            what = {"en": f"d_loss of real logits {tuple(real.shape)} and fake logits {tuple(fake.shape)}",
                    "zh": f"d_loss 在真实 logits 形状为 {tuple(real.shape)}、生成 logits 形状为 {tuple(fake.shape)} 时"}
            got = d_loss(real, fake)
            _scalar_loss(got, what)
            expect(got, (F.softplus(-real).mean() + F.softplus(fake).mean()).detach(), what, rtol=1e-5, atol=1e-6)


class g_loss(Exercise):
    hints = (
        {"en": "The generator wins when the discriminator calls its fakes real: one binary cross-entropy on logits,"
               " of the fake logits against the label the generator wants.",
         "zh": "当判别器把生成的图像判为真实时，生成器就赢了：对生成图像的 logits 计算一个二元交叉熵，"
               "目标是生成器想要的那个标签。"},
        {"en": "F.binary_cross_entropy_with_logits(fake_logits, torch.ones_like(fake_logits))",
         "zh": "F.binary_cross_entropy_with_logits(fake_logits, torch.ones_like(fake_logits))"},
    )
    solution = '''
def g_loss(fake_logits):
    return F.binary_cross_entropy_with_logits(fake_logits, torch.ones_like(fake_logits))
'''

    def verify(self, g_loss):
        rng = random.Random()
        for fake in _random_logits(rng):
            fake = fake.requires_grad_(True)
            what = {"en": f"g_loss of fake logits {tuple(fake.shape)}",
                    "zh": f"g_loss 在生成 logits 形状为 {tuple(fake.shape)} 时"}
            got = g_loss(fake)
            _scalar_loss(got, what)
            expect(got, F.softplus(-fake).mean().detach(), what, rtol=1e-5, atol=1e-6)


class interpolate(Exercise):
    hints = (
        {"en": "Make n mixing weights t evenly spaced from 0 to 1 (both included), one per row, and mix the two"
               " vectors with each: weight 0 gives z0, weight 1 gives z1. Broadcasting does the rest.",
         "zh": "构造 n 个从 0 到 1（两端都包含）均匀分布的混合权重 t，每行一个，用它们混合两个向量："
               "权重为 0 时得到 z0，为 1 时得到 z1。其余的交给广播机制。"},
        {"en": "t = torch.linspace(0, 1, n) as a column ([n, 1]); the rows are z0 + t * (z1 - z0).",
         "zh": "t = torch.linspace(0, 1, n) 排成一列（[n, 1]）；每一行是 z0 + t * (z1 - z0)。"},
    )
    solution = '''
def interpolate(z0, z1, n):
    t = torch.linspace(0, 1, n).unsqueeze(1)
    return (1 - t) * z0 + t * z1
'''

    def verify(self, interpolate, Z=16):
        rng = random.Random()
        gen = torch.Generator().manual_seed(rng.randrange(2**31))
        cases = [(Z, rng.randint(3, 12))] + [(rng.randint(2, 40), rng.randint(2, 12)) for _ in range(3)]
        for size, n in cases:
            z0, z1 = torch.randn(size, generator=gen), torch.randn(size, generator=gen)
            got = interpolate(z0.clone(), z1.clone(), n)
            expected = torch.stack([z0 + (k / (n - 1)) * (z1 - z0) for k in range(n)])
            expect(got, expected, {"en": f"interpolate(z0, z1, {n}) with noise vectors of size {size}",
                                   "zh": f"噪声向量长度为 {size} 时的 interpolate(z0, z1, {n})"}, rtol=1e-5, atol=1e-6)
