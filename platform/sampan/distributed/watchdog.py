"""A watchdog for the collectives of ``Model.fit``: when one times out, name the ranks that did not arrive.

A collective that times out (the gradient all-reduce inside ``backward``, a broadcast) fails on
the rank that waited, with torch's message about a socket or a timeout, and torchrun then names
that rank as the root cause: the wrong one. Each rank therefore posts its position in the loop
(epoch, step) to the process group's store as it goes (:class:`Heartbeat`); when a collective
times out, :func:`watch` reads every rank's position and raises
:class:`~sampan.distributed.env.DistributedError` naming the ranks that were behind, as
``monitored_barrier`` does around checkpoints. Under ``sampan launch`` the diagnosis is also
left for the launcher, which repeats it after torchrun's summary.

Example:
    >>> from sampan.distributed.watchdog import watch
    >>> with watch(world_size=1):  # does nothing outside a distributed job
    ...     pass
"""
from __future__ import annotations

import contextlib
import itertools
import json
import os
import time
from pathlib import Path
from typing import Any, Iterator

import torch.distributed as dist

from sampan.callbacks.base import Callback
from sampan.distributed.env import NOTES_ENV, TIMEOUT_ENV, DistributedError, timeout_seconds

_KEY = "sampan/watchdog/position/{rank}"
_WAITED = "sampan/watchdog/waited/{rank}"
_TIMEOUT_WORDS = ("timed out", "timeout", "time out")
_BACKEND_WORDS = ("gloo", "nccl", "c10d", "processgroup", "collective", "store")
_COUNTER = itertools.count(1)  # one per process, across fits, so ranks that did the same work post the same count


def _store() -> Any:
    """The default process group's key-value store (torchrun's), or None."""
    if not (dist.is_available() and dist.is_initialized()):
        return None
    try:
        return dist.distributed_c10d._get_default_store()
    except Exception:  # noqa: BLE001 - no store means no heartbeat, never a failed fit
        return None


class Heartbeat(Callback):
    """Posts this rank's position in ``fit`` (a counter and "epoch E step S") to the store.

    ``Model.fit`` adds it when the job has more than one process; one small store write per batch.
    """

    def __init__(self) -> None:
        super().__init__()
        self._store = _store()
        self._epoch = 0

    def _post(self, where: str) -> None:
        if self._store is None:
            return
        try:
            self._store.set(_KEY.format(rank=dist.get_rank()), f"{next(_COUNTER)}|{where}")
        except Exception:  # noqa: BLE001 - the store went away: the collective will say why
            self._store = None

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_begin(self, step, logs=None):
        self._post(f"training, epoch {self._epoch} step {step}")

    def on_train_batch_end(self, step, logs=None):
        self._post(f"after training epoch {self._epoch} step {step}")

    def on_eval_begin(self, logs=None):
        self._post(f"evaluating after epoch {self._epoch}")


def is_timeout(exc: BaseException) -> bool:
    """Whether ``exc`` is a collective that gave up waiting (gloo, NCCL or the store), not any timeout
    (a DataLoader's, a user's)."""
    text = str(exc).lower()
    distributed = isinstance(exc, getattr(dist, "DistBackendError", ())) or any(w in text for w in _BACKEND_WORDS)
    return isinstance(exc, RuntimeError) and distributed and any(w in text for w in _TIMEOUT_WORDS)


@contextlib.contextmanager
def watch(world_size: int, *, timeout: float | None = None, grace: float | None = None) -> Iterator[None]:
    """Turns a collective's timeout into a :class:`DistributedError` that names the ranks that did not arrive.

    Args:
        world_size: processes in the job; with 1 this does nothing.
        timeout: the collectives' limit in seconds, for the message (default ``$SAMPAN_DIST_TIMEOUT``).
        grace: seconds to wait for the other waiting ranks to report before blaming them
            (default: a quarter of the timeout, at most 5 s).
    """
    if world_size <= 1:
        yield
        return
    try:
        yield
    except RuntimeError as exc:
        if isinstance(exc, DistributedError) or not is_timeout(exc):
            raise
        raise stalled(exc, timeout=timeout, grace=grace) from exc


def _positions(store: Any, world_size: int) -> dict[int, tuple[int, str]]:
    found = {}
    for rank in range(world_size):
        key = _KEY.format(rank=rank)
        try:
            if store.check([key]):
                count, where = store.get(key).decode().split("|", 1)
                found[rank] = (int(count), where)
        except Exception:  # noqa: BLE001
            continue
    return found


def _waited(store: Any, world_size: int) -> set[int]:
    ranks = set()
    for rank in range(world_size):
        with contextlib.suppress(Exception):
            if store.check([_WAITED.format(rank=rank)]):
                ranks.add(rank)
    return ranks


def stalled(exc: BaseException, *, timeout: float | None = None, grace: float | None = None) -> DistributedError:
    """The diagnosis of a timed-out collective on this rank, from every rank's last posted position."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    seconds = timeout_seconds(timeout)
    store = _store()
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    if store is None:
        return DistributedError(f"A collective timed out after {seconds:g} s on rank {rank} ({first}), and the "
                                f"store that tells where the other ranks are is gone.")
    with contextlib.suppress(Exception):
        store.set(_WAITED.format(rank=rank), "1")
    positions = _positions(store, world_size)
    mine = positions.get(rank, (0, "before training"))[0]
    behind = [r for r in range(world_size) if r != rank and positions.get(r, (0, ""))[0] < mine]
    if not behind:  # every rank reached this step: the ones that are not waiting too are stuck inside it
        time.sleep(min(5.0, seconds / 4) if grace is None else grace)
        waited = _waited(store, world_size)
        behind = [r for r in range(world_size) if r not in waited]
    where = "; ".join(f"rank {r}: {positions[r][1] if r in positions else 'not in fit yet'}"
                      for r in range(world_size))
    who = (f"rank(s) {behind} did not arrive" if behind else
           "every rank was waiting, so they wait in different collectives (called in a different order)")
    message = (f"A collective timed out after {seconds:g} s on rank {rank}: {who}. "
               f"Last positions: {where}. torch said: {first} HINT: look at where the stuck rank is (its traceback, "
               f"or its stack with py-spy dump); every rank must reach the same "
               f"collectives in the same order; raise the limit with `sampan launch --timeout SECONDS` or "
               f"${TIMEOUT_ENV}.")
    _leave_note(rank, behind, message)
    return DistributedError(message, ranks=behind)


def _leave_note(rank: int, behind: list[int], message: str) -> None:
    folder = os.environ.get(NOTES_ENV)
    if not folder or not Path(folder).is_dir():
        return
    with contextlib.suppress(OSError):
        Path(folder, f"stall-{rank}.json").write_text(json.dumps({"rank": rank, "behind": behind,
                                                                  "message": message}))


def read_notes(folder: str | os.PathLike) -> list[dict]:
    """The diagnoses that ranks left in ``folder`` (see :data:`NOTES_ENV`), by rank."""
    notes = []
    for path in sorted(Path(folder).glob("stall-*.json")):
        with contextlib.suppress(OSError, ValueError):
            notes.append(json.loads(path.read_text()))
    return sorted(notes, key=lambda n: n.get("rank", 0))
