"""evaluate and predict on 2 gloo ranks count each sample once: the padding of the ranks' shares is cut."""
import numpy as np
import pytest
import torch

import sampan
import sampan.distributed as sd

pytestmark = pytest.mark.distributed


class _Sign(torch.nn.Module):
    """Class 1 for x > 0, else class 0, with logits +-10 x: sample i's outputs are known without running it."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))

    def forward(self, x):
        return torch.cat([-x, x], 1) * 10 + self.w * 0


def _model(strategy=None):
    net = _Sign()
    model = sampan.Model(net)
    model.prepare(torch.optim.SGD(net.parameters(), lr=0.0), torch.nn.CrossEntropyLoss(),
                  [sampan.metric.Accuracy(), sampan.metric.Recall(average="micro")], device="cpu", strategy=strategy)
    return model


class _MeanAbsError(sampan.metric.Metric):
    """Paddle's spelling (name / compute / update / accumulate / reset): |x - label| from the logit 10 x."""

    def __init__(self):
        self.reset()

    def name(self):
        return "mae"

    def compute(self, outputs, labels):
        return (outputs[:, 1] / 10 - labels.float()).abs()

    def update(self, errors):
        self.total, self.count = self.total + float(errors.sum()), self.count + errors.numel()

    def accumulate(self):
        return self.total / max(self.count, 1)

    def reset(self):
        self.total, self.count = 0.0, 0


class _Seen(sampan.metric.Metric):
    """update / accumulate alone: how many samples it saw, and their x in the order it saw them."""

    def __init__(self):
        self.reset()

    def names(self):
        return ["count", "seen"]

    def update(self, outputs, labels):
        self.xs.extend((outputs[:, 1] / 10).tolist())

    def accumulate(self):
        return [len(self.xs), self.xs]

    def reset(self):
        self.xs = []


def _custom_model(strategy=None):
    net = _Sign()
    model = sampan.Model(net)
    model.prepare(torch.optim.SGD(net.parameters(), lr=0.0), torch.nn.CrossEntropyLoss(),
                  [_MeanAbsError(), sampan.metric.Accuracy(), _Seen()], device="cpu", strategy=strategy)
    return model


def _custom_runs(model) -> dict:
    """Paddle-style metrics of one's own, whose state no rank shares: 5 samples, 3 rows per rank (one padding)."""
    x = torch.tensor([[1.0], [2.0], [3.0], [4.0], [-5.0]])
    data = torch.utils.data.TensorDataset(x, torch.ones(5, dtype=torch.long))
    return {"five": model.evaluate(data, batch_size=2, verbose=0),
            "one": model.evaluate(torch.utils.data.TensorDataset(x[4:], torch.ones(1, dtype=torch.long)),
                                  batch_size=2, verbose=0)}


def _on_two_ranks():
    torch.set_num_threads(1)
    x = torch.tensor([[1.0], [1.0], [1.0], [1.0], [-1.0]])  # labels all 1: 4 of 5 right, the last costs loss 20
    y = torch.ones(5, dtype=torch.long)
    data = torch.utils.data.TensorDataset(x, y)
    ramp = torch.utils.data.TensorDataset(torch.arange(1.0, 6.0)[:, None])  # 5 distinct samples, in order
    model = _model()
    history = model.fit(data, data, epochs=1, batch_size=2, verbose=0)  # 3 rows per rank: one is padding
    out = {"fit": history.history, "evaluate": model.evaluate(data, batch_size=2, verbose=0),
           "predict": model.predict(ramp, batch_size=2, verbose=0)[0],
           "batches": model.predict(ramp, batch_size=2, verbose=0, stack_outputs=False)[0],
           # one sample for two ranks: rank 1 holds padding alone, and its metrics must still sync with rank 0's
           "one": model.evaluate(torch.utils.data.TensorDataset(x[4:], y[4:]), batch_size=2, verbose=0),
           "predict_one": model.predict(torch.utils.data.TensorDataset(x[4:]), batch_size=4, verbose=0)[0]}
    fsdp = _model("fsdp")  # FSDP gathers the parameters in every forward: the ranks must run the same batches
    out["fsdp"] = fsdp.evaluate(data, batch_size=2, verbose=0)
    out["fsdp_predict"] = fsdp.predict(ramp, batch_size=2, verbose=0)[0]
    custom = _custom_model()
    out["custom"] = _custom_runs(custom)
    rank = sd.get_rank()  # shapes that differ across ranks: every rank's tensors come back whole, in rank order
    out["gathered"] = custom._loop.strategy.gather_rows([torch.full((rank + 1, rank + 2), float(rank)),
                                                        torch.tensor([True] * (rank + 1))])
    return out


@pytest.fixture(scope="module")
def ranks():
    return sd.spawn(_on_two_ranks, nprocs=2, threads=1)


def _expected_outputs(x: np.ndarray) -> np.ndarray:
    return np.concatenate([-x, x], 1) * 10


def test_evaluate_counts_each_sample_once(ranks):
    for result in ranks:
        assert result["evaluate"]["acc"] == pytest.approx(0.8)  # padded shares gave 5/6
        assert result["evaluate"]["recall"] == pytest.approx(0.8)
        assert result["evaluate"]["loss"] == pytest.approx(4.0, abs=1e-6)  # (4 * ~0 + 20) / 5
        assert result["fsdp"] == pytest.approx(result["evaluate"])
        assert result["one"] == pytest.approx({"loss": 20.0, "acc": 0.0, "recall": 0.0}, abs=1e-6)


def test_a_metric_of_ones_own_sees_every_rank_s_rows_as_in_one_process(ranks):
    alone = _custom_runs(_custom_model())
    assert alone["five"].pop("seen") == [1.0, 2.0, 3.0, 4.0, -5.0]  # one process: the data's order
    assert alone["five"] == pytest.approx({"loss": 20.0, "mae": 2.4, "acc": 0.8, "count": 5}, abs=1e-5)
    assert alone["one"].pop("seen") == [-5.0]
    for result in ranks:
        assert result["custom"]["five"].pop("seen") == [1.0, 2.0, 3.0, 4.0, -5.0]  # the ranks' rows in turn
        assert result["custom"]["five"] == pytest.approx(alone["five"], abs=1e-5)  # rank 0's share: mae 8 / 3
        assert result["custom"]["one"].pop("seen") == [-5.0]  # rank 1's share is padding alone
        assert result["custom"]["one"] == pytest.approx(alone["one"], abs=1e-5)
    shapes = [[list(t.shape) for t in batch] for batch in ranks[0]["gathered"]]
    assert shapes == [[[1, 2], [1]], [[2, 3], [2]]]
    assert [batch[0].unique().tolist() for batch in ranks[1]["gathered"]] == [[0.0], [1.0]]
    assert all(batch[1].dtype == torch.bool and batch[1].all() for batch in ranks[1]["gathered"])


def test_fit_evaluates_each_sample_once(ranks):
    for result in ranks:
        assert result["fit"]["eval_acc"] == [pytest.approx(0.8)]
        assert result["fit"]["eval_loss"] == [pytest.approx(4.0, abs=1e-6)]


def test_predict_returns_every_sample_in_order_on_every_rank(ranks):
    want = _expected_outputs(np.arange(1.0, 6.0)[:, None])
    for result in ranks:
        np.testing.assert_allclose(result["predict"], want)
        np.testing.assert_allclose(result["fsdp_predict"], want)
        assert [b.shape[0] for b in result["batches"]] == [4, 1]  # each step: both ranks' batches, padding cut
        np.testing.assert_allclose(np.concatenate(result["batches"]), want)
        np.testing.assert_allclose(result["predict_one"], _expected_outputs(np.array([[-1.0]])))


def test_in_one_process_nothing_is_cut_or_gathered():
    from sampan.distributed.strategy import _interleave

    model = _model()
    x = torch.arange(1.0, 6.0)[:, None]
    np.testing.assert_allclose(model.predict(torch.utils.data.TensorDataset(x), batch_size=2, verbose=0)[0],
                               _expected_outputs(x.numpy()))
    a, b = [[torch.tensor([0, 2])], [torch.tensor([4])]], [[torch.tensor([1, 3])], [torch.tensor([0])]]
    assert [batch[0].tolist() for batch in _interleave([a, b], 5)] == [[0, 1, 2, 3], [4]]
    with pytest.raises(sampan.SampanError, match=r"at batch 0 output 0 has the shapes \[\[2, 3\], \[2, 4\]\]"):
        _interleave([[[torch.zeros(2, 3)]], [[torch.zeros(2, 4)]]], 4)
