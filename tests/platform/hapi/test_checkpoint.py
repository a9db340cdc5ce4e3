"""Checkpoints: atomic, safe to load, exactly resumable, clear when wrong."""
import os

import pytest
import torch

import sampan
from sampan.callbacks import LRScheduler
from sampan.errors import CheckpointError
from sampan.metric import Accuracy


def build(mlp, seed=0):
    net = mlp(seed=seed, dropout=0.2)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    model = sampan.Model(net)
    model.prepare(opt, torch.nn.CrossEntropyLoss(), Accuracy())
    return model, sched


def weights(model):
    return {k: v.clone() for k, v in model.network.state_dict().items()}


def test_resume_gives_bitwise_the_same_weights_as_a_straight_run(blobs, mlp, tmp_path):
    train, val = blobs
    sampan.seed_everything(0)
    straight, sched = build(mlp)
    straight.fit(train, val, epochs=4, verbose=0, callbacks=[LRScheduler(sched)])

    sampan.seed_everything(0)
    first, sched = build(mlp)
    first.fit(train, val, epochs=2, verbose=0, save_dir=tmp_path, callbacks=[LRScheduler(sched)])

    sampan.seed_everything(123)  # a different RNG state: resume must restore the saved one
    resumed, sched = build(mlp, seed=5)
    history = resumed.fit(train, val, epochs=4, verbose=0, save_dir=tmp_path, resume="auto",
                          callbacks=[LRScheduler(sched)])
    assert resumed.epoch == 4 and history.epoch == [0, 1, 2, 3]
    assert history["lr"] == [0.01, 0.005, 0.0025, 0.00125]
    ref = weights(straight)
    for name, value in weights(resumed).items():
        assert torch.equal(value, ref[name]), name
    assert sorted(os.listdir(tmp_path)) == ["1.pt", "2.pt", "3.pt", "4.pt", "final.pt"]


def test_save_writes_everything_and_loads_with_weights_only(blobs, mlp, tmp_path):
    model, _ = build(mlp)
    model.fit(blobs[0], epochs=1, verbose=0)
    path = model.save(tmp_path / "ckpt")
    assert path.name == "ckpt.pt"
    payload = torch.load(path, weights_only=True)
    assert {"model", "optimizer", "epoch", "global_step", "rng", "callbacks", "precision"} <= set(payload)
    assert payload["epoch"] == 1 and payload["global_step"] == 6
    other, _ = build(mlp, seed=9)
    other.load(tmp_path / "ckpt")
    assert all(torch.equal(a, b) for a, b in zip(weights(model).values(), weights(other).values()))
    assert other.global_step == 6


def test_a_failed_write_leaves_the_previous_checkpoint_intact(blobs, mlp, tmp_path, monkeypatch):
    model, _ = build(mlp)
    good = model.save(tmp_path / "ckpt")
    before = good.read_bytes()

    def exploding_save(obj, f, *a, **k):
        with open(f, "wb") as fh:
            fh.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", exploding_save)
    with pytest.raises(OSError, match="disk full"):
        model.save(tmp_path / "ckpt")
    assert good.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]  # no temporary file left behind


def test_truncated_checkpoint(mlp, tmp_path):
    model, _ = build(mlp)
    path = model.save(tmp_path / "ckpt")
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(CheckpointError, match=r"corrupt or truncated.*HINT: .*earlier checkpoint"):
        model.load(path)


def test_missing_checkpoint_lists_what_is_there(mlp, tmp_path):
    model, _ = build(mlp)
    model.save(tmp_path / "3")
    with pytest.raises(CheckpointError, match=r"does not exist\. Checkpoints in .*\['3.pt'\]"):
        model.load(tmp_path / "final")


def test_checkpoint_of_another_network(mlp, tmp_path):
    model, _ = build(mlp)
    path = model.save(tmp_path / "ckpt")
    other_net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Dropout(), torch.nn.Linear(32, 3),
                                    torch.nn.Linear(3, 2))
    other = sampan.Model(other_net)
    other.prepare(torch.optim.SGD(other_net.parameters(), 0.1), torch.nn.CrossEntropyLoss())
    with pytest.raises(CheckpointError, match=r"belongs to another network(.|\n)*skip_mismatch=True") as err:
        other.load(path)
    assert err.value.unexpected == [] and err.value.missing == ["4.weight", "4.bias"]
    assert ("3.weight", (2, 32), (3, 32)) in err.value.mismatched
    other.load(path, skip_mismatch=True, reset_optimizer=True)
    assert torch.equal(other_net[0].weight, model.network[0].weight)
    assert other_net[3].weight.shape == (3, 32)


def test_unsafe_pickle_is_refused(tmp_path, mlp):
    import collections
    bad = tmp_path / "bad.pt"
    torch.save({"format": "sampan.checkpoint", "model": collections.OrderedDict(), "x": __import__("fractions").Fraction(1, 3)}, bad)
    model, _ = build(mlp)
    with pytest.raises(CheckpointError, match=r"safe loading \(weights_only=True\) refuses"):
        model.load(bad)
