"""Checks, hints and reference solution of the lesson custom_cpp_operator (hidden from the notebook).

The exercise asks for the derivative of Mish, ``x * tanh(softplus(x))``, written as a formula: the check
calls the learner's function with autograd switched off (``torch.inference_mode``), on the visible points
and on tensors drawn at random, and compares with the gradient autograd computes here, independently.
"""
import torch
import torch.nn.functional as F

from sampan.path.exercise import Exercise, Incorrect, expect


def _cases():
    """The visible points, then hidden tensors of random shape, scale and dtype."""
    yield torch.linspace(-4, 4, 9)
    gen = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, ())))
    for dtype in (torch.float32, torch.float64, torch.float64):
        shape = tuple(int(s) for s in torch.randint(2, 7, (int(torch.randint(1, 4, (), generator=gen)),), generator=gen))
        yield (torch.randn(shape, generator=gen, dtype=torch.float64) * 4).to(dtype)


def _autograd_mish_grad(x: torch.Tensor) -> torch.Tensor:
    with torch.enable_grad():
        leaf = x.detach().to(torch.float64).requires_grad_(True)
        (grad,) = torch.autograd.grad(F.mish(leaf).sum(), leaf)
    return grad.to(x.dtype)


class mish_grad(Exercise):
    hints = (
        {"en": "Mish is x times g(x) with g = tanh(softplus(x)): use the product rule, then the chain rule for g. "
               "softplus(x) = log(1 + exp(x)) has the derivative sigmoid(x).",
         "zh": "Mish 是 x 乘以 g(x)，其中 g = tanh(softplus(x))：先用乘积法则，再对 g 用链式法则。"
               "softplus(x) = log(1 + exp(x)) 的导数是 sigmoid(x)。"},
        {"en": "t = torch.tanh(F.softplus(x)); the answer is t + x * (...) * torch.sigmoid(x), where (...) is the "
               "derivative of tanh at softplus(x), written with t alone.",
         "zh": "令 t = torch.tanh(F.softplus(x))；答案是 t + x * (...) * torch.sigmoid(x)，其中 (...) 是 tanh 在 "
               "softplus(x) 处的导数，只用 t 就能写出来。"},
    )
    solution = '''
def mish_grad(x):
    t = torch.tanh(F.softplus(x))
    return t + x * (1 - t * t) * torch.sigmoid(x)
'''

    def verify(self, mish_grad):
        for x in _cases():
            try:
                with torch.inference_mode():  # a backward kernel has no autograd to lean on: neither does the check
                    got = mish_grad(x.clone())
            except RuntimeError as err:
                if "grad" not in str(err):
                    raise
                raise Incorrect({"en": f"your code used autograd ({err}); autograd is off in this check: "
                                       "write the derivative as a formula of x",
                                 "zh": f"你的代码用了自动微分（{err}）；这个检查关闭了自动微分：请把导数写成 x 的公式"})
            if not isinstance(got, torch.Tensor) or got.shape != x.shape:
                raise Incorrect({"en": f"mish_grad(x) for x of shape {tuple(x.shape)} must return a tensor of that shape, "
                                       f"got {type(got).__name__} {tuple(getattr(got, 'shape', ()))}",
                                 "zh": f"对形状为 {tuple(x.shape)} 的 x，mish_grad(x) 必须返回同形状的张量，"
                                       f"得到的是 {type(got).__name__} {tuple(getattr(got, 'shape', ()))}"})
            tol = 1e-4 if x.dtype == torch.float32 else 1e-8
            expect(got.to(torch.float64), _autograd_mish_grad(x).to(torch.float64),
                   {"en": f"mish_grad of a {x.dtype} tensor of shape {tuple(x.shape)}",
                    "zh": f"对形状为 {tuple(x.shape)} 的 {x.dtype} 张量做 mish_grad"}, rtol=tol, atol=tol)
