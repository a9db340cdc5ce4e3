"""``callbacks.VisualDL`` writes TensorBoard event files that TensorBoard's own reader opens."""
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import sampan
from sampan.callbacks import VisualDL
from sampan.metric import Accuracy


def read_scalars(log_dir) -> dict[str, list[tuple[int, float]]]:
    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_visualdl_writes_train_epoch_and_eval_scalars(blobs, mlp, tmp_path, one_thread):
    train, val = blobs
    net = mlp()
    model = sampan.Model(net)
    model.prepare(torch.optim.Adam(net.parameters(), lr=1e-2), torch.nn.CrossEntropyLoss(), Accuracy())
    history = model.fit(train, val, epochs=2, batch_size=64, verbose=0, log_freq=1,
                        callbacks=VisualDL(tmp_path / "vdl"))  # one callback, not a list, as Paddle allows
    scalars = read_scalars(tmp_path / "vdl")
    assert [s for s, _ in scalars["train/loss"]] == list(range(1, 7))  # 3 batches x 2 epochs
    assert [s for s, _ in scalars["epoch/loss"]] == [1, 2]
    assert [v for _, v in scalars["epoch/loss"]] == pytest.approx(history["loss"])
    assert [v for _, v in scalars["eval/acc"]] == pytest.approx(history["eval_acc"])
    assert "train/acc" in scalars and "train/lr" in scalars

    model.evaluate(val, verbose=0, callbacks=[VisualDL(tmp_path / "standalone")])
    standalone = read_scalars(tmp_path / "standalone")
    assert set(standalone) == {"evaluate/loss", "evaluate/acc"} and standalone["evaluate/acc"][0][0] == 1
    # into fit's folder: its own curve, so fit's eval/acc keeps one point per epoch (steps 1, 2 were overlaid)
    model.evaluate(val, verbose=0, callbacks=[VisualDL(tmp_path / "vdl")])
    together = read_scalars(tmp_path / "vdl")
    assert [s for s, _ in together["eval/acc"]] == [1, 2] and [s for s, _ in together["evaluate/acc"]] == [1]


def test_visualdl_log_freq_and_bad_value(tmp_path):
    with pytest.raises(ValueError, match=r"Expected `log_freq` to be an int >= 1. Received: log_freq=0"):
        VisualDL(tmp_path, log_freq=0)
