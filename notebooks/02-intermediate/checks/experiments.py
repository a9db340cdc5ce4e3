"""Checks, hints and reference solutions of the lesson experiments (hidden from the notebook).

``differing`` is tried on the lesson's two runs and on parameter dicts drawn at random. ``best_lr`` is tried
on the lesson's sweep and on a hidden sweep the check writes into the store for the occasion (trial runs with
random learning rates and accuracies, one trial without a result, and a child run that is not a trial); the
hidden runs are deleted again afterwards.
"""
import random
import uuid

from sampan.path.exercise import Exercise, Incorrect, expect


def _differing(a, b):
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


class differing(Exercise):
    hints = (
        {"en": "Look at every name that appears in either dict (a set union) and keep those whose values are not"
               " equal; a name missing from one of the two differs too. Return them sorted.",
         "zh": "看两个字典中出现过的每一个名字（取集合的并集），留下取值不相等的那些；只在其中一个字典里出现的名字也算不同。"
               "返回排好序的列表。"},
        {"en": "return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))",
         "zh": "return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))"},
    )
    solution = '''
def differing(a, b):
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
'''

    def verify(self, differing, runs=None):
        rng = random.Random()
        cases = [(dict(runs[0].data.params), dict(runs[1].data.params))] if runs and len(runs) >= 2 else []
        names = ["optimizer.lr", "batch_size", "epochs", "hidden", "seed", "device", "model", "optimizer.momentum"]
        for _ in range(4):
            a = {k: str(rng.choice([1, 2, 0.1, 0.01, "cpu", "SGD"])) for k in rng.sample(names, rng.randint(3, 7))}
            b = {k: (v if rng.random() < 0.5 else v + "0") for k, v in a.items()}
            if rng.random() < 0.5:  # a name only one of the runs has
                b[rng.choice([n for n in names if n not in a] or ["extra"])] = "1"
            cases.append((a, b))
        for a, b in cases:
            got = differing(dict(a), dict(b))
            if not isinstance(got, list):
                raise Incorrect({"en": f"differing(a, b) must return a list, got {type(got).__name__}",
                                 "zh": f"differing(a, b) 必须返回一个列表，得到的是 {type(got).__name__}"})
            params = sorted(set(a) | set(b))
            expect(got, _differing(a, b), {"en": f"differing of two runs with parameters {params}",
                                           "zh": f"参数为 {params} 的两次运行的 differing"})


def _hidden_sweep():
    """A sweep written into the store for the check: its name, the expected lr, the ids of its runs."""
    from mlflow.entities import Metric, Param

    from sampan.experiments import store

    client, exp = store.client(), store.experiment_id()
    rng, name = random.Random(), f"check-{uuid.uuid4().hex[:8]}"
    accs = rng.sample(range(500, 990), 5)
    lrs = [round(10 ** rng.uniform(-3, -0.3), 6) for _ in accs]
    ids = []
    for number, (acc, lr) in enumerate(zip(accs, lrs)):
        run = client.create_run(exp, tags={"sampan.kind": "trial", "sampan.sweep": name, "sampan.trial": str(number)})
        client.log_batch(run.info.run_id, params=[Param("lr", str(lr))], metrics=[Metric("eval_acc", acc / 1000, 0, 0)])
        client.set_terminated(run.info.run_id)
        ids.append(run.info.run_id)
    pruned = client.create_run(exp, tags={"sampan.kind": "trial", "sampan.sweep": name, "sampan.trial": "5"})
    client.log_batch(pruned.info.run_id, params=[Param("lr", "0.5")])
    client.set_terminated(pruned.info.run_id, status="KILLED")
    child = client.create_run(exp, tags={"sampan.kind": "fit", "sampan.sweep": name,
                                         "mlflow.parentRunId": ids[0]})  # a fit inside a trial: not a trial
    client.log_batch(child.info.run_id, params=[Param("optimizer.lr", "0.9")],
                     metrics=[Metric("eval_acc", 0.999, 0, 0)])
    client.set_terminated(child.info.run_id)
    ids += [pruned.info.run_id, child.info.run_id]
    return name, lrs[accs.index(max(accs))], ids


class best_lr(Exercise):
    hints = (
        {"en": "Ask the store for the runs tagged with this sweep's name that are trials (`sampan.kind`), keep those"
               " that have an `eval_acc` metric, take the one with the largest, and read its `lr` parameter"
               " (a string: convert it).",
         "zh": "向记录库查询带有这次扫描名称、且是试验（`sampan.kind`）的运行，只保留有 `eval_acc` 指标的，"
               "取其中最大的那个，再读出它的 `lr` 参数（是字符串：记得转换）。"},
        {"en": "runs = experiments.search_runs(f\"tags.`sampan.sweep` = '{sweep_name}' and tags.`sampan.kind` = 'trial'\");"
               " best = max((r for r in runs if 'eval_acc' in r.data.metrics), key=lambda r: r.data.metrics['eval_acc']);"
               " return float(best.data.params['lr'])",
         "zh": "runs = experiments.search_runs(f\"tags.`sampan.sweep` = '{sweep_name}' and tags.`sampan.kind` = 'trial'\")；"
               "best = max((r for r in runs if 'eval_acc' in r.data.metrics), key=lambda r: r.data.metrics['eval_acc'])；"
               "return float(best.data.params['lr'])"},
    )
    solution = '''
def best_lr(sweep_name):
    runs = experiments.search_runs(f"tags.`sampan.sweep` = '{sweep_name}' and tags.`sampan.kind` = 'trial'")
    best = max((r for r in runs if "eval_acc" in r.data.metrics), key=lambda r: r.data.metrics["eval_acc"])
    return float(best.data.params["lr"])
'''

    def verify(self, best_lr, sweep=None):
        import sampan.experiments as experiments

        if sweep is not None:
            valued = [t for t in sweep.trials() if t.value is not None]  # pruned trials keep their last value
            complete = [t for t in valued if t.state.name == "COMPLETE"] or valued
            tops = {max(t.value for t in valued), max(t.value for t in complete)}
            ties = [t.params["lr"] for t in valued if t.value in tops]  # equal accuracies: any of them is right
            got = best_lr(sweep.name)
            self._expect_lr(got, ties, {"en": f"best_lr({sweep.name!r}), the lesson's sweep",
                                        "zh": f"best_lr({sweep.name!r})（本课的超参数搜索）"})
        name, expected, ids = _hidden_sweep()
        try:
            got = best_lr(name)
        finally:
            for run_id in ids:
                experiments.client().delete_run(run_id)
        self._expect_lr(got, [expected], {"en": f"best_lr of a sweep the check wrote ({name!r})",
                                          "zh": f"best_lr 作用于检查程序写入的一次搜索（{name!r}）"})

    @staticmethod
    def _expect_lr(got, choices, what):
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            raise Incorrect({"en": f"{what['en']} must return the learning rate as a float, got {type(got).__name__}"
                                   f" {got!r}",
                             "zh": f"{what['zh']}必须以浮点数返回学习率，得到的是 {type(got).__name__} {got!r}"})
        if not any(abs(got - lr) <= 1e-6 * abs(lr) for lr in choices):
            expect(got, choices[0], what, rtol=1e-6)
