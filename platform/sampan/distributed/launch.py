"""``sampan launch`` / ``python -m sampan.distributed.launch``: torchrun with Sampan's defaults.

Everything is passed to ``torch.distributed.run`` (torchrun) unchanged, with two
additions: a single-node job without rendezvous options (``--rdzv-endpoint``, ``--rdzv-backend``,
``--rdzv-id``, ``--master-addr``, ``--master-port``, in either spelling, or ``--standalone``) gets
``--standalone`` (a free local port), and ``--timeout SECONDS`` sets ``$SAMPAN_DIST_TIMEOUT``,
how long a collective may wait before it fails (default 300 s). When one rank
raises, torchrun stops the others and the job ends with that rank's traceback.
When a rank stalls, the rank that waited for it names it (``Model.fit``'s
watchdog), and ``sampan launch`` repeats that after torchrun's summary, whose
"Root Cause" is the first rank to fail: the one that waited. A rank that gloo's teardown aborts at exit
(SIGABRT, "terminate called without an active exception") after its program ended without an error fails
nothing, provided every rank torchrun then stopped had ended too (a rank whose process group Sampan made
leaves a note when its program ends).

Example:
    sampan launch --nproc_per_node 2 train.py --epochs 3
    sampan launch --nnodes 2 --node_rank 0 --master_addr 10.0.0.1 --master_port 29500 train.py
"""
from __future__ import annotations

import functools
import os
import sys
import tempfile

from sampan.errors import bad_argument

# torchrun's options (by destination) that say where the ranks meet: with any of them, in any spelling, the
# user chose the rendezvous and --standalone (which would replace it by a free local port) is not added
_RENDEZVOUS = ("rdzv_backend", "rdzv_endpoint", "rdzv_id", "master_addr", "master_port", "standalone")


@functools.lru_cache(maxsize=1)
def _torchrun_actions() -> tuple:
    from torch.distributed.run import get_args_parser

    return tuple(get_args_parser()._actions)


def _flags() -> set[str]:
    """torchrun's options that take no value (read from its own parser, so they stay in step with torch)."""
    return {s for a in _torchrun_actions() if a.nargs == 0 for s in a.option_strings}


def _rendezvous_options() -> set[str]:
    """Every spelling of torchrun's rendezvous options (``--rdzv-endpoint`` and ``--rdzv_endpoint``, ...)."""
    return {s for a in _torchrun_actions() if a.dest in _RENDEZVOUS for s in a.option_strings}


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """``[torchrun options...]``, ``[script, script args...]``."""
    flags = _flags()
    i = 0
    while i < len(argv):
        token = argv[i]
        if not token.startswith("-"):
            break
        i += 1 if token in flags or "=" in token else 2
    return argv[:i], argv[i:]


def build_torchrun_args(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """The torchrun argument list and extra environment for ``sampan launch argv``."""
    options, script = split_argv(list(argv))
    env: dict[str, str] = {}
    cleaned: list[str] = []
    i = 0
    while i < len(options):
        token = options[i]
        if token == "--timeout" or token.startswith("--timeout="):
            value = token.split("=", 1)[1] if "=" in token else (options[i + 1] if i + 1 < len(options) else None)
            env["SAMPAN_DIST_TIMEOUT"] = str(_seconds(value))
            i += 1 if "=" in token else 2
            continue
        cleaned.append(token)
        i += 1
    names = {t.split("=", 1)[0] for t in cleaned if t.startswith("-")}
    nnodes = next((t.split("=", 1)[1] for t in cleaned if t.startswith("--nnodes=")), None)
    if "--nnodes" in cleaned:
        nnodes = cleaned[cleaned.index("--nnodes") + 1]
    single_node = nnodes in (None, "1", "1:1")
    if single_node and not names.intersection(_rendezvous_options()):
        cleaned.insert(0, "--standalone")
    return cleaned + script, env


def _seconds(value: str | None) -> float:
    """``--timeout``'s value as positive seconds, or a ValueError that says so."""
    fix = "write --timeout 120 (seconds a collective may wait) before the script"
    if value is None:
        raise ValueError(bad_argument("--timeout", None, "a number of seconds after it", fix))
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(bad_argument("--timeout", value, "a positive number of seconds", fix)) from None
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(bad_argument("--timeout", value, "a positive number of seconds", fix))
    return seconds


def _blame(notes_dir: str) -> str:
    """What the ranks' watchdogs found, for after torchrun's summary (which names the rank that waited)."""
    from sampan.distributed.watchdog import read_notes

    notes = read_notes(notes_dir)
    if not notes:
        return ""
    stalled = sorted({r for n in notes for r in n.get("behind", [])})
    waited = [n["rank"] for n in notes]
    return (f"sampan launch: rank(s) {stalled} stalled: they did not arrive at a collective, and rank(s) {waited} "
            f"gave up waiting for them (torchrun's \"Root Cause\" above names the first rank to fail, the one that "
            f"waited).\n{notes[0]['message']}\n")


def _aborted_after_finishing(failures: dict, notes_dir: str) -> list[int]:
    """The ranks that aborted (SIGABRT) after their program had ended without an error, when every failed rank
    either did so or was stopped (SIGTERM) by torchrun after it had ended too: a job whose work is complete,
    whatever gloo's teardown did at exit (``[]`` otherwise). A rank says it finished with a note written at exit
    (:func:`sampan.distributed.env.finished_note`)."""
    import signal

    from sampan.distributed.env import finished_note

    codes = {rank: failure.exitcode for rank, failure in failures.items()}
    aborted = sorted(rank for rank, code in codes.items() if code == -signal.SIGABRT)
    if not aborted or any(code not in (-signal.SIGABRT, -signal.SIGTERM) for code in codes.values()):
        return []
    notes = [finished_note(rank, notes_dir) for rank in codes]
    return aborted if all(note is not None and note.is_file() for note in notes) else []


def main(argv: list[str] | None = None) -> int:
    """Runs torchrun in this process; returns the exit code (1 when a rank failed)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        print("\nOptions of torchrun (all accepted):")
        from torch.distributed.run import get_args_parser

        get_args_parser().print_help()
        return 0
    try:
        args, env = build_torchrun_args(argv)
    except ValueError as exc:
        print(f"sampan launch: {exc}", file=sys.stderr)
        return 2
    _, script = split_argv(args)
    if not script:
        print("sampan launch: no script given. Usage: sampan launch [--nproc_per_node N] script.py [args]",
              file=sys.stderr)
        return 2
    os.environ.update(env)
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    from sampan.distributed.env import NOTES_ENV

    with tempfile.TemporaryDirectory(prefix="sampan-launch-") as notes:
        os.environ[NOTES_ENV] = notes
        try:
            run(parse_args(args))
        except ChildFailedError as exc:
            aborted = _aborted_after_finishing(exc.failures, notes)
            if aborted:
                print(f"sampan launch: rank(s) {aborted} crashed while exiting (SIGABRT, \"terminate called without "
                      f"an active exception\": gloo's teardown) after finishing their work, and every stopped rank "
                      f"had finished too: the job succeeded.", file=sys.stderr)
                return 0
            print(f"sampan launch: {exc}", file=sys.stderr)
            print(_blame(notes), end="", file=sys.stderr)
            return 1
        finally:
            os.environ.pop(NOTES_ENV, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
