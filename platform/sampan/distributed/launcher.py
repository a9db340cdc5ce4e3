"""``spawn`` and ``notebook_launcher``: several training processes started from Python or a notebook.

Both run ``fn(*args)`` in ``nprocs`` processes (``torch.multiprocessing`` with the
``forkserver`` start method: forked from a server process that imported torch and sampan once, so
a launch after the first one starts at once) with the torchrun environment (``RANK``,
``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``) set, so
``Model.fit`` inside ``fn`` trains with DDP. ``fn`` and ``args`` travel by
cloudpickle, which also carries functions defined in a notebook (``__main__``),
where plain pickling fails under spawn. The ranks never fork the kernel
itself, so CUDA initialised in the notebook does no harm (a child forked from
the kernel would fail). When one rank raises, the others are terminated and
:class:`~sampan.distributed.env.DistributedError` carries that rank's traceback.
"""
from __future__ import annotations

import json
import os
import pickle
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from sampan.distributed.env import STORE_ENV, TIMEOUT_ENV, DistributedError, free_port
from sampan.errors import bad_argument, check_int
from sampan.utils.imports import require


# modules the fork server imports once, so that every later launch forks ranks that have them already (a launch
# then starts in about 0.1 s instead of the 3-4 s a fresh interpreter spends importing torch). torch._dynamo too:
# torch imports it when the first optimizer is built (Optimizer.add_param_group is wrapped by torch._disable_dynamo),
# 1.5-1.8 CPU-s in every rank that trains; preloaded, a 2-rank Model.fit launch took 0.07 CPU-s a rank instead and
# 4.5-5.0 s instead of 8.6 s (2 cores, BENCHMARKS.md, thirty-eighth session)
_PRELOAD = ("torch", "torch.distributed", "torch._dynamo", "sampan", "sampan.distributed.launcher", "sampan.hapi.model",
            "sampan.data")


def _worker(local_rank: int, payload: bytes, nprocs: int, port: int, threads: int, result_dir: str,
            timeout: float | None, environ: dict[str, str] | None = None) -> None:
    # first of all: this rank got as far as Sampan's code (under forkserver or spawn it has imported the launching
    # script's __main__ again by now, which is where a script without an `if __name__ == "__main__":` guard fails)
    Path(result_dir, f"{local_rank}.started").touch()
    import torch.distributed as dist

    try:
        if environ is not None:  # forkserver: the launcher's environment now, not the server's when it started
            os.environ.clear()
            os.environ.update(environ)
        # the ranks meet through a file in result_dir (STORE_ENV: init_parallel_env), never torch's TCP store, which
        # listens on every interface for anyone; MASTER_ADDR / MASTER_PORT serve a fn that calls torch's own
        # init_process_group. gloo's own connections stay on the loopback interface: every rank is on this machine
        os.environ.update(RANK=str(local_rank), LOCAL_RANK=str(local_rank), WORLD_SIZE=str(nprocs),
                          LOCAL_WORLD_SIZE=str(nprocs), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                          OMP_NUM_THREADS=str(threads), **{STORE_ENV: result_dir})
        if sys.platform.startswith("linux") and Path("/sys/class/net/lo").exists():
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        if timeout is not None:
            os.environ[TIMEOUT_ENV] = str(timeout)
        torch.set_num_threads(threads)
        cloudpickle = require("cloudpickle")
        fn, args = cloudpickle.loads(payload)  # the learner's function, pickled by this same launch (no shared file)
        result = fn(*args)
    except BaseException:
        note = {"time": time.time(), "traceback": traceback.format_exc()}
        Path(result_dir, f"{local_rank}.err").write_text(json.dumps(note))
        if dist.is_initialized():
            dist.destroy_process_group()
        raise
    try:
        data = cloudpickle.dumps(result)
    except Exception as exc:  # noqa: BLE001 - a result that cannot travel back is reported, not fatal
        data = cloudpickle.dumps(_Unpicklable(f"{type(result).__name__}: {exc}"))
    Path(result_dir, f"{local_rank}.pkl").write_bytes(data)
    if dist.is_initialized():  # written first: a native crash while tearing down gloo loses no result
        dist.destroy_process_group()


class _Unpicklable:
    def __init__(self, why: str):
        self.why = why

    def __repr__(self) -> str:
        return f"<result not picklable: {self.why}>"


def _explain_unpicklable(fn: Callable, args: Sequence, exc: Exception, dumps: Callable) -> str:
    """Finds which argument, closure variable or global of ``fn`` cannot be pickled."""

    def fails(obj: Any) -> str | None:
        try:
            dumps(obj)
            return None
        except Exception as err:  # noqa: BLE001
            return f"{type(err).__name__}: {err}"

    culprits = [f"args[{i}] ({type(a).__name__})" + f" -> {why}" for i, a in enumerate(args) if (why := fails(a))]
    code = getattr(fn, "__code__", None)
    if code is not None:
        cells = dict(zip(code.co_freevars, [c.cell_contents for c in fn.__closure__ or ()]))
        glob = {n: fn.__globals__[n] for n in code.co_names if n in getattr(fn, "__globals__", {})}
        for kind, names in (("closure variable", cells), ("global", glob)):
            for name, value in names.items():
                why = fails(value)
                if why:
                    culprits.append(f"{kind} `{name}` of fn ({type(value).__name__}) -> {why}")
    found = "; ".join(culprits) or f"fn {getattr(fn, '__qualname__', fn)!r} -> {type(exc).__name__}: {exc}"
    return (f"The worker processes receive `fn` and `args` by pickling (cloudpickle, which also handles "
            f"functions defined in a notebook), and this cannot be pickled: {found}. HINT: create such objects "
            f"(open files, locks, sockets, generators, DataLoaders with workers, models on a GPU) inside `fn`, "
            f"and pass only what is needed to build them (paths, numbers, CPU tensors).")


def _pickle_job(fn: Callable, args: Sequence) -> bytes:
    cloudpickle = require("cloudpickle")
    if not callable(fn):
        raise TypeError(bad_argument("fn", fn, "a function to run in every process"))
    try:
        return cloudpickle.dumps((fn, tuple(args)))
    except Exception as exc:  # noqa: BLE001 - any pickling failure gets the explanation
        raise TypeError(_explain_unpicklable(fn, args, exc, cloudpickle.dumps)) from exc


def _default_nprocs(nprocs: int | None) -> int:
    if nprocs is None or nprocs == -1:
        return torch.cuda.device_count() if torch.cuda.is_available() else 2
    if not isinstance(nprocs, int) or isinstance(nprocs, bool) or nprocs < 1:
        raise ValueError(bad_argument("nprocs", nprocs, "a positive int (processes to start)"))
    return nprocs


def _run(fn: Callable, args: Sequence, nprocs: int | None, *, threads: int | None, timeout: float | None,
         start_method: str) -> list[Any]:
    if not isinstance(args, (tuple, list)):
        raise TypeError(bad_argument("args", args, "a tuple of arguments for fn",
                                     f"write args=({args!r},) for one argument" if not isinstance(args, str) or
                                     len(args) < 40 else "write args=(value,) for one argument"))
    nprocs = _default_nprocs(nprocs)
    if start_method == "fork" and torch.cuda.is_available() and torch.cuda.is_initialized():
        raise ValueError(bad_argument("start_method", start_method, "'spawn' once CUDA is initialised in this "
                                      "process", "a forked child cannot use the parent's CUDA context; "
                                      "use start_method='spawn' (the default)"))
    if torch.cuda.is_available() and nprocs > torch.cuda.device_count():
        raise ValueError(bad_argument("nprocs", nprocs, f"at most {torch.cuda.device_count()} (one process per "
                                      f"GPU on this machine)"))
    if start_method not in ("forkserver", "spawn", "fork"):
        raise ValueError(bad_argument("start_method", start_method, "'forkserver', 'spawn' or 'fork'",
                                      "pass start_method='forkserver' (the default)"))
    if threads is not None:
        check_int("threads", threads, fix="pass threads=1 (torch threads per process), or leave it out for CPU "
                                          "cores / nprocs")
    payload = _pickle_job(fn, args)
    threads = threads or max(1, (os.cpu_count() or 1) // nprocs)
    environ = None
    if start_method == "forkserver":
        import multiprocessing

        multiprocessing.set_forkserver_preload(list(_PRELOAD))  # read only when the server starts
        environ = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="sampan-spawn-") as result_dir:
        if start_method == "forkserver":
            _start_forkserver(result_dir)
        context = torch.multiprocessing.start_processes(
            _worker, args=(payload, nprocs, free_port(), threads, result_dir, timeout, environ), nprocs=nprocs,
            join=False, start_method=start_method)
        try:
            _join(context, result_dir, start_method)
        finally:
            for path in getattr(context, "error_files", None) or ():  # torch's notes, written where a rank raised
                if path:
                    Path(path).unlink(missing_ok=True)
        return [_load_result(Path(result_dir, f"{r}.pkl")) for r in range(nprocs)]


def _start_forkserver(private_dir: str) -> None:
    """Starts multiprocessing's fork server, unless it runs, with ``private_dir`` (mode 0700) as its working folder.

    The server is ``python -c ...``, which puts its working folder first on ``sys.path``, before the standard
    library and site-packages, as it imports ``multiprocessing`` and preloads torch and sampan. Started from this
    process's folder, a ``torch.py`` or ``multiprocessing/`` that another user left there (``cd /tmp``, a class's
    shared folder) would run as this user, although the script being run lives elsewhere. The ranks it forks
    still work in this process's folder (multiprocessing sends it with each rank); the folder is removed after
    the launch, and a removed folder holds no module."""
    import multiprocessing.forkserver

    try:
        here = os.getcwd()
    except OSError:  # this process's folder was removed: it holds no module either
        multiprocessing.forkserver.ensure_running()
        return
    os.chdir(private_dir)
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        os.chdir(here)


def _join(context: Any, result_dir: str, start_method: str) -> None:
    """Waits for every rank. A rank that dies after writing its result (gloo's teardown can abort a process at
    exit, "terminate called without an active exception") does not stop the others, which may still be writing
    theirs: it is reported with a warning. A rank that dies before (an exception in ``fn``, a native crash, a
    failed start) stops the others, and the first failure is raised with its traceback."""
    import multiprocessing.connection

    processes = context.processes
    warned: set[int] = set()
    while True:
        for rank, process in enumerate(processes):
            code = process.exitcode
            if code in (None, 0):
                continue
            if Path(result_dir, f"{rank}.pkl").is_file():
                if rank not in warned:
                    warned.add(rank)
                    warnings.warn(f"Rank {rank} crashed while exiting (code {code}) after finishing its work; its "
                                  f"result is complete.", RuntimeWarning, stacklevel=4)
                continue
            for other in processes:
                if other.is_alive():
                    other.terminate()
            for other in processes:
                other.join()
            raise _first_failure(result_dir, len(processes), rank, _without_traceback(result_dir, rank, code,
                                                                                       start_method),
                                 getattr(context, "error_files", None))
        alive = [p for p in processes if p.exitcode is None]
        if not alive:
            return
        multiprocessing.connection.wait([p.sentinel for p in alive], timeout=1.0)


def _without_traceback(result_dir: str, rank: int, code: int, start_method: str) -> str:
    """What to say of a rank that died without a Python traceback of ``fn``."""
    import signal
    import sys

    how = f"exited with code {code} (signal {signal.Signals(-code).name})" if code < 0 else f"exited with code {code}"
    if Path(result_dir, f"{rank}.started").is_file():
        return f"{how} without a Python traceback. HINT: a crash in native code or running out of memory."
    script = getattr(sys.modules.get("__main__"), "__file__", None)
    if start_method != "fork" and script:
        return (f"{how} before Sampan's worker started in it: with start_method={start_method!r} each rank first "
                f"imports the launching script ({script}) again, and that failed (its traceback is above, on stderr)."
                f" HINT: put the code that calls spawn / notebook_launcher under `if __name__ == \"__main__\":` so "
                f"that importing the script does not run it again.")
    return f"{how} before Sampan's worker started in it (its output, if any, is above, on stderr)."


def _first_failure(result_dir: str, nprocs: int, seen_rank: int, seen_text: str,
                   error_files: Sequence[str | None] | None = None) -> DistributedError:
    """The rank that failed first (the root cause); later failures are usually its consequence."""
    notes = {}
    for r in range(nprocs):
        path = Path(result_dir, f"{r}.err")
        if path.is_file():
            notes[r] = json.loads(path.read_text())
        elif error_files and _torch_error(error_files[r]):  # what torch's own wrapper caught around the worker
            notes[r] = {"time": os.path.getmtime(error_files[r]), "traceback": _torch_error(error_files[r])}
    if not notes:
        return DistributedError(f"Rank {seen_rank} of {nprocs} {seen_text.strip()} The other ranks were stopped.",
                                ranks=[seen_rank])
    first = min(notes, key=lambda r: notes[r]["time"])
    later = [f"rank {r} then failed too ({notes[r]['traceback'].strip().splitlines()[-1][:160]})"
             for r in sorted(notes) if r != first]
    also = f"\n(A consequence: {'; '.join(later)}.)" if later else ""
    return DistributedError(f"Rank {first} of {nprocs} raised first; the other ranks were stopped.\n"
                            f"{notes[first]['traceback']}{also}", ranks=[first])


class _TextOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"not a traceback: {module}.{name}")


def _torch_error(path: str | None) -> str | None:
    """The traceback ``torch.multiprocessing`` wrote for a rank (a pickled string, in a private temporary file
    this launch named for its own child; nothing but a string is read), or None."""
    if not path or not os.path.isfile(path):
        return None
    try:
        with open(path, "rb") as file:
            text = _TextOnly(file).load()
    except Exception:  # noqa: BLE001 - an unreadable note is no note
        return None
    return text if isinstance(text, str) and text else None


def _load_result(path: Path) -> Any:
    # written by our own ranks into the launch's private (0700) temporary folder: never a file from someone else
    return pickle.loads(path.read_bytes()) if path.is_file() else None


def spawn(fn: Callable, args: Sequence = (), nprocs: int = -1, join: bool = True, daemon: bool = False, *,
          threads: int | None = None, timeout: float | None = None, start_method: str = "forkserver") -> list[Any]:
    """Runs ``fn(*args)`` in ``nprocs`` processes (``paddle.distributed.spawn`` on ``torch.multiprocessing``).

    Inside ``fn``, ``sampan.distributed.get_rank()`` tells the process apart, and ``Model.fit`` uses DDP.

    Args:
        fn: the function (may be defined in a notebook or a script's ``__main__``).
        args: its positional arguments (pickled to each process).
        nprocs: processes; ``-1`` means one per GPU, or 2 without CUDA.
        join: only ``True`` (wait for the processes).
        daemon: ignored (workers are always joined).
        threads: torch threads per process, a positive int (default: CPU cores / nprocs).
        timeout: seconds a collective may wait (``$SAMPAN_DIST_TIMEOUT`` in the workers).
        start_method: ``"forkserver"`` (default: the ranks fork from a server process started once, which has
            imported torch and sampan, so a launch after the first starts in about 0.1 s; it never touches this
            process's CUDA context, and the ranks get this process's environment and working folder at each
            launch), ``"spawn"`` (a fresh interpreter per rank, 3-4 s each launch) or ``"fork"``.

    Returns:
        ``fn``'s return value of every rank, in rank order.

    Raises:
        DistributedError: a rank raised (its traceback is in the message) or died.
        TypeError: ``fn`` or ``args`` cannot be pickled (the message names the culprit).

    Example:
        >>> def work(n):
        ...     return sampan.distributed.get_rank() * n
        >>> spawn(work, args=(10,), nprocs=2)  # doctest: +SKIP
        [0, 10]
    """
    if not join:
        raise ValueError(bad_argument("join", join, "True", "spawn always waits for its processes"))
    return _run(fn, args, nprocs, threads=threads, timeout=timeout, start_method=start_method)


def notebook_launcher(fn: Callable, args: Sequence = (), nprocs: int | None = None, *, threads: int | None = None,
                      timeout: float | None = None) -> list[Any]:
    """Multi-process training from inside Jupyter: ``fn(*args)`` on ``nprocs`` ranks, results in rank order.

    Works where other launchers break in a notebook: ``fn`` may be defined in the notebook (it travels
    by cloudpickle), and the workers fork from a server process (forkserver), never from the kernel, so CUDA
    already initialised in the kernel is no obstacle; the server has imported torch and sampan once, so every
    launch after the first starts in about 0.1 s. Whatever cannot be pickled is named precisely before anything starts.

    Args:
        fn: the training function; build the model, data and ``sampan.Model`` inside it.
        args: its arguments.
        nprocs: processes (default: one per GPU, or 2 on CPU).
        threads: torch threads per process, a positive int (default: CPU cores / nprocs).
        timeout: seconds a collective may wait before failing.

    Example:
        >>> def train(epochs):
        ...     model = sampan.Model(make_net()); ...; return model.fit(data, epochs=epochs).history
        >>> histories = notebook_launcher(train, args=(2,), nprocs=2)  # doctest: +SKIP
    """
    return _run(fn, args, nprocs, threads=threads, timeout=timeout, start_method="forkserver")
