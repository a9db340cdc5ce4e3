"""Checks, hints and reference solutions of the lesson tensors_and_autograd (hidden from the notebook).

Each check calls the learner's function on the visible example and on inputs drawn at random, so a
function that only handles the example does not pass.
"""
import torch

from sampan.path.exercise import Exercise, Incorrect, expect


def _random_tensors(count: int = 3):
    gen = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, ())))
    for _ in range(count):
        shape = tuple(int(s) for s in torch.randint(2, 6, (int(torch.randint(1, 4, ())),), generator=gen))
        yield torch.randn(shape, generator=gen) * 5 + 3


class normalize(Exercise):
    hints = (
        {"en": "Standardising means: subtract the mean of all elements, then divide by their standard deviation.",
         "zh": "标准化就是：减去全部元素的均值，再除以它们的标准差。"},
        {"en": "(t - t.mean()) / t.std(...) — and pass the argument that makes std the population standard deviation.",
         "zh": "(t - t.mean()) / t.std(...)——并传入让 std 成为总体标准差的参数。"},
    )
    solution = '''
def normalize(t):
    return (t - t.mean()) / t.std(unbiased=False)
'''

    def verify(self, normalize):
        for t in [torch.tensor([[1.0, 2.0], [3.0, 6.0]]), *_random_tensors()]:
            out = normalize(t.clone())
            if not isinstance(out, torch.Tensor) or out.shape != t.shape:
                raise Incorrect({"en": f"normalize(t) of shape {tuple(t.shape)} must return a tensor of the same shape",
                                 "zh": f"对形状为 {tuple(t.shape)} 的 t，normalize(t) 必须返回同形状的张量"})
            if abs(out.mean().item()) > 1e-4:
                raise Incorrect({"en": f"the mean of normalize(t) is {out.mean().item():.4g}, not 0",
                                 "zh": f"normalize(t) 的均值是 {out.mean().item():.4g}，不是 0"})
            std = out.std(unbiased=False).item()
            if abs(std - 1) > 1e-4:
                raise Incorrect({"en": f"the population standard deviation of normalize(t) is {std:.4g}, not 1"
                                       " (unbiased=True divides by n - 1)",
                                 "zh": f"normalize(t) 的总体标准差是 {std:.4g}，不是 1（unbiased=True 除以的是 n - 1）"})
            expect(out, (t - t.mean()) / t.std(unbiased=False),
                   {"en": f"normalize of a {tuple(t.shape)} tensor", "zh": f"对形状为 {tuple(t.shape)} 的张量做 normalize"},
                   atol=1e-5)


class grad_of_cube(Exercise):
    hints = (
        {"en": "Make a copy of x that records operations (requires_grad), compute (x ** 3).sum(), call backward().",
         "zh": "创建一个记录运算的 x 副本（requires_grad），计算 (x ** 3).sum()，再调用 backward()。"},
        {"en": "x = x.detach().clone().requires_grad_(True); (x ** 3).sum().backward(); return x.grad",
         "zh": "x = x.detach().clone().requires_grad_(True); (x ** 3).sum().backward(); return x.grad"},
    )
    solution = '''
def grad_of_cube(x):
    x = x.detach().clone().requires_grad_(True)
    (x ** 3).sum().backward()
    return x.grad
'''

    def verify(self, grad_of_cube):
        for x in [torch.tensor([1.0, 2.0, 3.0]), *_random_tensors()]:
            got = grad_of_cube(x.clone())
            if not isinstance(got, torch.Tensor):
                raise Incorrect({"en": f"grad_of_cube(x) must return a tensor, got {type(got).__name__}",
                                 "zh": f"grad_of_cube(x) 必须返回一个张量，得到的是 {type(got).__name__}"})
            expect(got, 3 * x ** 2, {"en": f"grad_of_cube of a {tuple(x.shape)} tensor",
                                     "zh": f"对形状为 {tuple(x.shape)} 的张量做 grad_of_cube"}, rtol=1e-4)
