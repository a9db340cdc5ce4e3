"""Model.prepare(amp=...): one loop, loss scale in the logs, O2 checkpoints, the NaN doctor."""
import pytest
import torch

import sampan
from sampan.amp import AmpConfig, AmpNonFiniteError
from sampan.amp import PrecisionPlugin


@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32) / 16.0
    y = torch.tensor(d.target)
    ds = torch.utils.data.TensorDataset
    return ds(x[:1400], y[:1400]), ds(x[1400:], y[1400:])


def _train(digits, amp, epochs=4):
    sampan.seed_everything(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    model = sampan.Model(net)
    model.prepare(torch.optim.Adam(net.parameters(), 3e-3), torch.nn.CrossEntropyLoss(), sampan.metric.Accuracy(),
                  amp=amp, device="cpu")
    history = model.fit(digits[0], batch_size=64, epochs=epochs, verbose=0, log_freq=5)
    return model, history, model.evaluate(digits[1], verbose=0)


def test_bf16_trains_digits_to_within_one_point_of_fp32(digits):
    _, _, fp32 = _train(digits, None)
    model, history, bf16 = _train(digits, "bf16")
    assert fp32["acc"] > 0.85
    assert abs(bf16["acc"] - fp32["acc"]) <= 0.01, (bf16, fp32)
    assert history.history["loss_scale"][-1] == 1.0 and history.history["skipped_steps"][-1] == 0
    assert model._precision.dtype == torch.bfloat16


def test_amp_off_uses_the_do_nothing_precision(digits):
    model, history, _ = _train(digits, None, epochs=1)
    assert type(model._precision) is PrecisionPlugin
    assert "loss_scale" not in history.history and model._precision.callbacks() == []


def test_fp16_reports_loss_scale_and_o2_checkpoint_resumes_with_master_weights(digits, tmp_path):
    model, history, _ = _train(digits, AmpConfig(dtype="float16", level="O2", init_loss_scaling=2.0**20), epochs=1)
    assert model.network[0].weight.dtype == torch.float16
    assert history.history["loss_scale"][-1] <= 2.0**20
    masters = [p.detach().clone() for p in model._optimizer.param_groups[0]["params"]]
    assert all(m.dtype == torch.float32 for m in masters)
    model.save(tmp_path / "o2")
    other, _, _ = _train(digits, AmpConfig(dtype="float16", level="O2"), epochs=1)
    with torch.no_grad():
        for p in other._optimizer.param_groups[0]["params"]:
            p.zero_()
    other.load(tmp_path / "o2")
    for saved, loaded in zip(masters, other._optimizer.param_groups[0]["params"]):
        assert torch.equal(saved, loaded)
    assert other._precision.scaler.get_scale() == model._precision.scaler.get_scale()


def test_bad_amp_value_is_refused():
    net = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match=r"Expected `amp` to be None, 'bf16', 'fp16'.*Received: amp='int4'"):
        sampan.Model(net).prepare(torch.optim.SGD(net.parameters(), 0.1), torch.nn.MSELoss(), amp="int4")


class Planted(torch.nn.Module):
    """Finite in fp32; the `blow` layer overflows float16 (max 65504)."""

    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear(8, 16)
        self.blow = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 3)
        with torch.no_grad():
            self.blow.weight.fill_(3e4)

    def forward(self, x):
        return self.head(self.blow(torch.relu(self.inp(x))) / 1e6)


def _planted_fit(amp):
    sampan.seed_everything(0)
    data = torch.utils.data.TensorDataset(torch.rand(32, 8), torch.randint(0, 3, (32,)))
    net = Planted()
    model = sampan.Model(net)
    model.prepare(torch.optim.SGD(net.parameters(), 0.0), torch.nn.CrossEntropyLoss(), amp=amp, device="cpu")
    return model.fit(data, batch_size=16, verbose=0)


def test_nan_doctor_names_the_module_that_overflowed():
    with pytest.raises(AmpNonFiniteError, match=r"(?s)First non-finite output: module 'blow' \(Linear\); in fp32 "
                                                r"the same batch is finite.*Loss-scale history.*65536.*"
                                                r"custom_black_list=\['blow'\]") as info:
        _planted_fit("fp16")
    err = info.value
    assert err.module == "blow" and err.finite_in_fp32 is True and err.step == 0
    assert err.loss_scale_history[0] == (0, 65536.0)
    assert isinstance(err, sampan.errors.NonFiniteLossError)


def test_following_the_doctors_advice_fixes_the_planted_case():
    history = _planted_fit(AmpConfig(dtype="float16", custom_black_list=["blow"]))
    assert torch.isfinite(torch.tensor(history.history["loss"])).all()


def test_a_fit_has_one_nan_check_the_doctor_under_amp_or_the_users_own(digits):
    from sampan.amp import NanDoctor
    from sampan.callbacks import TerminateOnNaN

    def nan_checks(model):
        return [c for c in model._callbacks if isinstance(c, TerminateOnNaN)]

    small = torch.utils.data.Subset(digits[0], range(128))
    net = torch.nn.Linear(64, 10)
    model = sampan.Model(net)
    model.prepare(torch.optim.SGD(net.parameters(), 0.1), torch.nn.CrossEntropyLoss(), amp="bf16", device="cpu")
    model.fit(small, batch_size=64, verbose=0)
    (check,) = nan_checks(model)
    assert isinstance(check, NanDoctor)
    mine = TerminateOnNaN(raise_error=False)
    model.fit(small, batch_size=64, verbose=0, callbacks=[mine])
    assert nan_checks(model) == [mine]
    plain = sampan.Model(net)
    plain.prepare(torch.optim.SGD(net.parameters(), 0.1), torch.nn.CrossEntropyLoss(), device="cpu")
    plain.fit(small, batch_size=64, verbose=0)
    assert [type(c) for c in nan_checks(plain)] == [TerminateOnNaN]
