"""prepare(to_static=True) for training: the loss curve of eager training, exact resume, a measured path that
leaves no trace, and the build passes (fused optimizer, channels-last) said in explain."""
import pytest
import torch
from torch import nn

import sampan
from sampan.callbacks import LRScheduler
from sampan.jit.to_static import _layout_of
from sampan.jit.training import align_optimizer_state, fuse_optimizer


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()


def _cnn(seed=0):
    """The digits CNN of `sampan bench fit`, with batch norm and dropout (state a probe must not disturb)."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.2), nn.Linear(32 * 16, 64), nn.ReLU(),
                         nn.Linear(64, 10))


@pytest.fixture(scope="module")
def digits():
    from sampan.data import load_dataset

    data = load_dataset("digits", "train")
    x = torch.stack([data[i][0] for i in range(320)])
    y = torch.tensor([int(data[i][1]) for i in range(320)])
    return torch.utils.data.TensorDataset(x, y)


def _model(to_static, seed=0, lr=1e-3):
    net = _cnn(seed)
    opt = torch.optim.Adam(net.parameters(), lr)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    model = sampan.Model(net)
    # on the CPU, also on a GPU machine: the layout is a candidate for a CNN on the CPU only, and a resume is
    # bitwise only where the kernels are deterministic
    model.prepare(opt, nn.CrossEntropyLoss(), to_static=to_static, device="cpu")
    return model, sched


class _Losses(sampan.callbacks.Callback):
    def __init__(self):
        self.losses = []

    def on_train_batch_end(self, step, logs=None):
        self.losses.append(logs["loss"])


def test_static_training_follows_the_eager_loss_curve(digits):
    curves = {}
    for static in (False, True):
        sampan.seed_everything(0)
        model, _ = _model(static)
        losses = _Losses()
        model.fit(digits, epochs=2, batch_size=32, verbose=0, callbacks=[losses])
        curves[static] = torch.tensor(losses.losses)
    assert len(curves[True]) == 20
    # the same data order and dropout masks (the probe put the generator back): float rounding only
    torch.testing.assert_close(curves[True], curves[False], rtol=1e-3, atol=1e-4)
    assert curves[True][-1] < 0.85 * curves[True][0]  # and it learns


def test_the_training_path_is_measured_kept_and_said(digits, capsys):
    model, _ = _model(True)
    static = model.network.forward
    assert static.first_training_step_waits
    model.fit(digits, epochs=2, batch_size=32, verbose=1)
    assert not static.first_training_step_waits
    # evaluation at other batch sizes (a frozen graph, then a dynamic one) after the probe timed both layouts of a
    # network whose first convolution reads one channel: the probe put that weight back in NCHW strides too
    assert model.evaluate(digits, batch_size=48, verbose=0)["loss"] > 0
    bars = capsys.readouterr().err
    # the bar says why the first step takes seconds, in the first epoch only
    assert bars.count("to_static: compiling and timing the first step") == 1, bars
    assert "Epoch 1/2" in bars and "Epoch 2/2" in bars
    choice = static.train_choice
    assert choice.compiled_seconds > 0 and choice.eager_seconds > 0
    assert choice.path == ("eager" if choice.eager_seconds < choice.compiled_seconds else "compiled")
    assert choice.layout in ("contiguous", "channels_last") and _layout_of(model.network) == choice.layout
    assert static.training_passes == ["fused Adam"]
    assert model._optimizer.param_groups[0]["fused"] is True
    text = str(sampan.jit.explain(model.network, torch.randn(2, 1, 8, 8)))
    assert f"training: {choice.path}, {choice.layout.replace('_', '-')} layout (compiled " in text
    assert "to_static training also uses: fused Adam" in text


def test_the_probe_leaves_batch_norm_gradients_and_the_generator_as_they_were():
    net = sampan.jit.to_static(_cnn())
    twin = _cnn()
    x = torch.randn(32, 1, 8, 8)
    torch.manual_seed(7)
    out = net(x)  # the first training call compiles
    torch.manual_seed(7)
    expected = twin(x)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
    out.sum().backward()
    expected.sum().backward()
    grads = [p.grad.clone() for p in net.parameters()]
    torch.manual_seed(8)
    out = net(x)  # the second measures both paths first (forward and backward, several times each)
    after = torch.rand(3)
    torch.manual_seed(8)
    expected = twin(x)
    assert net.forward.train_choice is not None
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)  # the same dropout mask: generator put back
    assert torch.equal(after, torch.rand(3))  # and left where one forward leaves it
    torch.testing.assert_close(net[1].running_mean, twin[1].running_mean)  # two updates, not two plus the probes'
    assert int(net[1].num_batches_tracked) == int(twin[1].num_batches_tracked) == 2
    for grad, param in zip(grads, net.parameters()):
        assert torch.equal(param.grad, grad)  # gradients accumulated so far are untouched


def test_the_probe_leaves_an_inputs_gradient_alone():
    net = sampan.jit.to_static(_cnn())
    x = torch.randn(8, 1, 8, 8, requires_grad=True)  # adversarial training asks for the input's gradient
    net(x)
    out = net(x)  # measures both paths first, each with a backward reaching x
    assert net.forward.train_choice is not None and x.grad is None
    out.sum().backward()
    assert x.grad is not None


def test_a_compiled_layout_that_fails_in_the_probe_is_dropped_with_a_warning(monkeypatch):
    """torch 2.11 ran the NCHW training graph on channels-last weights (no recompile) and failed its stride check:
    that candidate must drop out, not stop training."""
    from sampan.jit.to_static import StaticFunction

    run_compiled = StaticFunction._run_compiled

    def picky(self, args, kwargs, **kw):
        if _layout_of(self.layer) == "channels_last":
            raise AssertionError("expected size 16==16, stride 1==9 at dim=1")
        return run_compiled(self, args, kwargs, **kw)

    monkeypatch.setattr(StaticFunction, "_run_compiled", picky)
    net = sampan.jit.to_static(_cnn())
    x = torch.randn(8, 1, 8, 8)
    with pytest.warns(RuntimeWarning, match=r"compiled training step in the channels-last layout failed "
                                            r"\(AssertionError: expected size 16==16"):
        net(x)
    choice = net.forward.train_choice
    assert choice is not None and (choice.path, choice.layout) != ("compiled", "channels_last")
    net(x).sum().backward()  # and training goes on, on the kept path
    assert all(p.grad is not None for p in net.parameters())


@pytest.mark.parametrize("path,layout", [("compiled", "channels_last"), ("eager", "contiguous"),
                                         ("eager", "channels_last")])
def test_resume_under_to_static_gives_bitwise_the_weights_of_a_straight_run(digits, tmp_path, path, layout):
    def build(seed=0):
        model, sched = _model(True, seed=seed, lr=1e-2)
        return model, sched

    chosen = {"path": path, "compiled_seconds": 1.0, "eager_seconds": 1.0, "layout": layout}  # as if measured so
    sampan.seed_everything(0)
    straight, sched = build()
    straight.network.forward.set_train_choice(chosen)
    straight.fit(digits, epochs=3, batch_size=32, verbose=0, callbacks=[LRScheduler(sched)])

    sampan.seed_everything(0)
    first, sched = build()
    first.network.forward.set_train_choice(chosen)
    first.fit(digits, epochs=2, batch_size=32, verbose=0, save_dir=tmp_path, callbacks=[LRScheduler(sched)])

    sampan.seed_everything(123)
    resumed, sched = build(seed=5)
    resumed.fit(digits, epochs=3, batch_size=32, verbose=0, save_dir=tmp_path, resume="auto",
                callbacks=[LRScheduler(sched)])
    assert resumed.network.forward.train_choice.path == path  # taken from the checkpoint, not measured again
    assert _layout_of(resumed.network) == layout
    assert resumed._optimizer.param_groups[0]["fused"] is True
    for (name, a), b in zip(straight.network.state_dict().items(), resumed.network.state_dict().values()):
        assert torch.equal(a, b), name


def test_fuse_optimizer_keeps_the_object_and_refuses_what_has_no_fused_kernel():
    net = nn.Linear(4, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    assert fuse_optimizer(opt) == "fused SGD"
    net(torch.randn(3, 4)).sum().backward()
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] == 0.05  # the scheduler still drives the same optimizer
    assert fuse_optimizer(torch.optim.RMSprop(net.parameters())) is None
    assert fuse_optimizer(None) is None


def test_optimizer_state_follows_the_weights_layout_or_fused_adam_goes_wrong():
    def train(layout_change, align):
        torch.manual_seed(0)
        conv = nn.Conv2d(3, 8, 3)
        opt = torch.optim.Adam(conv.parameters(), 0.1, fused=True)
        x = torch.randn(2, 3, 8, 8)
        for i in range(3):
            opt.zero_grad()
            conv(x).square().sum().backward()
            opt.step()
            if i == 0 and layout_change:
                conv.to(memory_format=torch.channels_last)
                if align:
                    assert align_optimizer_state(opt) == 2  # the two moments of the weight
        return conv.weight.detach()

    reference = train(False, False)
    torch.testing.assert_close(train(True, True), reference)
    assert not torch.allclose(train(True, False), reference, atol=1e-3)  # what align prevents: silently wrong
