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


def sgd_model(mlp, seed=0):
    net = mlp(seed=seed)
    model = sampan.Model(net)
    model.prepare(torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9), torch.nn.CrossEntropyLoss())
    return model


def test_a_checkpoint_of_another_optimizer_is_refused_naming_both(blobs, mlp, tmp_path):
    sgd = sgd_model(mlp)
    sgd.fit(blobs[0], epochs=1, verbose=0)
    path = sgd.save(tmp_path / "sgd")
    adam, _ = build(mlp, seed=3)
    before = weights(adam)
    with pytest.raises(CheckpointError, match=r"checkpoint's optimizer is SGD, the prepared one is Adam.*"
                                              r"HINT: .*model\.load\(path, reset_optimizer=True\)"):
        adam.load(path)
    assert all(torch.equal(v, before[k]) for k, v in weights(adam).items())  # nothing half-loaded
    assert adam._optimizer.param_groups[0]["lr"] == 1e-2 and "betas" in adam._optimizer.param_groups[0]

    payload = torch.load(path, weights_only=True)  # a checkpoint that does not name its optimizer class
    del payload["optimizer_class"]
    torch.save(payload, tmp_path / "old.pt")
    with pytest.raises(CheckpointError, match=r"settings differ from the prepared Adam's \(checkpoint only: "
                                              r"\['dampening', 'momentum', 'nesterov'\]"):
        adam.load(tmp_path / "old")

    adam.load(path, reset_optimizer=True)  # the weights only
    assert all(torch.equal(v, weights(sgd)[k]) for k, v in weights(adam).items())
    assert adam._optimizer.param_groups[0]["lr"] == 1e-2 and adam._optimizer.param_groups[0]["betas"] == (0.9, 0.999)


def test_resume_auto_skips_a_truncated_newest_checkpoint_and_a_stray_file(blobs, mlp, tmp_path):
    model, _ = build(mlp)
    model.fit(blobs[0], epochs=2, verbose=0, save_dir=tmp_path)
    (tmp_path / "final.pt").unlink()
    newest = tmp_path / "2.pt"
    newest.write_bytes(newest.read_bytes()[:300])  # killed while writing epoch 2
    stray = tmp_path / "notes.pt"
    stray.write_text("not a checkpoint\n")
    os.utime(stray, (newest.stat().st_mtime + 5,) * 2)  # the newest file of all
    resumed, _ = build(mlp, seed=4)
    with pytest.warns(RuntimeWarning, match=r"skipped 2 unreadable file\(s\).*notes\.pt \(.*is not a checkpoint.*"
                                            r"2\.pt \(.*corrupt or truncated.*Resuming from 1\.pt \(epoch 1\)"):
        history = resumed.fit(blobs[0], epochs=3, verbose=0, save_dir=tmp_path, resume="auto")
    assert history.epoch == [0, 1, 2] and resumed.epoch == 3  # epoch 0 from 1.pt, as a straight run


def test_resume_auto_with_only_unreadable_files_says_so(blobs, mlp, tmp_path):
    (tmp_path / "model.pt").write_text("hello")
    model, _ = build(mlp)
    with pytest.raises(CheckpointError, match=r"found no readable checkpoint in .*model\.pt.*HINT: remove or move"):
        model.fit(blobs[0], epochs=1, verbose=0, save_dir=tmp_path, resume="auto")


def test_orphan_temporary_files_of_killed_writes_are_removed(blobs, mlp, tmp_path):
    orphan = tmp_path / ".1.pt.k2j3h4.tmp"
    orphan.write_bytes(b"half a checkpoint")
    os.utime(orphan, (orphan.stat().st_mtime - 3600,) * 2)
    fresh = tmp_path / ".1.pt.x9y8z7.tmp"  # a write still in progress (in another process)
    fresh.write_bytes(b"being written")
    model, _ = build(mlp)
    model.fit(blobs[0], epochs=1, verbose=0, save_dir=tmp_path)
    assert not orphan.exists() and fresh.exists()


def test_a_checkpoint_without_its_model_entry(mlp, tmp_path):
    torch.save({"format": "sampan.checkpoint", "epoch": 3, "optimizer": None}, tmp_path / "ckpt.pt")
    model, _ = build(mlp)
    with pytest.raises(CheckpointError, match=r"has no `model` entry.*entries are \['epoch', 'format', 'optimizer'\]"):
        model.load(tmp_path / "ckpt")


def test_fit_says_when_the_checkpoint_is_already_past_epochs(blobs, mlp, tmp_path):
    model, _ = build(mlp)
    model.fit(blobs[0], epochs=3, verbose=0, save_dir=tmp_path)
    again, _ = build(mlp)
    with pytest.warns(UserWarning, match=r"fit\(epochs=2, resume='auto'\) has nothing to train: the checkpoint .* "
                                         r"is already at epoch 3, and `epochs` counts all epochs.*HINT: pass epochs=5"):
        again.fit(blobs[0], epochs=2, verbose=0, save_dir=tmp_path, resume="auto")
    assert again.epoch == 3 and again.global_step == model.global_step
    with pytest.warns(UserWarning, match="nothing to train") as caught:
        again.fit(blobs[0], epochs=2, verbose=0, save_dir=tmp_path, resume="auto")
    assert caught[0].filename == __file__  # the warning names the line that called fit


def test_files_that_are_not_checkpoints_never_get_the_advice_to_load_unsafely(tmp_path):
    import numpy as np

    from sampan.hapi.checkpoint import read_state_dict

    np.save(tmp_path / "array.npy", np.zeros(3))
    (tmp_path / "text.pt").write_text("hello")
    (tmp_path / "empty.pt").write_bytes(b"")
    torch.save({"fraction": __import__("fractions").Fraction(1, 3)}, tmp_path / "pickled.pt")
    torch.save([1, 2], tmp_path / "list.pt")
    for name, expected in (("array.npy", "is not a checkpoint"), ("text.pt", "is not a checkpoint"),
                           ("empty.pt", "corrupt or truncated"), ("pickled.pt", "safe loading .* refuses"),
                           ("list.pt", "holds neither a Sampan checkpoint nor a state_dict")):
        with pytest.raises(CheckpointError, match=expected) as err:
            read_state_dict(tmp_path / name)
        assert "weights_only=False" not in str(err.value) and "weights_only` set to `False" not in str(err.value)
    net = torch.nn.Linear(2, 2)
    torch.save(net.state_dict(), tmp_path / "bare.pt")
    assert torch.equal(read_state_dict(tmp_path / "bare.pt")["weight"], net.weight)


def test_a_checkpoint_of_the_same_optimizer_from_an_older_torch_still_loads(blobs, mlp, tmp_path):
    model, _ = build(mlp)
    model.fit(blobs[0], epochs=1, verbose=0)
    payload = torch.load(model.save(tmp_path / "ckpt"), weights_only=True)
    for group in payload["optimizer"]["param_groups"]:  # a setting this torch has and an older one lacked
        group.pop("decoupled_weight_decay")
    for drop_class in (False, True):
        if drop_class:
            del payload["optimizer_class"]
        torch.save(payload, tmp_path / "older.pt")
        other, _ = build(mlp, seed=2)
        other.load(tmp_path / "older")
        assert other.global_step == model.global_step and other._optimizer.state_dict()["state"]


def test_a_checkpoint_resumes_in_the_other_memory_layout_with_a_fused_optimizer(tmp_path):
    # A fused Adam walks a weight and its moments as flat memory: moments saved with channels-last weights (a
    # to_static run's choice, or the user's) and loaded beside NCHW weights would be mixed up silently.
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(32, 2, 8, 8, generator=gen), torch.randint(0, 3, (32,), generator=gen)

    def build(layout):
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                  torch.nn.Flatten(), torch.nn.Linear(4 * 4 * 4, 3)).to(memory_format=layout)
        model = sampan.Model(net)
        model.prepare(torch.optim.Adam(net.parameters(), lr=1e-2, fused=True), torch.nn.CrossEntropyLoss())
        return model

    saver = build(torch.channels_last)
    for _ in range(3):
        saver.train_batch([x], [y])
    saver.save(tmp_path / "ckpt")
    resumed = {}
    for name, layout in (("channels_last", torch.channels_last), ("nchw", torch.contiguous_format)):
        model = build(layout)
        model.load(tmp_path / "ckpt")
        conv = model.network[0].weight
        assert conv.is_contiguous(memory_format=layout)
        for key in ("exp_avg", "exp_avg_sq"):
            state = model._optimizer.state[conv][key]
            assert state.stride() == conv.stride(), (name, key)
            torch.testing.assert_close(state, saver._optimizer.state[saver.network[0].weight][key], rtol=0, atol=0)
        for _ in range(3):
            model.train_batch([x], [y])
        resumed[name] = model.network[0].weight.detach()
    # The same training, in two layouts: equal up to the convolutions' float rounding (mixed moments: about 1e-2).
    torch.testing.assert_close(resumed["nchw"], resumed["channels_last"], rtol=1e-4, atol=1e-5)
