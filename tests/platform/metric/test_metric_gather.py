"""Which metrics an evaluation on several ranks feeds every rank's rows (``MetricSet`` with a strategy): a metric
of one's own, as ``paddle.Model`` does; never ``sampan.metric``'s, which reduce their counts themselves."""
import torch

from sampan.distributed.base import Strategy
from sampan.hapi.metrics import MAX_BUFFERED, MetricSet
from sampan.metric import F1, Accuracy, Auc, ConfusionMatrix, Metric, Precision, Recall


class _Count(Metric):
    """``update`` / ``accumulate`` alone: the rows it saw."""

    def __init__(self):
        self.reset()

    def names(self):
        return ["count"]

    def update(self, outputs, labels):
        self.rows += len(labels)

    def accumulate(self):
        return [self.rows]

    def reset(self):
        self.rows = 0


class _TwoRanks(Strategy):
    """A stand-in for DDP: the other rank's rows are this batch's with every label wrong; counts the gathers."""

    world_size = 2

    def __init__(self):
        self.gathers = 0

    def gather_rows(self, values):
        self.gathers += 1
        out, lab = values
        return [[torch.cat([out, out]), torch.cat([lab, 1 - lab])]]


def _batches():
    out = torch.tensor([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    return [(out, torch.tensor([1, 0, 1])) for _ in range(MAX_BUFFERED + 2)]  # more than one chunk


def test_only_metrics_that_do_not_sync_themselves_are_fed_every_rank_s_rows():
    assert not Metric.syncs_across_ranks and not _Count.syncs_across_ranks
    assert all(cls.syncs_across_ranks for cls in (Accuracy, Precision, Recall, F1, Auc, ConfusionMatrix))
    strategy, metrics = _TwoRanks(), MetricSet([Accuracy(), _Count()])
    metrics.reset(strategy)
    for out, lab in _batches():
        metrics.add(out, [lab])
    assert strategy.gathers == MAX_BUFFERED + 2  # one gather per batch, on every rank alike
    assert metrics.results() == {"acc": 1.0, "count": 2 * 3 * (MAX_BUFFERED + 2)}  # acc: its rank's rows alone
    metrics.reset()  # training: each rank feeds its own rows, nothing is gathered
    for out, lab in _batches():
        metrics.add(out, [lab])
    assert metrics.results() == {"acc": 1.0, "count": 3 * (MAX_BUFFERED + 2)}
    assert strategy.gathers == MAX_BUFFERED + 2


def test_in_one_process_nothing_is_gathered():
    class Alone(_TwoRanks):
        world_size = 1

    strategy, metrics = Alone(), MetricSet([_Count()])
    metrics.reset(strategy)
    for out, lab in _batches():
        metrics.add(out, [lab])
    assert strategy.gathers == 0 and metrics.results() == {"count": 3 * (MAX_BUFFERED + 2)}
    assert Strategy().gather_rows([torch.ones(2), torch.zeros(2)])[0][0].tolist() == [1.0, 1.0]
