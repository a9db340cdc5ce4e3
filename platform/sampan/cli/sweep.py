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
    from sampan.experiments.store import tracking_uri
    from sampan.experiments.sweeps import sweep

    try:
        space = _space(args)
        handle = sweep(args.notebook, space, trials=args.trials, jobs=args.jobs, metric=args.metric,
                       direction=args.direction, pruner=args.pruner, name=args.name, kernel=args.kernel)
        print(f"sweep {handle.name}: {args.trials} trials on {min(args.jobs, args.trials)} worker(s); study in "
              f"{handle.storage}, runs in {tracking_uri()}")
        handle.wait()
    except (SampanError, ValueError, FileNotFoundError) as exc:
        print(f"sampan sweep: {exc}", file=sys.stderr)
        return 2
    return _report(handle)


def _space(args) -> dict[str, str]:
    """The swept parameters, after the command's own numbers are checked (worded as options, not arguments)."""
    from sampan.errors import bad_argument, check_int
    from sampan.experiments.space import parse_assignments

    check_int("--trials", args.trials, fix="pass --trials 1 or more")
    check_int("--jobs", args.jobs, fix="pass --jobs 1 or more")
    if not args.param:
        raise ValueError(bad_argument("-p", args.param, "at least one swept parameter KEY=RANGE",
                                      f"pass at least one -p KEY=RANGE, e.g. `sampan sweep {args.notebook} "
                                      f"-p lr=1e-4:1e-1:log`"))
    return parse_assignments(args.param, "-p")


def _report(handle) -> int:
    trials = handle.trials()
    failed = [t for t in trials if t.state.name == "FAIL"]
    errors = _errors(handle) if failed else {}
    for t in trials:
        value = "" if t.value is None else f"{handle.metric}={t.value:.4g}"
        print(f"  trial {t.number:3d}  {t.state.name.lower():8s} {value:24s} {t.params}")
        if t in failed:
            print(f"             error: {errors.get(t.number) or 'not recorded; see the worker log below'}")
    done = [t for t in trials if t.value is not None and t.state.name == "COMPLETE"]
    if failed or not done:
        _print_logs(handle)
    if not done:
        print("no trial completed", file=sys.stderr)
        return 1
    print(f"best: {handle.metric}={handle.study.best_value:.4g} with {handle.best_params}")
    return 0


def _errors(handle) -> dict[int, str]:
    """Trial number -> the error its run recorded (the ``sampan.error`` tag)."""
    try:
        runs = handle.runs()
    except Exception:  # the store is unreadable: the worker logs still say why
        return {}
    return {int(r.data.tags["sampan.trial"]): r.data.tags["sampan.error"] for r in runs
            if "sampan.error" in r.data.tags and r.data.tags.get("sampan.trial", "").isdigit()}


def _print_logs(handle) -> None:
    """Each worker's log (in ``$SAMPAN_DATA/sweeps/<name>/``) with its last line, where failures are explained."""
    from sampan.experiments.sweeps import sweeps_dir

    for log in sorted((sweeps_dir() / handle.name).glob("worker-*.log")):
        lines = [line.strip() for line in log.read_text(encoding="utf-8", errors="replace").splitlines()
                 if line.strip()]
        print(f"worker log: {log}" + (f"\n  last line: {lines[-1]}" if lines else ""), file=sys.stderr)
