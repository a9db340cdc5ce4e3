"""Checks, hints and reference solution of the lesson mixed_precision (hidden from the notebook).

The check trains the lesson's ``Planted`` network and networks the learner never sees, each with its
overflowing ``Linear`` at another place under another name, so a configuration written for ``Planted``
alone (``custom_black_list=["amplify"]``) does not pass, and neither does black-listing every ``Linear``.
"""
import random
import warnings

import torch

import sampan
from sampan.amp import AmpConfig, AmpNonFiniteError, auto_cast
from sampan.path.exercise import Exercise, Incorrect

_NAMES = ("stem", "mix", "proj", "expand", "body", "lift", "widen", "gate")


class _HiddenPlanted(torch.nn.Module):
    """Linear layers under random names; the one at ``hot`` has weights that overflow float16."""

    def __init__(self, names, hot):
        super().__init__()
        self.order, self.hot = list(names), hot
        sizes = [64] + [32] * len(names)
        for i, name in enumerate(names):
            self.add_module(name, torch.nn.Linear(sizes[i], sizes[i + 1]))
        self.head = torch.nn.Linear(32, 10)
        with torch.no_grad():
            getattr(self, hot).weight.fill_(3e4)

    def forward(self, x):
        x = x.flatten(1)
        for name in self.order:
            x = torch.relu(getattr(self, name)(x))
            if name == self.hot:
                x = x / 1e6  # back to a range float16 holds, for the layers after it
        return self.head(x)


def _hidden_nets(count=2):
    rng = random.Random()
    for _ in range(count):
        names = rng.sample(_NAMES, rng.randint(2, 4))
        hot = rng.choice(names)
        yield (lambda names=names, hot=hot: _HiddenPlanted(names, hot)), hot


def _data():
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(128, 1, 8, 8, generator=gen) * 16
    return torch.utils.data.TensorDataset(x, torch.randint(0, 10, (128,), generator=gen))


def _fit(make_net, amp, data):
    """One epoch at learning rate 0 (the weights stay as planted); the loss history."""
    net = make_net()
    model = sampan.Model(net)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        model.prepare(torch.optim.SGD(net.parameters(), lr=0.0), torch.nn.CrossEntropyLoss(), amp=amp, device="cpu")
    return model.fit(data, batch_size=64, epochs=1, verbose=0).history["loss"]


def _linear_dtypes(make_net, config, data):
    """The dtype each Linear returns under ``config``'s autocast, found independently of the Model."""
    net, seen = make_net(), {}
    modules = dict(net.named_modules())
    black = [modules.get(e, e) if isinstance(e, str) else e for e in config.custom_black_list]
    for name, module in modules.items():
        if isinstance(module, torch.nn.Linear):
            module.register_forward_hook(lambda m, i, out, name=name: seen.__setitem__(name, out.dtype))
    with auto_cast(dtype=config.dtype, custom_black_list=black, device_type="cpu"):
        net(data.tensors[0][:2])
    return seen


class fix_overflow(Exercise):
    hints = (
        {"en": "The doctor's error is an object, not only a message: its attributes say which module overflowed. "
               "Keep that one module, and only that one, in fp32.",
         "zh": "医生抛出的错误是一个对象，不只是一段文字：它的属性说明了是哪个模块溢出。只把这一个模块留在 fp32。"},
        {"en": "return AmpConfig(dtype=\"float16\", custom_black_list=[...]) with the qualified name the error "
               "carries in its `module` attribute.",
         "zh": "return AmpConfig(dtype=\"float16\", custom_black_list=[...])，列表里放错误对象的 `module` 属性"
               "所带的模块全名。"},
    )
    solution = '''
def fixed_config(diagnosis):
    return AmpConfig(dtype="float16", custom_black_list=[diagnosis.module])
'''

    def verify(self, fixed_config, Planted=None):
        if not callable(fixed_config):
            raise Incorrect({"en": f"fixed_config must be a function of the doctor's error, got {type(fixed_config).__name__}",
                             "zh": f"fixed_config 必须是一个以医生的错误为参数的函数，得到的是 {type(fixed_config).__name__}"})
        data = _data()
        cases = ([(Planted, "amplify")] if Planted is not None else []) + list(_hidden_nets())
        for make_net, hot in cases:
            try:
                _fit(make_net, "fp16", data)
                continue  # nothing overflowed on this draw: nothing to fix
            except AmpNonFiniteError as err:
                diagnosis = err
            config = fixed_config(diagnosis)
            if not isinstance(config, AmpConfig):
                raise Incorrect({"en": f"fixed_config(...) must return an AmpConfig, got {type(config).__name__}",
                                 "zh": f"fixed_config(...) 必须返回一个 AmpConfig，得到的是 {type(config).__name__}"})
            if config.dtype != "float16":
                raise Incorrect({"en": f"train in float16, not {config.dtype}",
                                 "zh": f"要用 float16 训练，而不是 {config.dtype}"})
            try:
                losses = _fit(make_net, config, data)
            except AmpNonFiniteError as err:
                raise Incorrect({"en": f"on a network whose module {hot!r} overflows, the loss is still not finite "
                                       f"(first at module {err.module!r})",
                                 "zh": f"在模块 {hot!r} 溢出的网络上，损失仍然不是有限值（最先出现在模块 {err.module!r}）"})
            if not all(torch.isfinite(torch.tensor(losses))):
                raise Incorrect({"en": "the loss is not finite", "zh": "损失不是有限值"})
            in_fp32 = sorted(n for n, d in _linear_dtypes(make_net, config, data).items() if d == torch.float32)
            if in_fp32 != [hot]:
                raise Incorrect({"en": f"on a network whose module {hot!r} overflows, the Linear layers in fp32 are "
                                       f"{in_fp32}: keep only the one that overflows out of float16",
                                 "zh": f"在模块 {hot!r} 溢出的网络上，以 fp32 运行的 Linear 层是 {in_fp32}："
                                       "只应让溢出的那一层留在 float16 之外"})
