"""What the ranks of a job pass each other (``predict``'s outputs, the rows that an evaluation's metrics gather) is
read without pickle.

gloo connects the ranks with plain TCP on the loopback interface, which every user of the machine can reach (a
class's shared server), with no authentication. ``torch.distributed.all_gather_object`` unpickles what arrives, so
bytes that did not come from a rank could run code in every rank. Sampan's exchanges
(``sampan.distributed.strategy.gather_values``) travel as ``torch.save`` bytes read with ``weights_only=True``.
Here rank 1 stands in for such bytes: it sends an object whose unpickling runs a shell command.
"""
from __future__ import annotations

import os

import pytest

posix_only = pytest.mark.skipif(os.name != "posix", reason="the attack's command runs in a POSIX shell (touch)")


class RunsCode:
    """Unpickling this runs ``touch <marker>-<rank of the process that unpickles it>``."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f'touch "{self.marker}-$RANK"',)


def _exchange(marker, own_objects):
    import fractions

    import numpy as np
    import torch

    from sampan.distributed import init_parallel_env
    from sampan.distributed.strategy import DDPStrategy

    init_parallel_env()
    strategy = DDPStrategy()
    rank = strategy.rank
    if own_objects:
        values = [torch.tensor([rank]), [fractions.Fraction(rank, 3)]]
    elif marker and rank == 1:
        values = [torch.tensor([rank]), RunsCode(marker)]
    else:
        values = [torch.tensor([rank, rank]), {"rank": rank, "name": f"r{rank}", "ids": (rank, 2.5)},
                  np.array([rank, 7], dtype=np.int32)]
    try:
        return "ok", strategy.gather_rows(values)
    except Exception as exc:  # noqa: BLE001 - the test reads the message
        return type(exc).__name__, str(exc)


@posix_only
def test_bytes_another_rank_sends_cannot_run_code(tmp_path):
    from sampan.distributed import spawn

    marker = str(tmp_path / "ran")
    results = spawn(_exchange, args=(marker, False), nprocs=2, threads=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no rank ran the command
    for kind, message in results:  # both ranks refuse rank 1's bytes, by name: none is left waiting
        assert kind == "DistributedError", message
        assert "rank 1's values" in message and "would call posix.system" in message, message


@posix_only
def test_tensors_arrays_numbers_strings_and_containers_still_travel_and_other_objects_get_a_clear_error():
    import torch

    from sampan.distributed import spawn

    results = spawn(_exchange, args=(None, False), nprocs=2, threads=1)
    for kind, rows in results:
        assert kind == "ok", rows
        assert [r[1] for r in rows] == [{"rank": 0, "name": "r0", "ids": (0, 2.5)},
                                        {"rank": 1, "name": "r1", "ids": (1, 2.5)}]
        assert [r[0].tolist() for r in rows] == [[0, 0], [1, 1]] and all(isinstance(r[0], torch.Tensor) for r in rows)
        assert [(r[2].tolist(), str(r[2].dtype)) for r in rows] == [([0, 7], "int32"), ([1, 7], "int32")]
    for kind, message in spawn(_exchange, args=(None, True), nprocs=2, threads=1):
        assert kind == "DistributedError" and "rank 0's values" in message, message
        assert "would call fractions.Fraction" in message and "into tensors" in message, message
