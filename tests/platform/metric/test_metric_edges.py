"""Metrics on the inputs an audit tried: binary outputs read one way per run, Paddle-written custom metrics,
labels out of range, bad settings caught when built."""
import pytest
import torch

from sampan.metric import F1, Accuracy, Auc, ConfusionMatrix, Metric, Precision


def test_binary_outputs_are_read_one_way_for_the_whole_run():
    logits = torch.tensor([0.2, 0.3, 0.1, 0.4, 2.0, -1.0, 3.0, -2.0])  # logits: all positive but the two < 0
    labels = (logits >= 0).long()
    whole = Accuracy()
    whole.update(logits, labels)
    halves = Accuracy()
    with pytest.warns(UserWarning, match=r"first batch's outputs were all in \[0, 1\].*from_logits=True"):
        halves.update(logits[:4], labels[:4])  # alone, these four look like probabilities
        halves.update(logits[4:], labels[4:])
    told = Accuracy(from_logits=True)
    told.update(logits[:4], labels[:4])
    told.update(logits[4:], labels[4:])
    assert whole.accumulate() == told.accumulate() == [1.0]
    assert halves.accumulate() == [0.5]  # read as probabilities, as the warning said
    halves.reset()
    halves.update(logits[4:], labels[4:])  # a new run guesses again
    assert halves.accumulate() == [1.0]
    with pytest.raises(ValueError, match=r"`from_logits`"):
        Precision(from_logits="yes")


def test_a_metric_written_for_paddle_works_unchanged():
    class Paddlish(Metric):
        def __init__(self):
            self.reset()

        def name(self):
            return "share_positive"

        def compute(self, outputs, labels):
            return (outputs.argmax(-1) == 1).float()

        def update(self, positive):
            self.total, self.count = self.total + float(positive.sum()), self.count + positive.numel()

        def accumulate(self):
            return self.total / max(self.count, 1)

        def reset(self):
            self.total, self.count = 0.0, 0

    m = Paddlish()
    m.feed(torch.tensor([[0.0, 1.0], [1.0, 0.0], [0.0, 2.0], [0.0, 3.0]]), torch.zeros(4))
    assert m.names() == ["share_positive"] and m.results() == {"share_positive": 0.75}

    class Unnamed(Metric):
        pass

    with pytest.raises(NotImplementedError, match=r"Unnamed must say what it reports: define names\(\)"):
        Unnamed().names()


@pytest.mark.parametrize("metric", [Accuracy(), Precision(), F1(), ConfusionMatrix()], ids=type)
def test_labels_outside_the_classes_are_named(metric):
    with pytest.raises(ValueError, match=r"expected class labels in \[0, 2\].*Received labels from 1 to 3.*"
                                         r"subtract 1 from 1-based labels"):
        metric.update(torch.randn(4, 3), torch.tensor([1, 2, 3, 3]))


def test_num_classes_that_disagree_with_the_outputs_is_named():
    with pytest.raises(ValueError, match=r"`num_classes`.*the outputs' last dimension \(5\)"):
        Accuracy(num_classes=3).update(torch.randn(4, 5), torch.tensor([0, 1, 2, 0]))
    with pytest.raises(ValueError, match=r"`num_classes`.*the outputs' last dimension \(5\)"):
        Precision(num_classes=3).update(torch.randn(4, 5), torch.tensor([0, 1, 2, 0]))


def test_confusion_matrix_checks_normalize_when_built():
    with pytest.raises(ValueError, match=r"`normalize`.*'true' \(rows\)"):
        ConfusionMatrix(normalize="rows")
    m = ConfusionMatrix(normalize="true")
    m.update(torch.tensor([[2.0, 0.0], [0.0, 2.0], [2.0, 0.0]]), torch.tensor([0, 0, 1]))
    assert m.results()["confusion_matrix"] == [[0.5, 0.5], [1.0, 0.0]]


def test_auc_reads_logits_the_same_way_across_batches():
    scores = torch.tensor([0.1, 0.2, 0.3, 0.4, 3.0, -3.0, 2.0, -2.0])
    labels = torch.tensor([0, 0, 1, 1, 1, 0, 1, 0])
    one, two = Auc(num_thresholds=None, from_logits=True), Auc(num_thresholds=None, from_logits=True)
    one.update(scores, labels)
    two.update(scores[:4], labels[:4])
    two.update(scores[4:], labels[4:])
    assert one.accumulate() == pytest.approx(two.accumulate())
