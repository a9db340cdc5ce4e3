"""The behaviour Paddle's own metric tests check (test/legacy_test/test_metrics.py), on Sampan's metrics."""
import numpy as np
import pytest
import torch

from sampan.metric import Accuracy, Auc, Precision, Recall


def paddle_accuracy(pred: np.ndarray, label: np.ndarray, topk=(1,)) -> list[float]:
    """Paddle's reference computation: classes last, labels [..., 1] or one-hot."""
    maxk = max(topk)
    top = np.argsort(pred)[..., ::-1][..., :maxk]
    if label.ndim == 1:
        label = label.reshape(-1, 1)
    elif label.shape[-1] != 1:
        label = np.argmax(label, axis=-1)[..., np.newaxis]
    correct = top == np.repeat(label, maxk, -1)
    total = np.prod(label.shape[:-1])
    return [float(correct[..., :k].sum()) / total for k in topk]


def test_accuracy_2d_with_column_labels_and_name():
    x = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.1, 0.4, 0.3, 0.2], [0.1, 0.2, 0.4, 0.3], [0.1, 0.2, 0.3, 0.4]])
    m = Accuracy(name="my_acc")
    assert m.name() == ["my_acc"]
    m.update(x, torch.tensor([[0], [1], [2], [3]]))
    assert m.accumulate() == [0.75]
    m.update(torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.1, 0.3, 0.4, 0.2], [0.1, 0.2, 0.4, 0.3], [0.1, 0.2, 0.3, 0.4]]),
             np.array([0, 1, 2, 3]))
    assert m.accumulate() == [0.625]


def test_accuracy_on_3d_outputs_with_trailing_one_labels():
    rng = np.random.default_rng(0)
    x, y = rng.random((6, 5, 4)), rng.integers(4, size=(6, 5, 1))
    m = Accuracy()
    m.update(x, y)
    assert m.accumulate()[0] == pytest.approx(paddle_accuracy(x, y)[0])


def test_accuracy_on_one_hot_labels_topk():
    rng = np.random.default_rng(1)
    x, y = rng.random((6, 5, 4)), rng.integers(4, size=(6, 5))
    one_hot = np.eye(4)[y]
    m = Accuracy(topk=(1, 2))
    m.update(torch.tensor(x), torch.tensor(one_hot))
    assert m.accumulate() == pytest.approx(paddle_accuracy(x, one_hot, (1, 2)))
    assert 0.0 < m.accumulate()[0] < m.accumulate()[1] < 1.0


def test_precision_counts_exactly_one_half_as_positive_like_paddle():
    m = Precision()
    m.update(np.array([0.1, 0.5, 0.6, 0.7]), np.array([1, 0, 1, 1]))
    assert m.accumulate()[0] == pytest.approx(2 / 3)  # 0.5 is a (false) positive; torchmetrics alone gives 1.0
    m.update(torch.tensor([0.1, 0.5, 0.6, 0.7, 0.2]), torch.tensor([1, 0, 1, 1, 1]))
    assert m.accumulate()[0] == pytest.approx(4 / 6)
    m.reset()
    assert m.accumulate() == [0.0]
    column = Precision()
    column.update(np.array([[0.1], [0.5], [0.6], [0.7]]), np.array([[1], [0], [1], [1]]))
    assert column.accumulate()[0] == pytest.approx(2 / 3)


def test_recall_like_paddle():
    m = Recall()
    m.update(np.array([0.1, 0.5, 0.6, 0.7]), np.array([1, 0, 1, 1]))
    assert m.accumulate()[0] == pytest.approx(2 / 3)
    m.update(np.array([0.1, 0.5, 0.6, 0.7]), np.array([1, 0, 0, 1]))
    assert m.accumulate()[0] == pytest.approx(3 / 5)
    m.reset()
    assert m.accumulate() == [0.0]


AUC_X = np.array([[0.78, 0.22], [0.62, 0.38], [0.55, 0.45], [0.30, 0.70],
                  [0.14, 0.86], [0.59, 0.41], [0.91, 0.08], [0.16, 0.84]])
AUC_Y = np.array([[0], [1], [1], [0], [1], [0], [0], [1]])


@pytest.mark.parametrize("num_thresholds", [4095, None])
def test_auc_like_paddle(num_thresholds):
    m = Auc(num_thresholds=num_thresholds)
    assert m.name() == ["auc"]
    m.update(AUC_X, AUC_Y)
    assert m.accumulate()[0] == pytest.approx(0.8125, abs=1e-3)
    m.reset()
    assert m.accumulate() == [0.0]


def test_auc_takes_logits_and_one_column_and_refuses_many_classes():
    logits = torch.log(torch.tensor(AUC_X))  # softmax of log-probabilities gives back the probabilities
    m = Auc(num_thresholds=None)
    m.update(logits, torch.tensor(AUC_Y))
    assert m.accumulate()[0] == pytest.approx(0.8125)
    one = Auc(num_thresholds=None)
    one.update(torch.tensor(AUC_X[:, 1:]), torch.tensor(AUC_Y.ravel()))
    assert one.accumulate()[0] == pytest.approx(0.8125)
    with pytest.raises(ValueError, match=r"Auc is binary.*\[8, 3\]"):
        Auc().update(torch.rand(8, 3), torch.zeros(8))
    with pytest.raises(ValueError, match=r"Expected `curve` to be 'ROC' or 'PR'"):
        Auc(curve="roc")


def test_labels_that_do_not_fit_the_outputs_are_refused():
    with pytest.raises(ValueError, match=r"Expected one label per prediction"):
        Accuracy().update(torch.rand(4, 3), torch.zeros(5, dtype=torch.long))
