"""Checks, hints and reference solutions of the lesson transfer_learning_defects (hidden from the notebook).

Each check calls the learner's function on the lesson's own values and on inputs drawn at random here,
and compares it with an independent computation (float64 NumPy, scikit-learn's ``f1_score``).
"""
import numpy as np
import torch

from sampan.path.exercise import Exercise, Incorrect, expect


def _generator() -> np.random.Generator:
    return np.random.default_rng(int(torch.randint(0, 2**31 - 1, ())))


class effective_number_weights(Exercise):
    hints = (
        {"en": "Count each class with torch.bincount(labels, minlength=num_classes); then apply the formula to the "
               "counts and rescale so that the weights sum to num_classes (average 1).",
         "zh": "先用 torch.bincount(labels, minlength=num_classes) 统计每个类别的数量；再把公式用到这些数量上，"
               "最后缩放使权重之和等于 num_classes（平均值为 1）。"},
        {"en": "n = torch.bincount(labels, minlength=num_classes).double(); w = (1 - beta) / (1 - beta ** n); "
               "return (w * num_classes / w.sum()).float()",
         "zh": "n = torch.bincount(labels, minlength=num_classes).double(); w = (1 - beta) / (1 - beta ** n); "
               "return (w * num_classes / w.sum()).float()"},
    )
    solution = '''
def effective_number_weights(labels, num_classes, beta):
    n = torch.bincount(labels, minlength=num_classes).double()
    w = (1 - beta) / (1 - beta ** n)
    return (w * num_classes / w.sum()).float()
'''

    @staticmethod
    def expected(labels: torch.Tensor, num_classes: int, beta: float) -> np.ndarray:
        n = np.bincount(labels.numpy(), minlength=num_classes).astype(np.float64)
        w = np.ones(num_classes) if beta == 0 else (1 - beta) / (1 - np.power(beta, n))
        return w * num_classes / w.sum()

    def verify(self, effective_number_weights):
        rng = _generator()
        cases = [(torch.tensor([0, 0, 0, 1]), 2, 0.9), (torch.tensor([0, 1, 1, 2, 2, 2]), 3, 0.0)]
        for _ in range(3):
            k = int(rng.integers(2, 7))
            sizes = rng.integers(1, 60, size=k)
            labels = torch.from_numpy(rng.permutation(np.repeat(np.arange(k), sizes))).long()
            cases.append((labels, k, float(rng.choice([0.5, 0.9, 0.99, 0.999]))))
        for labels, k, beta in cases:
            got = effective_number_weights(labels.clone(), k, beta)
            counts = np.bincount(labels.numpy()).tolist()
            what = {"en": f"effective_number_weights(labels with counts {counts}, {k}, beta={beta})",
                    "zh": f"effective_number_weights（各类样本数 {counts}，{k} 类，beta={beta}）"}
            if not isinstance(got, torch.Tensor) or not got.is_floating_point() or tuple(got.shape) != (k,):
                raise Incorrect({"en": f"{what['en']} must return a float tensor of shape ({k},), got {got!r:.80}",
                                 "zh": f"{what['zh']}必须返回形状为 ({k},) 的浮点张量，得到的是 {got!r:.80}"})
            if abs(got.double().mean().item() - 1) > 1e-4:
                raise Incorrect({"en": f"{what['en']}: the weights average {got.double().mean().item():.4g}, not 1",
                                 "zh": f"{what['zh']}：权重的平均值是 {got.double().mean().item():.4g}，不是 1"})
            expect(got, self.expected(labels, k, beta), what, rtol=1e-4, atol=1e-6)


def _macro_f1_reference(cm: np.ndarray) -> float:
    from sklearn.metrics import f1_score

    true, pred = np.nonzero(cm)
    repeats = cm[true, pred]
    return float(f1_score(np.repeat(true, repeats), np.repeat(pred, repeats), average="macro",
                          labels=list(range(len(cm))), zero_division=0))


class macro_f1(Exercise):
    hints = (
        {"en": "np.diag(cm) holds the true positives; a column sums to how often a class was predicted, a row to how "
               "often it really occurs. Guard the divisions against 0.",
         "zh": "np.diag(cm) 是各类的真正例（true positive）；某一列的和是该类被预测的次数，某一行的和是它实际出现的次数。"
               "除法要防止分母为 0。"},
        {"en": "precision = tp / max(column sums, 1); recall = tp / max(row sums, 1); "
               "f1 = 2 * precision * recall / max(precision + recall, tiny); return float(mean of f1)",
         "zh": "precision = tp / max(列和, 1)；recall = tp / max(行和, 1)；"
               "f1 = 2 * precision * recall / max(precision + recall, 很小的数)；返回 float(f1 的均值)"},
    )
    solution = '''
def macro_f1(cm):
    cm = np.asarray(cm, dtype=float)
    tp = np.diag(cm)
    precision = tp / np.maximum(cm.sum(axis=0), 1)
    recall = tp / np.maximum(cm.sum(axis=1), 1)
    return float(np.mean(2 * precision * recall / np.maximum(precision + recall, 1e-12)))
'''

    def verify(self, macro_f1, cm=None, reported=None):
        rng = _generator()
        matrices = [] if cm is None else [np.asarray(cm, dtype=np.int64)]
        for _ in range(3):
            k = int(rng.integers(2, 6))
            m = rng.integers(0, 30, size=(k, k)) + np.diag(rng.integers(5, 80, size=k))
            matrices.append(m)
        never_predicted = rng.integers(1, 20, size=(4, 4)) + np.diag([40, 30, 20, 10])
        never_predicted[:, int(rng.integers(0, 4))] = 0  # one class is never predicted: its F1 is 0
        matrices.append(never_predicted)
        for m in matrices:
            got = macro_f1(m.copy())
            expect(got, _macro_f1_reference(m), {"en": f"macro_f1 of the {len(m)}x{len(m)} matrix {m.tolist()}",
                                                 "zh": f"{len(m)}x{len(m)} 矩阵 {m.tolist()} 的 macro_f1"}, rtol=1e-6)
        if cm is not None and reported is not None:
            expect(macro_f1(np.asarray(cm).copy()), float(reported),
                   {"en": "macro_f1(cm) against the F1 the metric reported", "zh": "macro_f1(cm) 与指标报告的 F1 对比"},
                   rtol=1e-4)
