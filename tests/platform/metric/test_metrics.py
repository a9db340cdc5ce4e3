"""Sampan's metrics agree with torchmetrics' own results, through the loop and standalone."""
import pytest
import torch
from torch.utils.data import TensorDataset

import sampan
from sampan.metric import F1, Accuracy, ConfusionMatrix, Precision, Recall


@pytest.fixture(scope="module")
def F():
    """torchmetrics' functional classification metrics, imported by the tests that compare with them (not at
    collection: every pytest-xdist worker collects this file, one runs it)."""
    import torchmetrics.functional.classification as functional

    return functional


@pytest.fixture
def scores():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(300, 6, generator=g)
    labels = torch.randint(0, 6, (300,), generator=g)
    return logits, labels


def feed(metric, logits, labels, chunk=37):
    for i in range(0, len(labels), chunk):
        metric.update(logits[i:i + chunk], labels[i:i + chunk])
    return metric.results()


def test_topk_accuracy_matches_torchmetrics(scores, F):
    logits, labels = scores
    got = feed(Accuracy(topk=(1, 3)), logits, labels)
    assert got["acc_top1"] == pytest.approx(float(F.multiclass_accuracy(logits, labels, 6, average="micro")))
    assert got["acc_top3"] == pytest.approx(float(F.multiclass_accuracy(logits, labels, 6, average="micro", top_k=3)))
    assert got["acc_top1"] == pytest.approx((logits.argmax(1) == labels).float().mean().item())


@pytest.mark.parametrize("cls, fn, name", [
    (Precision, "multiclass_precision", "precision"),
    (Recall, "multiclass_recall", "recall"),
    (F1, "multiclass_f1_score", "f1"),
])
@pytest.mark.parametrize("average", ["macro", "weighted", "micro"])
def test_averaged_metrics_match_torchmetrics(scores, cls, fn, name, average, F):
    logits, labels = scores
    got = feed(cls(average=average), logits, labels)[name]
    assert got == pytest.approx(float(getattr(F, fn)(logits, labels, 6, average=average)))


def test_binary_metrics_from_one_logit_column():
    logits = torch.tensor([[2.0], [-1.0], [0.5], [-3.0]])
    labels = torch.tensor([1, 1, 0, 0])
    assert feed(Precision(), logits, labels)["precision"] == pytest.approx(0.5)
    assert feed(Recall(), logits, labels)["recall"] == pytest.approx(0.5)
    assert feed(Accuracy(), logits, labels)["acc"] == pytest.approx(0.5)


def test_confusion_matrix(scores, F):
    logits, labels = scores
    got = feed(ConfusionMatrix(), logits, labels)["confusion_matrix"]
    assert got == F.multiclass_confusion_matrix(logits, labels, 6).tolist()
    assert sum(map(sum, got)) == 300


def test_metrics_through_evaluate_and_history(scores, F):
    logits, labels = scores
    net = torch.nn.Identity()
    model = sampan.Model(net)
    model.prepare(loss=torch.nn.CrossEntropyLoss(), metrics=[Accuracy(topk=(1, 2)), F1(), ConfusionMatrix()])
    result = model.evaluate(TensorDataset(logits, labels), batch_size=50, verbose=0)
    assert result["acc_top1"] == pytest.approx(float(F.multiclass_accuracy(logits, labels, 6, average="micro")))
    assert result["f1"] == pytest.approx(float(F.multiclass_f1_score(logits, labels, 6)))
    assert result["confusion_matrix"] == F.multiclass_confusion_matrix(logits, labels, 6).tolist()
    assert result["loss"] == pytest.approx(torch.nn.functional.cross_entropy(logits, labels).item(), rel=1e-5)


def test_reset_and_bad_arguments(scores):
    logits, labels = scores
    m = Accuracy()
    feed(m, logits, labels)
    m.reset()
    m.update(logits[:2], logits[:2].argmax(1))
    assert m.results()["acc"] == 1.0
    with pytest.raises(ValueError, match=r"Expected `topk` to be a positive int or a tuple of them. Received: topk=0"):
        Accuracy(topk=0)
    with pytest.raises(ValueError, match=r"Expected `topk` to be values at most num_classes=6"):
        Accuracy(topk=(1, 7)).update(logits, labels)
    with pytest.raises(ValueError, match=r"Expected `average` to be 'micro', 'macro' or 'weighted'"):
        F1(average="mean")
    with pytest.raises(TypeError, match=r"Expected `metrics` to be a sampan.metric.Metric"):
        sampan.Model(torch.nn.Identity()).prepare(metrics="acc")


def test_torchmetrics_is_imported_only_when_a_metric_is_built():
    """Importing torchmetrics costs seconds (torchvision, scipy.signal): a fit without metrics, as a torchrun
    rank or a serving process runs it, must not pay that."""
    import subprocess
    import sys

    code = (
        "import sys, torch, sampan\n"
        "net = torch.nn.Linear(4, 2)\n"
        "model = sampan.Model(net)\n"
        "model.prepare(torch.optim.SGD(net.parameters(), 0.1), torch.nn.CrossEntropyLoss())\n"
        "data = torch.utils.data.TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,)))\n"
        "model.fit(data, epochs=1, batch_size=4, verbose=0)\n"
        "print('torchmetrics' in sys.modules)\n"
        "acc = sampan.metric.Accuracy()\n"  # counted by sampan itself
        "acc.update(torch.tensor([[2.0, 0.0], [0.0, 2.0]]), torch.tensor([0, 0]))\n"
        "print('torchmetrics' in sys.modules, acc.accumulate())\n"
        "f1 = sampan.metric.F1()\n"
        "f1.update(torch.tensor([[2.0, 0.0], [0.0, 2.0]]), torch.tensor([0, 0]))\n"
        "print('torchmetrics' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "SAMPAN_TRACKING": "0"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:3] == ["False", "False [0.5]", "True"]
