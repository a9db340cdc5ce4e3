"""``sampan sweep NOTEBOOK -p KEY=RANGE ... --trials N --jobs J``: an Optuna sweep over a notebook.

Each trial executes the notebook with papermill, its ``parameters`` cell set to the trial's values,
and is recorded as an MLflow run; hopeless trials are pruned from their epochs' metric.

Examples:
    sampan sweep train.ipynb -p lr=1e-4:1e-1:log -p batch_size=32,64 --trials 20 --jobs 2
    sampan sweep train.ipynb -p dropout=0:0.5 --metric eval_loss --direction minimize
Ranges: LOW:HIGH, LOW:HIGH:log, LOW:HIGH:STEP, A,B,C.
"""
from __future__ import annotations

import argparse
import sys


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("sweep", help="an Optuna sweep over a notebook's parameters, every trial a run",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("notebook", help="the notebook; its `parameters` cell must define every swept name")
    p.add_argument("-p", "--param", action="append", default=[], metavar="KEY=RANGE", help="a swept parameter")
    p.add_argument("--trials", type=int, default=20, help="trials in all (default 20)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--metric", default="eval_acc", help="the value optimised (default eval_acc)")
    p.add_argument("--direction", choices=("auto", "maximize", "minimize"), default="auto")
    p.add_argument("--pruner", choices=("median", "none"), default="median")
    p.add_argument("--name", default=None, help="study name; an existing study is continued")
    p.add_argument("--kernel", default=None, help="Jupyter kernel for the trials")


def run(args) -> int:
    from sampan.errors import SampanError
    from sampan.experiments.space import parse_assignments
    from sampan.experiments.store import tracking_uri
    from sampan.experiments.sweeps import sweep

    try:
        space = parse_assignments(args.param, "-p")
        handle = sweep(args.notebook, space, trials=args.trials, jobs=args.jobs, metric=args.metric,
                       direction=args.direction, pruner=args.pruner, name=args.name, kernel=args.kernel)
        print(f"sweep {handle.name}: {args.trials} trials on {args.jobs} worker(s); study in {handle.storage}, "
              f"runs in {tracking_uri()}")
        handle.wait()
    except (SampanError, ValueError, FileNotFoundError) as exc:
        print(f"sampan sweep: {exc}", file=sys.stderr)
        return 2
    return _report(handle)


def _report(handle) -> int:
    trials = handle.trials()
    for t in trials:
        value = "" if t.value is None else f"{handle.metric}={t.value:.4g}"
        print(f"  trial {t.number:3d}  {t.state.name.lower():8s} {value:24s} {t.params}")
    done = [t for t in trials if t.value is not None and t.state.name == "COMPLETE"]
    if not done:
        print("no trial completed", file=sys.stderr)
        return 1
    print(f"best: {handle.metric}={handle.study.best_value:.4g} with {handle.best_params}")
    return 0
