"""auto_cast: torch.autocast with Paddle's white and black lists."""
import warnings

import pytest
import torch

from sampan.amp import auto_cast


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.norm = torch.nn.LayerNorm(8)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.head(self.norm(self.fc(x)).softmax(-1))


def _dtypes(net, x, **kwargs):
    seen = {}
    hooks = [m.register_forward_hook(lambda m, i, o, n=n: seen.__setitem__(n, (i[0].dtype, o.dtype)))
             for n, m in net.named_children()]
    with auto_cast(device_type="cpu", **kwargs):
        out = net(x)
    for h in hooks:
        h.remove()
    return seen, out


def test_bf16_on_cpu_runs_linear_layers_in_bfloat16():
    seen, out = _dtypes(Block(), torch.randn(4, 8), dtype="bfloat16")
    assert seen["fc"][1] == torch.bfloat16 and out.dtype == torch.bfloat16


@pytest.mark.parametrize("entry", ["head", "Linear", torch.nn.Linear])
def test_black_list_keeps_a_module_in_fp32(entry):
    net = Block()
    entry = net.head if entry == "head" else entry
    seen, out = _dtypes(net, torch.randn(4, 8), dtype="bfloat16", custom_black_list=[entry])
    assert seen["head"] == (torch.float32, torch.float32)
    assert out.dtype == torch.float32
    if entry is net.head:
        assert seen["fc"][1] == torch.bfloat16  # only the named module is excluded


def test_black_listed_op_runs_in_fp32_and_white_listed_op_in_low_precision():
    x = torch.randn(4, 8)
    with auto_cast(device_type="cpu", custom_black_list=["matmul"], custom_white_list=["softmax"]):
        assert (x @ x.T).dtype == torch.float32
        assert torch.matmul(x, x.T).dtype == torch.float32
        assert torch.softmax(x, -1).dtype == torch.bfloat16
        assert torch.nn.functional.linear(x, x).dtype == torch.bfloat16
    with auto_cast(device_type="cpu"):
        assert torch.softmax(x, -1).dtype == torch.float32  # autocast's own choice without the list


def test_hooks_are_gone_after_the_context_and_disabled_context_is_a_no_op():
    before = len(torch.nn.modules.module._global_forward_pre_hooks)
    with auto_cast(device_type="cpu", custom_black_list=["LayerNorm"]):
        assert len(torch.nn.modules.module._global_forward_pre_hooks) == before + 1
    assert len(torch.nn.modules.module._global_forward_pre_hooks) == before
    with auto_cast(enable=False, device_type="cpu"):
        assert Block()(torch.randn(2, 8)).dtype == torch.float32


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match=r"Expected `dtype` to be 'bfloat16' or 'float16'.*Received: dtype='int8'"):
        with auto_cast(dtype="int8"):
            pass
    with pytest.raises(ValueError, match=r"Expected `level` to be 'O0'.*Received: level='O3'"):
        with auto_cast(level="O3"):
            pass
    with pytest.raises(ValueError, match=r"custom_white_list.*modules can only be black-listed"):
        with auto_cast(device_type="cpu", custom_white_list=[torch.nn.Linear]):
            pass


def test_paddle_op_names_map_to_torch_ops():
    x = torch.randn(4, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a mapped name warns about nothing
        with auto_cast(device_type="cpu", custom_black_list=["matmul_v2", "elementwise_add"]):
            assert (x @ x.T).dtype == torch.float32
            assert torch.nn.functional.linear(x, x).dtype == torch.float32  # Paddle's Linear runs matmul_v2
            assert (x.bfloat16() + x.bfloat16()).dtype == torch.float32
        with auto_cast(device_type="cpu", custom_white_list=["reduce_mean"]):
            assert x.mean().dtype == torch.bfloat16


@pytest.mark.parametrize("argument", ["custom_black_list", "custom_white_list"])
def test_unknown_op_names_are_dropped_with_a_warning_naming_them(argument):
    x = torch.randn(4, 8)
    with pytest.warns(UserWarning, match=rf"auto_cast ignores \['linera'\] in `{argument}`.*HINT: check the spelling"):
        with auto_cast(device_type="cpu", **{argument: ["linera", "softmax"]}):
            assert torch.nn.functional.linear(x, x).dtype == torch.bfloat16
            expected = torch.float32 if argument == "custom_black_list" else torch.bfloat16
            assert torch.softmax(x.bfloat16(), -1).dtype == expected  # the known name still applies
