"""``sampan bench experiments``: what recording runs costs, and how fast recorded runs are compared.

1. The digits CNN's ``fit`` with recording on and off, interleaved (shuffled order, medians): the
   recorder's share of the fit time. The store writes happen on a writer thread when the fit ends;
   the time to ``flush`` them is shown apart (after ``fit`` returns, not on the training path).
2. A fresh process that imports Sampan and fits a small network for 2 epochs, interleaved: recording off,
   recording written by the process itself (``SAMPAN_RECORDER_SERVICE=0``: it imports MLflow), and recording
   through the warm recording service (:mod:`sampan.experiments.service`). The process's CPU seconds, plus the
   service's CPU for those writes: what each fitting process (a lesson kernel, a job, a sweep trial) costs.
3. A store of 1,000 runs x 100 epochs (built once, in a temporary folder): loading the run list,
   then the compare table and the metric histories of 10 selected runs (what ``RunCompare`` draws).
"""
from __future__ import annotations

import contextlib
import os
import random
import statistics
import tempfile
import time

import torch

from sampan.bench._timing import print_table


@contextlib.contextmanager
def _temporary_store():
    with tempfile.TemporaryDirectory(prefix="sampan-bench-store-") as folder:
        saved = os.environ.get("SAMPAN_TRACKING_URI")
        os.environ["SAMPAN_TRACKING_URI"] = f"sqlite:///{folder}/mlflow.db"
        try:
            yield folder
        finally:
            from sampan.experiments import flush

            flush()
            if saved is None:
                os.environ.pop("SAMPAN_TRACKING_URI", None)
            else:
                os.environ["SAMPAN_TRACKING_URI"] = saved


def _fit(data, epochs: int, record: bool) -> tuple[float, float]:
    """One fit's wall time and its thread's CPU time (steadier on a shared machine); the writes it left are
    flushed after the clocks stop (they are not on the training path, but must not slow the next candidate)."""
    import sampan
    import sampan.experiments as ex
    from sampan.bench.fit import _cnn

    torch.manual_seed(0)
    net = _cnn()
    model = sampan.Model(net, inputs=sampan.InputSpec([None, 1, 8, 8], "float32", "image"))
    model.prepare(torch.optim.Adam(net.parameters(), 1e-3), torch.nn.CrossEntropyLoss(), sampan.metric.Accuracy())
    (ex.enable if record else ex.disable)()
    try:
        start, cpu = time.perf_counter(), time.thread_time()
        model.fit(data, epochs=epochs, batch_size=32, verbose=0)
        return time.perf_counter() - start, time.thread_time() - cpu
    finally:
        ex.enable()
        ex.flush()


def overhead(quick: bool = False) -> dict:
    from sampan.data import load_dataset

    data = load_dataset("digits", "train")
    epochs, repeat = (2, 3) if quick else (5, 9)
    with _temporary_store():
        _fit(data, 1, True)  # MLflow imported and the store created once, as in a session that recorded before
        runs: dict[str, list[tuple[float, float]]] = {"recording off": [], "recording on": []}
        order = random.Random(0)
        for _ in range(repeat):  # interleaved, in a shuffled order each round
            for name in order.sample(sorted(runs), 2):
                runs[name].append(_fit(data, epochs, name == "recording on"))
        wall = {k: statistics.median(w for w, _ in v) for k, v in runs.items()}
        cpu = {k: statistics.median(c for _, c in v) for k, v in runs.items()}
        flushes = []
        for _ in range(3):
            start = time.perf_counter()
            fit_s, _ = _fit(data, 1, True)  # the flush inside _fit is what this times
            flushes.append(time.perf_counter() - start - fit_s)
    off = "recording off"
    rows = [{"fit": k, "wall s": wall[k], "wall vs off": wall[k] / wall[off], "thread CPU s": cpu[k],
             "CPU vs off": cpu[k] / cpu[off]} for k in runs]
    print_table(f"recording overhead: digits CNN, {epochs} epochs, batch 32, median of {repeat} interleaved, "
                f"{torch.get_num_threads()} threads", rows, ["fit", "wall s", "wall vs off", "thread CPU s",
                                                             "CPU vs off"])
    print(f"writes left after fit returns: {statistics.median(flushes) * 1000:.0f} ms (writer thread, off the "
          f"training path)")
    return {"off_s": wall[off], "on_s": wall["recording on"], "overhead_wall": wall["recording on"] / wall[off] - 1,
            "overhead_cpu": cpu["recording on"] / cpu[off] - 1, "flush_after_fit_s": statistics.median(flushes)}


_PROCESS_FIT = """\
import torch, sampan
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
model = sampan.Model(net)
model.prepare(torch.optim.Adam(net.parameters(), 1e-3), torch.nn.CrossEntropyLoss())
data = torch.utils.data.TensorDataset(torch.randn(256, 16), torch.randint(0, 2, (256,)))
model.fit(data, epochs=2, batch_size=32, verbose=0)
"""


def fresh_process(quick: bool = False) -> dict:
    """CPU seconds of one fitting process: recording off, in-process, and through the warm service."""
    import resource
    import shutil
    import subprocess
    import sys

    import psutil

    from sampan.experiments import service

    repeat = 3 if quick else 7
    tmp = tempfile.mkdtemp(prefix="sb", dir="/tmp" if os.path.isdir("/tmp") else None)  # short: a socket path
    try:
        uri = f"sqlite:///{tmp}/mlflow.db"
        base = {**os.environ, "TMPDIR": tmp, "SAMPAN_TRACKING_URI": uri, "OMP_NUM_THREADS": "1"}
        cases = {"recording off": {"SAMPAN_TRACKING": "0"}, "in the process": {service.SWITCH_ENV: "0"},
                 "through the service": {}}

        def cpu_of(extra: dict) -> float:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run([sys.executable, "-c", _PROCESS_FIT], env={**base, **extra}, check=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

        cpu_of({})  # creates the store and starts the service (its MLflow import is paid once, not per fit)
        saved_tmp, tempfile.tempdir = tempfile.tempdir, tmp
        try:
            serving = psutil.Process(service.call("ping", uri=uri)["pid"])
        finally:
            tempfile.tempdir = saved_tmp
        times: dict[str, list[float]] = {k: [] for k in cases}
        service_cpu = []
        order = random.Random(0)
        for _ in range(repeat):
            for name in order.sample(sorted(cases), len(cases)):
                before = sum(serving.cpu_times()[:2])
                times[name].append(cpu_of(cases[name]))
                if name == "through the service":
                    service_cpu.append(sum(serving.cpu_times()[:2]) - before)
        med = {k: statistics.median(v) for k, v in times.items()}
        extra = {"recording off": 0.0, "in the process": 0.0, "through the service": statistics.median(service_cpu)}
        rows = [{"fitting process": k, "process CPU s": med[k], "service CPU s": extra[k],
                 "recording costs CPU s": med[k] + extra[k] - med["recording off"]} for k in cases]
        print_table(f"recording in a fresh process: import sampan + a 2-epoch fit, median of {repeat} interleaved", rows,
                    ["fitting process", "process CPU s", "service CPU s", "recording costs CPU s"])
        return {k: {"process_cpu_s": med[k], "service_cpu_s": extra[k]} for k in cases}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # the bench's service sees its socket gone and leaves


def _build_store(n_runs: int, epochs: int) -> float:
    from mlflow.entities import Metric, Param

    from sampan.experiments import store

    client = store.client()
    exp = store.experiment_id()
    start = time.perf_counter()
    now = int(time.time() * 1000)
    for i in range(n_runs):
        run = client.create_run(exp, run_name=f"run-{i}", tags={"sampan.kind": "fit"})
        params = [Param("optimizer.lr", str(10 ** (-1 - i % 4))), Param("batch_size", str(32 * (1 + i % 3))),
                  Param("epochs", str(epochs)), Param("model", "CNN"), Param("seed", str(i % 5))]
        metrics = [Metric("loss", 2.0 / (e + 1) + (i % 7) * 0.01, now, e) for e in range(1, epochs + 1)]
        metrics += [Metric("eval_acc", 1 - 1.0 / (e + 1) - (i % 7) * 0.01, now, e) for e in range(1, epochs + 1)]
        client.log_batch(run.info.run_id, metrics=metrics, params=params)
        client.set_terminated(run.info.run_id)
    return time.perf_counter() - start


def compare_render(quick: bool = False) -> dict:
    from sampan.experiments import compare

    n_runs, epochs, repeat = (100, 100, 3) if quick else (1000, 100, 5)
    with _temporary_store():
        build = _build_store(n_runs, epochs)
        loads, renders = [], []
        for _ in range(repeat):
            start = time.perf_counter()
            rows = compare.list_runs(max_results=n_runs)
            loads.append(time.perf_counter() - start)
            start = time.perf_counter()
            chosen = rows[:10]
            compare.compare_table(chosen)
            compare.differing_params(rows)
            curves = compare.histories([r.run_id for r in chosen], "eval_acc")
            renders.append(time.perf_counter() - start)
        assert len(rows) == n_runs and all(len(c) == epochs for c in curves.values())
    result = {"runs": n_runs, "epochs": epochs, "build_s": build, "load_list_s": statistics.median(loads),
              "table_and_curves_10_s": statistics.median(renders)}
    print_table(f"compare: a store of {n_runs} runs x {epochs} epochs (2 metrics), median of {repeat}", [
        {"step": "load the run list (all runs, params, last metrics)", "seconds": result["load_list_s"]},
        {"step": "compare table + eval_acc histories of 10 selected runs", "seconds": result["table_and_curves_10_s"]},
        {"step": "(building the store, once)", "seconds": build}], ["step", "seconds"])
    return result


def run(quick: bool = False) -> dict:
    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", torch.get_num_threads()))))
    return {"overhead": overhead(quick), "fresh_process": fresh_process(quick), "compare": compare_render(quick)}
