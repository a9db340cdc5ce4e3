"""Checks, hints and reference solutions of the lesson from_paddle (hidden from the notebook).

The check builds optimizers with the learner's function for several learning rates and momenta (some drawn
at random), then trains a small linear model a few steps with each and compares the weights with Paddle's
Momentum update computed by hand: velocity = momentum * velocity + grad; param -= learning_rate * velocity.
"""
import random

import torch

from sampan.path.exercise import Exercise, Incorrect, expect


def _paddle_momentum_steps(weight, bias, x, y, learning_rate, momentum, steps):
    """Paddle's ``Momentum`` (use_nesterov=False, no weight decay), written out by hand."""
    params = [weight.clone(), bias.clone()]
    velocity = [torch.zeros_like(p) for p in params]
    for _ in range(steps):
        w, b = (p.clone().requires_grad_(True) for p in params)
        loss = ((x @ w.T + b - y) ** 2).mean()
        grads = torch.autograd.grad(loss, [w, b])
        velocity = [momentum * v + g for v, g in zip(velocity, grads)]
        params = [p - learning_rate * v for p, v in zip(params, velocity)]
    return params


class momentum_optimizer(Exercise):
    hints = (
        {"en": "Paddle's Momentum is plain gradient descent with a velocity term. torch names its optimizers after"
               " the base algorithm and turns the velocity on with an argument; the parameters come first and the"
               " step size is called lr.",
         "zh": "飞桨的 Momentum 就是带有速度项的普通梯度下降。torch 以基础算法为优化器命名，用一个参数打开速度项；"
               "参数放在第一个位置，步长叫 lr。"},
        {"en": "return torch.optim.SGD(parameters, lr=..., momentum=...) with the function's own arguments.",
         "zh": "用函数自己的参数，return torch.optim.SGD(parameters, lr=..., momentum=...)。"},
    )
    solution = '''
def momentum_optimizer(parameters, learning_rate, momentum):
    return torch.optim.SGD(parameters, lr=learning_rate, momentum=momentum)
'''

    def verify(self, momentum_optimizer):
        rng = random.Random()
        cases = [(0.01, 0.9)] + [(10 ** rng.uniform(-3, -1), rng.uniform(0.5, 0.99)) for _ in range(3)]
        for learning_rate, momentum in cases:
            gen = torch.Generator().manual_seed(rng.randrange(2**31))
            net = torch.nn.Linear(rng.randint(2, 6), rng.randint(1, 3))
            with torch.no_grad():
                for p in net.parameters():
                    p.copy_(torch.randn(p.shape, generator=gen))
            start = [p.detach().clone() for p in net.parameters()]
            opt = momentum_optimizer(net.parameters(), learning_rate, momentum)
            what = f"momentum_optimizer(net.parameters(), {learning_rate:.4g}, {momentum:.3g})"
            if not isinstance(opt, torch.optim.Optimizer):
                raise Incorrect({"en": f"{what} must return a torch optimizer, got {type(opt).__name__}",
                                 "zh": f"{what} 必须返回一个 torch 优化器，得到的是 {type(opt).__name__}"})
            held = {id(p) for group in opt.param_groups for p in group["params"]}
            if held != {id(p) for p in net.parameters()}:
                raise Incorrect({"en": f"the optimizer of {what} does not hold exactly the parameters it was given",
                                 "zh": f"{what} 返回的优化器没有恰好持有传给它的那些参数"})
            x = torch.randn(16, net.in_features, generator=gen)
            y = torch.randn(16, net.out_features, generator=gen)
            for _ in range(3):
                opt.zero_grad()
                ((net(x) - y) ** 2).mean().backward()
                opt.step()
            expected = _paddle_momentum_steps(*start, x, y, learning_rate, momentum, steps=3)
            got = [p.detach() for p in net.parameters()]
            try:
                expect(got, expected, {"en": f"the weights after 3 steps of {what}", "zh": f"{what} 走 3 步之后的权重"},
                       rtol=1e-4, atol=1e-6)
            except Incorrect:
                raise Incorrect({"en": f"3 steps with {type(opt).__name__} from {what} do not move the weights as"
                                       " Paddle's Momentum does (velocity = momentum * velocity + grad;"
                                       " weight -= learning_rate * velocity)",
                                 "zh": f"用 {what} 返回的 {type(opt).__name__} 走 3 步，权重的变化与飞桨的 Momentum 不同"
                                       "（velocity = momentum * velocity + grad；weight -= learning_rate * velocity）"}) from None
