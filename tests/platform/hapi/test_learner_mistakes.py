"""Mistakes a newcomer makes with Model, callbacks, transforms and text models get an error that names the
argument, the value and the fix, raised before any training time is spent or any file is half written."""
import numpy as np
import pytest
import torch
from torch.utils.data import TensorDataset

import sampan
from sampan import callbacks as C


def prepared(net, loss=None, **kw):
    model = sampan.Model(net)
    model.prepare(torch.optim.SGD(net.parameters(), lr=0.1), loss or torch.nn.CrossEntropyLoss(), **kw)
    return model


def test_loss_class_instead_of_instance():
    net = torch.nn.Linear(16, 2)
    with pytest.raises(TypeError, match=r"`loss`.*CrossEntropyLoss.*HINT: .*CrossEntropyLoss\(\)"):
        sampan.Model(net).prepare(torch.optim.SGD(net.parameters(), lr=0.1), torch.nn.CrossEntropyLoss)


def test_network_class_instead_of_instance():
    with pytest.raises(TypeError, match=r"`network`.*HINT: create the network first.*Linear\(\.\.\.\)"):
        sampan.Model(torch.nn.Linear)


@pytest.mark.parametrize("pair", [
    [torch.randn(16, 16), torch.randint(0, 2, (16,))],
    (np.random.rand(16, 16).astype("float32"), np.zeros(16, dtype=np.int64)),
])
def test_fit_on_inputs_and_labels_as_a_pair(pair, mlp):
    with pytest.raises(TypeError, match=r"`train_data`.*\(inputs, labels\).*HINT: .*TensorDataset"):
        prepared(mlp()).fit(pair, verbose=0)


def test_a_list_of_samples_is_still_a_dataset(mlp):
    samples = [(torch.randn(16), 1), (torch.randn(16), 0)] * 4
    history = prepared(mlp()).fit(samples, batch_size=4, verbose=0)
    assert len(history.history["loss"]) == 1


@pytest.mark.parametrize("verbose", ["yes", 1.5, None])
def test_verbose_of_the_wrong_type(verbose, blobs, mlp):
    with pytest.raises(ValueError, match=r"`verbose`.*0, 1 or 2.*HINT"):
        prepared(mlp()).fit(blobs[0], verbose=verbose)


def test_load_none(mlp):
    with pytest.raises(ValueError, match=r"`path`.*Received: path=None.*HINT"):
        prepared(mlp()).load(None)


def test_callback_class_instead_of_instance(blobs, mlp):
    with pytest.raises(TypeError, match=r"`callbacks`.*EarlyStopping.*a class.*HINT: .*EarlyStopping\(\)"):
        prepared(mlp()).fit(blobs[0], verbose=0, callbacks=[C.EarlyStopping])


def test_scheduler_of_another_optimizer(blobs, mlp):
    model = prepared(mlp())
    stale = torch.optim.SGD(mlp().parameters(), lr=0.1)  # e.g. left over from an earlier notebook cell
    scheduler = C.LRScheduler(torch.optim.lr_scheduler.StepLR(stale, step_size=1, gamma=0.1))
    with pytest.raises(ValueError, match=r"`scheduler`.*another optimizer.*HINT"):
        model.fit(blobs[0], epochs=2, verbose=0, callbacks=[scheduler])
    assert model.epoch == 0  # refused before any training


def test_scheduler_of_the_prepared_optimizer_still_steps(blobs, mlp):
    net = mlp()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    model = sampan.Model(net)
    model.prepare(opt, torch.nn.CrossEntropyLoss())
    model.fit(blobs[0], epochs=2, verbose=0,
              callbacks=[C.LRScheduler(torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.1))])
    assert opt.param_groups[0]["lr"] == pytest.approx(0.001)


@pytest.mark.parametrize("kw", [{"min_delta": "x"}, {"baseline": "high"}])
def test_early_stopping_numbers_as_strings(kw):
    (name,) = kw
    with pytest.raises(ValueError, match=rf"`{name}`.*a number"):
        C.EarlyStopping(**kw)


def test_save_dir_that_is_a_file_fails_before_training(tmp_path, blobs, mlp):
    taken = tmp_path / "runs"
    taken.write_text("notes")
    model = prepared(mlp())
    with pytest.raises(ValueError, match=r"`save_dir`.*is a file.*HINT"):
        model.fit(blobs[0], verbose=0, save_dir=taken)
    assert model.epoch == 0 and taken.read_text() == "notes"


def test_model_checkpoint_without_a_folder():
    with pytest.raises(TypeError, match=r"`save_dir`.*Received: save_dir=None"):
        C.ModelCheckpoint(None)


def test_csv_logger_without_a_path():
    with pytest.raises(TypeError, match=r"`path`.*Received: path=None"):
        C.CSVLogger(None)


def test_regression_labels_that_broadcast():
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 1)
    data = TensorDataset(torch.randn(8, 4), torch.randn(8))  # outputs [8, 1], labels [8]: an [8, 8] loss
    with pytest.raises(ValueError, match=r"`labels`.*\[8, 1\].*MSELoss.*\[8\].*\[8, 8\].*HINT"):
        prepared(net, torch.nn.MSELoss()).fit(data, verbose=0)


def test_regression_labels_shaped_like_outputs_train():
    net = torch.nn.Linear(4, 1)
    data = TensorDataset(torch.randn(8, 4), torch.randn(8, 1))
    logs = prepared(net, torch.nn.MSELoss()).evaluate(data, verbose=0)
    assert np.isfinite(logs["loss"])


def test_compose_with_a_transform_class():
    from sampan.vision import transforms as T

    with pytest.raises(TypeError, match=r"`transforms`.*ToTensor.*a class.*HINT: .*ToTensor\(\)"):
        T.Compose([T.ToTensor, T.Normalize(mean=0.5, std=0.5)])


def test_to_tensor_data_format_not_a_string():
    from sampan.vision import transforms as T

    with pytest.raises(ValueError, match=r"`data_format`"):
        T.ToTensor(np.zeros((2, 2, 3), dtype=np.uint8))


@pytest.mark.parametrize("net_class", ["TextCNN", "BiGRU"])
def test_token_ids_beyond_the_vocabulary(net_class):
    net = getattr(sampan.text, net_class)(10, 2)
    with pytest.raises(ValueError, match=r"`ids`.*vocab_size=10.*50.*HINT"):
        net(torch.full((2, 5), 50))


def test_a_network_saved_whole_before_its_first_batch_pickles_without_the_model(tmp_path):
    import copy
    import io

    net = torch.nn.Sequential(torch.nn.Linear(4, 3))
    model = sampan.Model(net)  # no inputs: the model waits for the first batch to learn them
    model.prepare(torch.optim.SGD(net.parameters(), 0.1), torch.nn.CrossEntropyLoss())
    buffer = io.BytesIO()
    torch.save(net, buffer)  # a learner's whole-network save (Can't pickle local object, before)
    assert b"SGD" not in buffer.getvalue() and b"Model" not in buffer.getvalue()  # the Model stays behind
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)  # the learner's own file
    assert loaded(torch.ones(2, 4)).shape == (2, 3)
    assert copy.deepcopy(net)(torch.ones(2, 4)).shape == (2, 3)
    data = torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randint(0, 3, (8,)))
    model.fit(data, batch_size=4, epochs=1, verbose=0)
    assert [tuple(s.shape) for s in model._seen_inputs] == [(None, 4)]  # the hook still did its work


@pytest.mark.parametrize("flag", ["shuffle", "drop_last"])
def test_fit_flags_given_as_words_are_named(flag, blobs, mlp):
    with pytest.raises(TypeError, match=rf"`{flag}`.*True or False.*Received: {flag}='no'"):
        prepared(mlp()).fit(blobs[0], verbose=0, **{flag: "no"})  # a non-empty string: it shuffled


def test_grad_clip_true_is_not_read_as_a_norm_of_one(mlp):
    net = mlp()
    with pytest.raises(ValueError, match=r"`grad_clip`.*positive float"):
        sampan.Model(net).prepare(torch.optim.SGD(net.parameters(), 0.1), torch.nn.CrossEntropyLoss(), grad_clip=True)
