"""The process group: ``paddle.distributed.init_parallel_env`` on ``torch.distributed.init_process_group``.

torchrun (``sampan launch``), ``spawn`` and ``notebook_launcher`` set ``RANK``,
``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``; this module
reads them. On a CUDA machine the group is ``cpu:gloo,cuda:nccl`` so CPU
tensors (metrics, barriers with timeouts) travel over gloo and GPU tensors over
NCCL. The ranks of ``spawn`` meet through a file in the launch's private folder (``$SAMPAN_DIST_STORE_DIR``), and a
group of one process through an in-memory store: neither opens torch's TCP store, which listens on every interface.
"""
from __future__ import annotations

import atexit
import contextlib
import datetime
import itertools
import os
import stat
import sys
import weakref
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from sampan.errors import SampanError, bad_argument

TIMEOUT_ENV = "SAMPAN_DIST_TIMEOUT"
NOTES_ENV = "SAMPAN_LAUNCH_NOTES"  # a folder where `sampan launch` collects its ranks' stall diagnoses
# a private folder (mode 0700) where the ranks of `spawn` / `notebook_launcher` meet through a file store: torch's TCP
# store listens on every interface of the machine, whatever MASTER_ADDR says, and asks nothing of who connects
STORE_ENV = "SAMPAN_DIST_STORE_DIR"
_STORES = itertools.count()  # one file per process group this process makes: every rank makes them in one order
DEFAULT_TIMEOUT = 300.0  # seconds: a stalled job ends in minutes, not after torch's 30 (gloo) or 10 (NCCL)


class DistributedError(SampanError):
    """A distributed job failed: a rank raised, exited, or did not arrive at a collective.

    Attributes:
        ranks: the ranks concerned (that failed, or that did not arrive), when known.
    """

    def __init__(self, message: str, *, ranks: list[int] | None = None):
        super().__init__(message)
        self.ranks = list(ranks or [])


def free_port() -> int:
    """A TCP port free a moment ago, for the rendezvous store: below the ephemeral range, out of the way of the
    ports the system hands out (:func:`sampan.utils.net.free_port`)."""
    from sampan.utils.net import free_port as pick

    return pick()


def timeout_seconds(timeout: float | None = None) -> float:
    """``timeout``, else ``$SAMPAN_DIST_TIMEOUT``, else :data:`DEFAULT_TIMEOUT` (5 minutes).

    Example:
        >>> from sampan.distributed.env import timeout_seconds
        >>> timeout_seconds(20)
        20.0
    """
    if timeout is None and os.environ.get(TIMEOUT_ENV):
        raw = os.environ[TIMEOUT_ENV]
        try:
            timeout = float(raw)
        except ValueError:
            raise ValueError(bad_argument(TIMEOUT_ENV, raw, "a positive number of seconds",
                                          f"export {TIMEOUT_ENV}=300, or unset it")) from None
    if timeout is None:
        return DEFAULT_TIMEOUT
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(bad_argument("timeout", timeout, "a positive number of seconds"))
    return float(timeout)


def get_rank() -> int:
    """This process's rank (``paddle.distributed.get_rank``): 0 outside a distributed job."""
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else int(os.environ.get("RANK", 0))


def get_world_size() -> int:
    """The number of processes (``paddle.distributed.get_world_size``): 1 outside a distributed job."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return int(os.environ.get("WORLD_SIZE", 1))


def get_local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", 0))


def default_backend() -> str:
    return "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"


def _check_backend(backend: Any) -> None:
    known = [b for b in dist.Backend.backend_list if b != "undefined"]
    parts = backend.split(",") if isinstance(backend, str) else [None]
    if not all(isinstance(p, str) and p.rpartition(":")[2].strip().lower() in known for p in parts):
        raise ValueError(bad_argument("backend", backend, f"one of {known}, or per device such as "
                                      "'cpu:gloo,cuda:nccl'", "pass backend='gloo' on CPU, 'nccl' on NVIDIA GPUs, "
                                      "or leave it out to choose by the device"))


def init_parallel_env(backend: str | None = None, timeout: float | None = None) -> bool:
    """Joins the process group described by the environment (``paddle.distributed.init_parallel_env``).

    Calls ``torch.distributed.init_process_group`` once; later calls do nothing. Outside a launcher
    (no ``WORLD_SIZE``) it starts a group of one process, so DDP code runs unchanged.

    Args:
        backend: ``"gloo"``, ``"nccl"`` or ``"cpu:gloo,cuda:nccl"``; defaults to the last when CUDA is
            present, else gloo.
        timeout: seconds a collective may wait before it fails (default ``$SAMPAN_DIST_TIMEOUT`` or 5 min).

    Returns:
        True when this call created the group.

    Example:
        >>> from sampan.distributed import get_rank, get_world_size, init_parallel_env
        >>> init_parallel_env()  # doctest: +SKIP
        >>> get_rank(), get_world_size()  # doctest: +SKIP
        (0, 2)
    """
    if not dist.is_available():
        raise RuntimeError("torch.distributed is not available in this PyTorch build.")
    if backend is not None:
        _check_backend(backend)
    if dist.is_initialized():
        return False
    kwargs = {"timeout": datetime.timedelta(seconds=timeout_seconds(timeout))}
    if "WORLD_SIZE" not in os.environ or "MASTER_ADDR" not in os.environ:
        if int(os.environ.get("WORLD_SIZE", 1)) > 1:
            raise DistributedError(
                f"WORLD_SIZE={os.environ['WORLD_SIZE']} but MASTER_ADDR/MASTER_PORT are not set. HINT: start the "
                f"script with `sampan launch --nproc_per_node N script.py` (torchrun), or use "
                f"sampan.distributed.spawn / notebook_launcher.")
        # a group of one meets nobody: an in-memory store, not a TCP store that any host could connect to
        kwargs.update(store=dist.HashStore(), rank=0, world_size=1)
    elif os.environ.get(STORE_ENV):
        kwargs.update(init_method=_file_store(os.environ[STORE_ENV]), rank=get_rank(), world_size=get_world_size())
    if torch.cuda.is_available():
        torch.cuda.set_device(get_local_rank())
    dist.init_process_group(backend=backend or default_backend(), **kwargs)
    _destroy_at_exit(dist.distributed_c10d._get_default_group())
    return True


def _file_store(folder: str) -> str:
    """The ``file://`` rendezvous of the ranks that ``spawn`` started, in its private folder ``folder``.

    Why not the TCP store that ``MASTER_ADDR`` / ``MASTER_PORT`` describe: torch's store listens on all interfaces
    (``MASTER_ADDR=127.0.0.1`` only says where the ranks connect) and has no authentication, so another user of the
    machine, or another host, could read and rewrite the addresses through which the ranks connect (Sampan's own
    exchanges are read without pickle, :func:`sampan.distributed.strategy.gather_values`, but a program's
    ``all_gather_object`` unpickles what it receives). A file in a folder only this user may enter is reachable
    by no one else. A file store must be new for each group: the n-th group of every rank uses file n (named after
    the job's port too: a job that a rank starts in turn inherits the variable, with a port of its own)."""
    try:
        info = os.stat(folder, follow_symlinks=False)
    except OSError:
        info = None
    if info is None or not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise DistributedError(f"{STORE_ENV}={folder!r} is not a private folder of this user (a folder, owned by "
                               f"uid {os.getuid()}, mode 0700): another user could reach the ranks' store there. "
                               f"HINT: unset {STORE_ENV}; sampan.distributed.spawn sets it to a folder it creates.")
    return Path(folder, f"store-{os.environ.get('MASTER_PORT', '')}-{next(_STORES)}").as_uri()


def _destroy_at_exit(group: Any) -> None:
    """At the interpreter's exit, after a run that raised nothing: destroys ``group`` (the default group this
    module created) if it is still the default group, and, under ``sampan launch``, leaves a note that this rank
    finished (:func:`finished_note`). gloo's teardown at exit can still abort a rank that finished its work
    ("terminate called without an active exception", SIGABRT, in C++ destructors after Python has ended); with
    the note, ``sampan launch`` tells such a job from a failed one. After an uncaught exception nothing is torn
    down: the other ranks may be gone, and a collective backend's teardown could then wait for them."""
    created = weakref.ref(group)

    def at_exit() -> None:
        if getattr(sys, "last_value", None) is not None:
            return
        if dist.is_initialized() and dist.distributed_c10d._get_default_group() is created():
            dist.destroy_process_group()  # not left to the interpreter's teardown
        note = finished_note(os.environ.get("RANK", "0"))
        if note is not None:
            with contextlib.suppress(OSError):
                note.touch()

    atexit.register(at_exit)


def finished_note(rank: int | str, folder: str | os.PathLike | None = None) -> Path | None:
    """The file by which a rank tells ``sampan launch`` that its program ended without an error, in ``folder``
    (default: the launch's notes folder, ``$SAMPAN_LAUNCH_NOTES``); None outside ``sampan launch``."""
    folder = folder or os.environ.get(NOTES_ENV)
    return Path(folder, f"finished-{rank}") if folder and Path(folder).is_dir() else None


def local_device(device: torch.device) -> torch.device:
    """``cuda`` -> ``cuda:LOCAL_RANK`` (one GPU per process); other devices unchanged."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.device("cuda", get_local_rank())
    return device
