"""Checks, hints and reference solutions of the lesson first_model (hidden from the notebook)."""
import numpy as np

from sampan.path.exercise import Exercise, Incorrect


def _hidden_matrices(count: int = 4):
    rng = np.random.default_rng()
    for _ in range(count):
        k = int(rng.integers(3, 11))
        m = rng.integers(0, 5, size=(k, k)) + np.diag(rng.integers(50, 100, size=k))
        i, j = rng.choice(k, size=2, replace=False)
        m[i, j] = m[~np.eye(k, dtype=bool)].max() + int(rng.integers(1, 4))  # one clear worst pair
        yield m


class most_confused(Exercise):
    hints = (
        {"en": "Mistakes are the cells off the diagonal: blank out the diagonal, then find the largest cell.",
         "zh": "错误都在对角线之外：先把对角线清零，再找出最大的格子。"},
        {"en": "off = matrix - np.diag(np.diag(matrix)); then np.unravel_index(off.argmax(), off.shape), as ints",
         "zh": "off = matrix - np.diag(np.diag(matrix))；然后 np.unravel_index(off.argmax(), off.shape)，转成 int"},
    )
    solution = '''
def most_confused(matrix):
    off_diagonal = matrix - np.diag(np.diag(matrix))
    return tuple(int(i) for i in np.unravel_index(off_diagonal.argmax(), off_diagonal.shape))
'''

    def verify(self, most_confused, *, matrix=None):
        matrices = ([np.asarray(matrix)] if matrix is not None else []) + list(_hidden_matrices())
        for m in matrices:
            off = m - np.diag(np.diag(m))
            got = most_confused(m.copy())
            if not (isinstance(got, tuple) and len(got) == 2 and all(isinstance(v, (int, np.integer)) for v in got)):
                raise Incorrect({"en": f"most_confused(matrix) must return a tuple of two ints, got {got!r}",
                                 "zh": f"most_confused(matrix) 必须返回由两个整数组成的元组，得到的是 {got!r}"})
            true, pred = (int(v) for v in got)
            if true == pred:
                raise Incorrect({"en": f"{got} is on the diagonal: those are the correct answers, not mistakes",
                                 "zh": f"{got} 在对角线上：那里统计的是预测正确的数量，不是错误"})
            if off[true, pred] != off.max():
                raise Incorrect({"en": f"on a {len(m)}×{len(m)} matrix the cell {got} holds {off[true, pred]} mistakes, "
                                       f"but the largest off-diagonal count is {off.max()}",
                                 "zh": f"在一个 {len(m)}×{len(m)} 的矩阵上，格子 {got} 中有 {off[true, pred]} 个错误，"
                                       f"但对角线以外的最大计数是 {off.max()}"})
