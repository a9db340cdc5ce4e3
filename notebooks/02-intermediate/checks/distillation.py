"""Checks, hints and reference solutions of the lesson distillation (hidden from the notebook).

The check calls the learner's ``soft_cross_entropy`` on random logits and temperatures drawn here and
compares its value and its gradient with an independent float64 NumPy computation.
"""
import numpy as np
import torch

from sampan.path.exercise import Exercise, Incorrect, expect


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _reference(student: np.ndarray, teacher: np.ndarray, T: float) -> tuple[float, np.ndarray]:
    """Value and gradient (with respect to the student's logits) of T² · mean soft cross-entropy."""
    p_teacher, p_student = _softmax(teacher / T), _softmax(student / T)
    log_student = np.log(p_student)
    value = T * T * float(np.mean(-(p_teacher * log_student).sum(axis=1)))
    grad = T * (p_student - p_teacher) / len(student)
    return value, grad


class soft_cross_entropy(Exercise):
    hints = (
        {"en": "Soften both distributions with the same T: softmax of the teacher's logits / T and log_softmax of the "
               "student's logits / T. Then -sum(p * log q) over the classes, the mean over the batch, times T².",
         "zh": "用同一个 T 软化两个分布：教师 logits / T 的 softmax，学生 logits / T 的 log_softmax。"
               "然后在类别上求 -sum(p * log q)，在批次上取均值，再乘以 T²。"},
        {"en": "p = torch.softmax(teacher_logits / T, dim=1); log_q = torch.log_softmax(student_logits / T, dim=1); "
               "return -(p * log_q).sum(dim=1).mean() * T ** 2",
         "zh": "p = torch.softmax(teacher_logits / T, dim=1); log_q = torch.log_softmax(student_logits / T, dim=1); "
               "return -(p * log_q).sum(dim=1).mean() * T ** 2"},
    )
    solution = '''
def soft_cross_entropy(student_logits, teacher_logits, T):
    p = torch.softmax(teacher_logits / T, dim=1)
    log_q = torch.log_softmax(student_logits / T, dim=1)
    return -(p * log_q).sum(dim=1).mean() * T ** 2
'''

    def verify(self, soft_cross_entropy):
        rng = np.random.default_rng(int(torch.randint(0, 2**31 - 1, ())))
        cases = [(2, 3, 1.0)] + [(int(rng.integers(2, 9)), int(rng.integers(3, 13)), float(T))
                                 for T in rng.choice([1.0, 2.5, 4.0, 7.0], size=4, replace=False)]
        for n, classes, T in cases:
            student = rng.normal(0, float(rng.uniform(1, 5)), size=(n, classes))
            teacher = rng.normal(0, float(rng.uniform(1, 5)), size=(n, classes))
            value, grad = _reference(student, teacher, T)
            s = torch.tensor(student, dtype=torch.float32, requires_grad=True)
            t = torch.tensor(teacher, dtype=torch.float32)
            got = soft_cross_entropy(s, t, T)
            what = {"en": f"soft_cross_entropy on [{n}, {classes}] logits with T = {T:g}",
                    "zh": f"soft_cross_entropy 作用于 [{n}, {classes}] 的 logits、T = {T:g} 时"}
            if not isinstance(got, torch.Tensor) or got.numel() != 1:
                raise Incorrect({"en": f"{what['en']} must return a one-element tensor (the batch mean),"
                                       f" got {got!r:.80}",
                                 "zh": f"{what['zh']}必须返回只有一个元素的张量（批次均值），得到的是 {got!r:.80}"})
            got_value = float(got.detach().reshape(()))
            if T != 1.0 and np.isclose(got_value, value / (T * T), rtol=1e-4):
                raise Incorrect({"en": f"{what['en']}: the value is right without the T² factor; multiply by T²",
                                 "zh": f"{what['zh']}：不乘 T² 时数值是对的；请乘以 T²"})
            if np.isclose(got_value, value * n, rtol=1e-4):
                raise Incorrect({"en": f"{what['en']}: you summed over the batch; take the mean over the {n} rows",
                                 "zh": f"{what['zh']}：你在批次上求了和；请对 {n} 行取均值"})
            expect(got_value, value, what, rtol=1e-4, atol=1e-6)
            if not got.requires_grad:
                raise Incorrect({"en": f"{what['en']}: the result has no gradient; compute it with torch operations",
                                 "zh": f"{what['zh']}：结果没有梯度；请用 torch 运算来计算"})
            got.reshape(()).backward()
            expect(s.grad, grad, {"en": f"the gradient of {what['en']} with respect to the student's logits",
                                  "zh": f"{what['zh']}对学生 logits 的梯度"}, rtol=1e-3, atol=1e-6)
