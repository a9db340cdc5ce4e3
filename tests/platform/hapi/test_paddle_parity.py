"""paddle.Model habits that must work on sampan.Model (issue 12): fit's arguments, summary, save, errors."""
import inspect

import numpy as np
import pytest
import torch
from torch.utils.data import TensorDataset

import sampan
from sampan.amp import AmpPrecision
from sampan.callbacks import Callback, ProgBarLogger, ProgressBar
from sampan.metric import Accuracy

# paddle.Model.fit's signature (python/paddle/hapi/model.py), in order
PADDLE_FIT_ARGS = ["train_data", "eval_data", "batch_size", "epochs", "eval_freq", "log_freq", "save_dir",
                   "save_freq", "verbose", "drop_last", "shuffle", "num_workers", "callbacks",
                   "accumulate_grad_batches", "num_iters"]


def prepared(net, **kw):
    model = sampan.Model(net)
    model.prepare(torch.optim.SGD(net.parameters(), lr=0.1), torch.nn.CrossEntropyLoss(), Accuracy(), **kw)
    return model


class Sizes(Callback):
    """Records the batch sizes each phase saw and the steps taken."""

    def __init__(self):
        super().__init__()
        self.train, self.eval, self.evals = [], [], 0

    def on_train_batch_end(self, step, logs=None):
        self.train.append(logs["batch_size"])

    def on_eval_batch_end(self, step, logs=None):
        self.eval.append(logs["batch_size"])

    def on_eval_end(self, logs=None):
        self.evals += 1


def test_fit_takes_every_paddle_argument_by_name():
    params = inspect.signature(sampan.Model.fit).parameters
    assert [p for p in PADDLE_FIT_ARGS if p not in params] == []


def test_one_callback_not_in_a_list(blobs, mlp):
    spy = Sizes()
    prepared(mlp()).fit(blobs[0], epochs=1, batch_size=64, verbose=0, callbacks=spy)
    assert spy.train == [64, 64, 64]
    paddle_order = ProgBarLogger(5, 0)  # Paddle's (log_freq, verbose)
    assert isinstance(paddle_order, ProgressBar) and (paddle_order.log_freq, paddle_order.verbose) == (5, 0)
    model = prepared(mlp())
    model.fit(blobs[0], epochs=1, batch_size=64, callbacks=ProgressBar(verbose=0))
    assert sum(isinstance(c, ProgressBar) for c in model._callbacks) == 1
    with pytest.raises(TypeError, match=r"sampan.callbacks.Callback. Received: 'oops'"):
        model.fit(blobs[0], verbose=0, callbacks="oops")


def test_train_and_eval_batch_sizes_and_eval_freq(blobs, mlp):
    spy = Sizes()
    prepared(mlp()).fit(blobs[0], blobs[1], epochs=3, batch_size=(64, 32), eval_freq=2, drop_last=True,
                        verbose=0, callbacks=[spy])
    assert spy.train == [64] * 9 and spy.eval == [32, 32] * 2  # epochs 2 and 3 (the last always evaluates)
    assert spy.evals == 2
    with pytest.raises(ValueError, match=r"`batch_size` to be an int or \(train_batch_size, eval_batch_size\)"):
        prepared(mlp()).fit(blobs[0], batch_size=(64, 32, 16), verbose=0)
    with pytest.raises(ValueError, match=r"Expected `batch_size` to be an int >= 1. Received: batch_size=0"):
        prepared(mlp()).fit(blobs[0], batch_size=(0, 32), verbose=0)


def test_num_iters_sets_the_epochs_and_accumulate_grad_batches(blobs, mlp):
    model = prepared(mlp())
    spy = Sizes()
    model.fit(blobs[0], batch_size=64, num_iters=5, verbose=0, callbacks=[spy])  # epochs=1, 3 steps an epoch
    assert model.global_step == 5 and model.epoch == 2 and len(spy.train) == 5
    model = prepared(mlp())
    model.fit(blobs[0], epochs=2, batch_size=32, accumulate_grad_batches=3, verbose=0)
    assert model.global_step == 4  # 6 micro-batches an epoch, an optimizer step every 3
    with pytest.raises(ValueError, match=r"Expected `accumulate_grad_batches` to be an int >= 1"):
        model.fit(blobs[0], accumulate_grad_batches=0, verbose=0)


def test_parameters_is_a_list(mlp):
    net = mlp()
    params = sampan.Model(net).parameters()
    assert isinstance(params, list) and params[0] is net[0].weight and len(params) == 4


class Seq(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(8, 16, batch_first=True)
        self.head = torch.nn.Linear(16, 3)

    def forward(self, x, state):
        out, _ = self.lstm(x, state)
        return self.head(out[:, -1])


class Pair(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(4, 2), torch.nn.Linear(6, 2)

    def forward(self, inputs):
        if isinstance(inputs, dict):
            return self.a(inputs["x"]) + self.b(inputs["y"])
        return self.a(inputs[0]) + self.b(inputs[1])


def test_summary_accepts_what_paddle_summary_accepts():
    lenet = sampan.vision.models.LeNet()
    model = sampan.Model(lenet)
    want = model.summary((1, 1, 28, 28))
    for size in [(-1, 1, 28, 28), (None, 1, 28, 28), [(None, 1, 28, 28)],
                 sampan.InputSpec([None, 1, 28, 28], "float32")]:
        got = model.summary(size)
        assert got["flops"] == want["flops"] and got["total_params"] == want["total_params"]
    assert sampan.summary(torch.nn.Linear(6, 2), 6, print_table=False)["flops"] == 24  # a bare int
    nested = sampan.summary(Seq(), [(None, 5, 8), ((1, 1, 16), (1, 1, 16))], print_table=False)  # x, (h0, c0)
    assert nested["layers"][-1]["output_shape"] == [1, 3]
    lstm = torch.nn.LSTM(16, 32, 2, batch_first=True)  # Paddle's test_summary_nlp case, its None in dim 1
    info = sampan.summary(lstm, [(-1, 23, 16), ((2, None, 32), (2, -1, 32))], print_table=False)
    assert info["total_params"] == sum(p.numel() for p in lstm.parameters())
    assert [(l["name"], l["output_shape"][0]) for l in info["layers"]] == [("LSTM", [1, 23, 32])]  # its own row
    assert sampan.summary(torch.nn.Linear(4, 2), (1, 4), print_table=False)["layers"][0]["flops"] == 16
    assert sampan.summary(Pair(), input=[torch.rand(1, 4), torch.rand(1, 6)], print_table=False)["flops"] == 40
    as_dict = {"x": torch.rand(2, 4), "y": torch.rand(2, 6)}
    assert sampan.summary(Pair(), input=as_dict, print_table=False)["flops"] == 80
    emb = sampan.Model(torch.nn.Embedding(10, 3))
    assert emb.summary((None, 5), dtype="int64")["layers"] == emb.summary((None, 5), dtypes="int64")["layers"]


def test_summary_errors_name_the_argument_and_the_layer():
    model = sampan.Model(sampan.vision.models.LeNet())
    with pytest.raises(TypeError, match=r"Expected `input_size` to be .*the dimension '28' is a str"):
        model.summary((1, 1, "28", 28))
    with pytest.raises(TypeError, match=r"the dimension 28.0 is a float"):
        model.summary((1, 1, 28.0, 28))
    with pytest.raises(TypeError, match=r"Expected `input_size`"):
        model.summary("1, 1, 28, 28")
    with pytest.raises(ValueError, match=r"only the batch dimension may be None or -1"):
        model.summary((None, 1, None, 28))
    with pytest.raises(ValueError, match=r"the dimension 0 must be positive"):
        model.summary((1, 0, 28, 28))
    with pytest.raises(ValueError, match=r"a shape cannot be empty"):
        model.summary([(1, 1, 28, 28), []])
    with pytest.raises(ValueError, match=r"summary: input_size=\(1, 3, 28, 28\) does not fit the network: layer "
                                         r"'features.0' \(Conv2d\) refused the input"):
        model.summary((1, 3, 28, 28))


def test_save_for_inference_infers_the_spec_from_the_data_seen(blobs, mlp, tmp_path):
    model = prepared(mlp())
    model.summary((1, 16))  # an example input, not data: it must not become the spec
    with pytest.raises(ValueError, match=r"Expected `inputs` to be InputSpecs for model.save\(path, training=False\)"):
        model.save(tmp_path / "net", training=False)
    model.fit(blobs[0], epochs=1, batch_size=64, verbose=0)
    assert [s.to_dict() for s in model._seen_inputs] == [{"shape": [None, 16], "dtype": "float32", "name": "input_0"}]
    with pytest.warns(UserWarning, match=r"inferred from the first batch seen"):
        path = model.save(tmp_path / "net", training=False)
    loaded = sampan.jit.load(path)
    x = torch.randn(5, 16)
    model.network.eval()
    assert torch.allclose(loaded(x), model.network(x), atol=1e-5)

    predicted = sampan.Model(mlp())
    predicted.predict(TensorDataset(torch.randn(8, 16)), batch_size=4, verbose=0)
    assert predicted._seen_inputs[0].shape == (None, 16)
    stepped = prepared(mlp())
    stepped.train_batch([np.zeros((2, 16), np.float32)], [np.zeros(2, np.int64)])
    assert stepped._seen_inputs[0].to_dict() == {"shape": [None, 16], "dtype": "float32", "name": "input_0"}


@pytest.mark.parametrize("training", [True, False])
def test_save_to_an_empty_path_raises(mlp, training):
    model = sampan.Model(mlp(), inputs=sampan.InputSpec([None, 16]))
    with pytest.raises(ValueError, match=r"Expected `path` to be a file prefix .* Received: path=''"):
        model.save("", training=training)


def test_unknown_amp_key_is_a_value_error_naming_amp(mlp):
    with pytest.raises(ValueError, match=r"Expected `amp` to be a dict whose keys.*use_pure_fp16 -> level='O2'"):
        prepared(mlp(), amp={"level": "O2", "use_pure_fp16": True}, device="cpu")
    with pytest.raises(ValueError, match=r"Expected `amp` to be a dict whose keys.*use_pure_fp16"):
        prepared(mlp(), amp_configs={"use_pure_fp16": True}, device="cpu")  # Paddle's argument name
    assert not isinstance(prepared(mlp(), amp_configs={"level": "O0"}, device="cpu")._precision, AmpPrecision)
    assert prepared(mlp(), amp_configs="O1", device="cpu")._precision.config.level == "O1"
    with pytest.raises(ValueError, match=r"Expected `amp_configs` to be None when amp is given"):
        prepared(mlp(), amp="bf16", amp_configs="O1", device="cpu")


def test_paddle_column_labels_point_to_the_migration_guide(blobs, mlp):
    x, y = blobs[0].tensors
    with pytest.raises(ValueError, match=r"Paddle's \[N, 1\] layout.*MIGRATING_FROM_PADDLE.md"):
        prepared(mlp()).fit(TensorDataset(x, y[:, None]), verbose=0)
