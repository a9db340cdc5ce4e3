"""to_static keeps the faster of compiled and eager per inference input shape, and says so in explain."""
import pytest
import torch
from torch import nn

import sampan
from sampan.jit import to_static
from sampan.jit.to_static import PathChoice


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    """Every test compiles the same Sequential.forward: start each below Dynamo's recompile limit."""
    torch._dynamo.reset()


def _net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)).eval()


def test_each_inference_shape_gets_a_measured_choice_shown_by_explain():
    net = to_static(_net())
    with torch.no_grad():
        for batch in (4, 4, 3):
            net(torch.randn(batch, 8))
    choices = net.forward.choices
    assert set(choices) == {(((4, 8), torch.float32),), (((3, 8), torch.float32),)}
    for choice in choices.values():
        assert choice.compiled_seconds > 0 and choice.eager_seconds > 0
        faster = "eager" if choice.eager_seconds < choice.compiled_seconds else "compiled"
        assert choice.path == faster          # the kept path is the one that measured faster
    text = str(sampan.jit.explain(net, torch.randn(4, 8)))
    assert "per input shape" in text and "[4, 8] float32: " in text and "[3, 8] float32: " in text


def test_the_kept_path_is_the_one_that_runs():
    def plus_one(gm, example_inputs):  # a "compiler" whose output is told apart from eager's
        def run(*args):
            return tuple(o + 1 for o in gm(*args))
        return run

    net = to_static(_net(), backend=plus_one, verify=False)
    x = torch.randn(4, 8)
    with torch.no_grad():
        net(x)                                  # compiles
        net(x)                                  # measured: a choice for this shape
        key = next(iter(net.forward.choices))
        eager = net.forward.original(x)
        net.forward.choices[key] = PathChoice("compiled", 1.0, 2.0)
        torch.testing.assert_close(net(x), eager + 1)
        net.forward.choices[key] = PathChoice("eager", 2.0, 1.0)
        torch.testing.assert_close(net(x), eager)


def test_training_calls_always_run_compiled_and_choose_nothing():
    net = to_static(_net().train(), backend="aot_eager")
    loss = net(torch.randn(4, 8)).sum()
    loss.backward()
    net(torch.randn(4, 8))
    assert net.forward.status == "compiled" and net.forward.choices == {}


def test_pick_faster_off_always_runs_compiled():
    net = to_static(_net(), pick_faster=False)
    with torch.no_grad():
        net(torch.randn(2, 8))
        net(torch.randn(2, 8))
    assert net.forward.choices == {}


def test_a_shape_kept_eager_takes_the_short_path_until_something_changes(monkeypatch):
    def plus_one(gm, example_inputs):  # compiled output told apart from eager's
        def run(*args):
            return tuple(o + 1 for o in gm(*args))
        return run

    net = to_static(_net(), backend=plus_one, verify=False)
    fn = net.forward
    x = torch.randn(4, 8)
    with torch.no_grad():
        net(x)
        net(x)
        key = next(iter(fn.choices))
        eager = fn.original(x)
        fn.choices[key] = PathChoice("eager", 2.0, 1.0)
        torch.testing.assert_close(net(x), eager)          # the full path, which remembers the shape
        full_paths = []
        real = fn._choice_key
        monkeypatch.setattr(fn, "_choice_key", lambda args: full_paths.append(1) or real(args))
        for _ in range(3):
            torch.testing.assert_close(net(x), eager)
        assert full_paths == []                            # the short path: no key built, eager ran
        net.train()                                        # training mode: never the short path
        torch.testing.assert_close(net(x), eager + 1)
        net.eval()
        net(torch.randn(3, 8))                             # another shape: the full path
        assert len(full_paths) == 2
        fn.choices[key] = PathChoice("compiled", 1.0, 2.0)  # a changed choice is seen at once
        torch.testing.assert_close(net(x), eager + 1)
    torch.testing.assert_close(net(x), eager + 1)         # with gradients: the full path (compiled here)


def _conv_net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.ReLU(), nn.Conv2d(6, 16, 5), nn.Flatten(),
                         nn.Linear(16 * 10 * 10, 4)).eval()


def test_a_cpu_conv_net_also_times_eager_with_onednn_off_and_runs_it_when_kept():
    from torch.profiler import profile

    net = to_static(_conv_net())
    x = torch.randn(1, 1, 14, 14)
    with torch.no_grad():
        net(x)
        net(x)                                             # measured: three candidates for this conv net
        key, choice = next(iter(net.forward.choices.items()))
        assert choice.onednn_off_seconds > 0
        eager = net.forward.original(x)
        off = PathChoice("eager", 2.0, 1.0, onednn_off=True, onednn_off_seconds=0.5)
        net.forward.choices[key] = off
        assert str(off) == ("eager, oneDNN off (compiled 2e+03 ms, eager 1e+03 ms, eager with oneDNN off 500 ms, "
                            "speed-up 2.00x)")
        for _ in range(2):                                 # the full path, then the short one
            with profile() as prof:
                out = net(x)
            ops = {e.name for e in prof.events()}
            assert "aten::mkldnn_convolution" not in ops and "aten::convolution" in ops, ops
            torch.testing.assert_close(out, eager, rtol=1e-4, atol=1e-5)
            assert torch._C._get_mkldnn_enabled()         # switched back on after the call
        with profile() as prof:                            # the eager module itself keeps oneDNN
            net.forward.original(x)
        assert "aten::mkldnn_convolution" in {e.name for e in prof.events()}


def test_without_convolutions_onednn_off_is_no_candidate():
    net = to_static(_net())
    with torch.no_grad():
        net(torch.randn(1, 8))
        net(torch.randn(1, 8))
    assert next(iter(net.forward.choices.values())).onednn_off_seconds is None
