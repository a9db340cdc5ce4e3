"""Checks, hints and reference solutions of the lesson environment_check (hidden from the notebook)."""
import random
from types import SimpleNamespace

from sampan.path.exercise import Exercise, Incorrect, expect

_NAMES = ["python", "torch", "cpu_train", "threads", "data_home", "compile", "distributed", "cuda", "widgets"]


def _hidden_reports(count: int = 4):
    """Reports the learner never sees: random names, random failures (one where everything passed)."""
    rng = random.Random()
    for k in range(count):
        names = rng.sample(_NAMES, rng.randint(2, len(_NAMES)))
        items = [SimpleNamespace(name=n, ok=(k == 0) or rng.random() < 0.6, detail="") for n in names]
        yield SimpleNamespace(items=items, ok=all(i.ok for i in items))


class failed(Exercise):
    hints = (
        {"en": "Walk over report.items and keep the name of every item whose ok is False.",
         "zh": "遍历 report.items，保留每个 ok 为 False 的项的 name。"},
        {"en": "return [item.name for item in report.items if ...]",
         "zh": "return [item.name for item in report.items if ...]"},
    )
    solution = '''
def failed(report):
    return [item.name for item in report.items if not item.ok]
'''

    def verify(self, failed, *, report=None):
        reports = ([report] if report is not None else []) + list(_hidden_reports())
        for rep in reports:
            got = failed(rep)
            want = [i.name for i in rep.items if not i.ok]
            if not isinstance(got, (list, tuple)):
                raise Incorrect({"en": f"failed(report) must return a list of names, got {type(got).__name__}",
                                 "zh": f"failed(report) 必须返回名称列表，得到的是 {type(got).__name__}"})
            if sorted(got) != sorted(want):
                shown = {i.name: i.ok for i in rep.items}
                raise Incorrect({"en": f"for a report with items {shown} it returned {list(got)}, expected {want}",
                                 "zh": f"对于各项为 {shown} 的报告，返回了 {list(got)}，应为 {want}"})


class batch_mib(Exercise):
    hints = (
        {"en": "Count the elements (n × c × h × w), multiply by the bytes of one float32, convert bytes to MiB.",
         "zh": "先数元素个数（n × c × h × w），乘以一个 float32 的字节数，再把字节换算成 MiB。"},
        {"en": "n * c * h * w * 4 / 2**20", "zh": "n * c * h * w * 4 / 2**20"},
    )
    solution = '''
def batch_mib(n, c, h, w):
    return n * c * h * w * 4 / 2**20
'''

    def verify(self, batch_mib):
        import torch

        rng = random.Random()
        shapes = [(64, 3, 224, 224)] + [(rng.randint(1, 128), rng.choice([1, 3, 4]), rng.randint(8, 256),
                                          rng.randint(8, 256)) for _ in range(4)]
        for shape in shapes:
            expect(batch_mib(*shape), torch.empty(shape).nbytes / 2**20, f"batch_mib{shape}", rtol=1e-3)
