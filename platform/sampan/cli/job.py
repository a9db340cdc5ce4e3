"""``sampan job run|list|logs|cancel``: notebooks executed in background processes that outlive the kernel.

Examples:
    sampan job run train.ipynb -p epochs=20 -p lr=0.01
    sampan job list
    sampan job logs 20261203-101500-ab12cd
    sampan job cancel 20261203-101500-ab12cd
"""
from __future__ import annotations

import argparse
import sys


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("job", help="background jobs: run, list, logs, cancel", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="job_command", metavar="ACTION")
    start = sub.add_parser("run", help="start a notebook as a background job")
    start.add_argument("notebook")
    start.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                       help="a value for the notebook's parameters cell")
    start.add_argument("--kernel", default=None)
    start.add_argument("--wait", action="store_true", help="wait for the job to end")
    sub.add_parser("list", help="jobs, newest first")
    logs = sub.add_parser("logs", help="a job's output")
    logs.add_argument("id")
    cancel = sub.add_parser("cancel", help="stop a running job")
    cancel.add_argument("id")


def run(args) -> int:
    from sampan.errors import SampanError

    actions = {"run": _run, "list": _list, "logs": _logs, "cancel": _cancel}
    if args.job_command not in actions:
        print("usage: sampan job {run,list,logs,cancel}; see `sampan job --help`", file=sys.stderr)
        return 2
    try:
        return actions[args.job_command](args)
    except (SampanError, ValueError, FileNotFoundError) as exc:
        print(f"sampan job: {exc}", file=sys.stderr)
        return 2


def _run(args) -> int:
    from sampan.experiments.jobs import submit
    from sampan.experiments.space import parse_assignments, parse_value

    params = {k: parse_value(v) for k, v in parse_assignments(args.param, "-p").items()}
    job = submit(args.notebook, params, kernel=args.kernel)
    print(f"job {job.id} started (pid {job.pid}); output in {job.folder}")
    if args.wait:
        job.wait()
        print(f"job {job.id}: {job.status}")
        return 0 if job.status == "finished" else 1
    return 0


def _list(args) -> int:
    from sampan.experiments.jobs import list_jobs

    jobs = list_jobs()
    if not jobs:
        print("no jobs yet; start one with `sampan job run NOTEBOOK.ipynb`")
    for job in jobs:
        err = f"  {job.error['ename']}: {job.error['evalue']}" if job.error else ""
        print(f"{job.id}  {job.status:9s} {job.started}  {job.notebook}{err}")
    return 0


def _logs(args) -> int:
    from sampan.experiments.jobs import get_job

    print(get_job(args.id).logs(), end="")
    return 0


def _cancel(args) -> int:
    from sampan.experiments.jobs import get_job

    job = get_job(args.id).cancel()
    print(f"job {job.id}: {job.status}")
    return 0
