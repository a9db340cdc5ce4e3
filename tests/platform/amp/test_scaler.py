"""GradScaler with Paddle's names, and decorate (O2) with fp32 master weights."""
import pytest
import torch

from sampan.amp import GradScaler, auto_cast, decorate


def test_paddle_argument_names_map_to_torch():
    s = GradScaler(init_loss_scaling=1024, incr_ratio=3.0, decr_ratio=0.25, incr_every_n_steps=5, device="cpu")
    state = s.state_dict()
    assert (state["scale"], state["growth_factor"], state["backoff_factor"], state["growth_interval"]) == \
        (1024.0, 3.0, 0.25, 5)
    assert s.get_loss_scaling() == 1024.0 and s.is_enable()
    assert not GradScaler(enable=False, device="cpu").is_enabled()


def test_an_overflow_skips_the_step_and_backs_off_the_scale():
    net = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    scaler = GradScaler(init_loss_scaling=1024, decr_ratio=0.25, device="cpu")
    before = net.weight.detach().clone()
    scaler.scale(net(torch.ones(1, 2)).sum() * float("inf")).backward()
    scaler.minimize(opt)
    assert torch.equal(net.weight, before)
    assert scaler.get_loss_scaling() == 256.0


def test_unsupported_paddle_options_are_refused_with_a_reason():
    with pytest.raises(ValueError, match=r"use_dynamic_loss_scaling.*always scales dynamically"):
        GradScaler(use_dynamic_loss_scaling=False, device="cpu")
    with pytest.raises(ValueError, match=r"decr_every_n_nan_or_inf"):
        GradScaler(decr_every_n_nan_or_inf=2, device="cpu")


def test_decorate_makes_half_parameters_keeps_norms_fp32_and_steps_fp32_masters():
    net = torch.nn.Sequential(torch.nn.Linear(4, 4, bias=False), torch.nn.LayerNorm(4))
    with torch.no_grad():
        net[0].weight.fill_(1.0)
    opt = torch.optim.SGD(net.parameters(), lr=1e-4)
    net, opt = decorate(net, opt, level="O2", dtype="bfloat16")
    assert net[0].weight.dtype == torch.bfloat16 and net[1].weight.dtype == torch.float32
    assert all(p.dtype == torch.float32 for p in opt.param_groups[0]["params"])
    scaler = GradScaler(enable=False, device="cpu")
    for _ in range(100):  # each update (1e-4) is below bf16's resolution at 1.0 (2**-7)
        net[0].weight.grad = torch.full((4, 4), -1.0, dtype=torch.bfloat16)
        scaler.step(opt)
        opt.zero_grad()
    master = opt.param_groups[0]["params"][0]
    assert master[0, 0].item() == pytest.approx(1.01, abs=1e-4)  # the master kept every small update
    assert net[0].weight[0, 0].item() == pytest.approx(1.0078125)  # the bf16 copy is the rounded master
    plain = torch.ones((), dtype=torch.bfloat16)
    assert (plain + 1e-4).item() == 1.0  # without masters every update would be lost


def test_o2_forward_runs_with_autocast():
    net = decorate(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4)), dtype="bfloat16")
    with auto_cast(level="O2", dtype="bfloat16", device_type="cpu"):
        out = net(torch.randn(3, 4))
    assert torch.isfinite(out).all() and net[1].weight.dtype == torch.float32


def _decorated_bf16(seed=0):
    torch.manual_seed(seed)
    net = torch.nn.Linear(4, 1)
    return decorate(net, torch.optim.SGD(net.parameters(), lr=0.5), level="O2", dtype="bfloat16")


def test_decorate_bf16_trains_with_a_plain_optimizer_step():
    """Paddle's bf16 O2 recipe: decorate, then backward and optimizer.step() with no scaler."""
    net, opt = _decorated_bf16()
    torch.manual_seed(1)
    x, y = torch.randn(64, 4), torch.randn(64, 1)
    losses = []
    for _ in range(20):
        with auto_cast(dtype="bfloat16", device_type="cpu", level="O2"):
            loss = ((net(x.bfloat16()).float() - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        master = opt.param_groups[0]["params"][0]
        assert torch.equal(net.weight, master.detach().to(torch.bfloat16))  # copied back after each step
        assert net.weight.grad is None and master.grad is not None             # the gradient moved
    assert losses[-1] < 0.7 * losses[0]


def test_decorate_hooks_and_grad_scaler_move_each_gradient_once():
    plain_net, plain_opt = _decorated_bf16()
    scaled_net, scaled_opt = _decorated_bf16()
    scaler = GradScaler(init_loss_scaling=8.0, device="cpu")
    x = torch.randn(8, 4)
    for _ in range(3):
        for net, opt, use_scaler in ((plain_net, plain_opt, False), (scaled_net, scaled_opt, True)):
            opt.zero_grad()
            loss = net(x.bfloat16()).float().pow(2).mean()
            if use_scaler:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
    torch.testing.assert_close(scaled_opt.param_groups[0]["params"][0], plain_opt.param_groups[0]["params"][0])
    torch.testing.assert_close(scaled_net.weight, plain_net.weight)
    decorate(torch.nn.Linear(2, 2), plain_opt, dtype="bfloat16")  # a second decorate adds no second hook
    assert len(plain_opt._optimizer_step_pre_hooks) == 1 and len(plain_opt._optimizer_step_post_hooks) == 1
