"""No hangs: a rank that raises ends the job with its traceback; a barrier names the ranks that did not come."""
import re
import threading
import time

import pytest

import sampan.distributed as sd
from dist_helpers import launch

pytestmark = pytest.mark.distributed


def test_a_rank_that_raises_ends_the_torchrun_job_with_its_traceback(tmp_path, train_script):
    proc, _ = launch(["--nproc_per_node", "2", train_script, str(tmp_path), "--raise-on-rank", "1"])
    ended = time.time()
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert "Traceback (most recent call last)" in output and "ValueError: planted failure on rank 1" in output
    planted = float(re.search(r"planted at ([\d.]+)", output).group(1))
    assert ended - planted < 60, f"the job took {ended - planted:.0f} s to end after rank 1 raised"
    assert not (tmp_path / "rank0.json").exists()  # rank 0 was stopped, it did not finish training


def _raise_on_rank_one():
    sd.init_parallel_env()
    if sd.get_rank() == 1:
        raise KeyError("planted in spawn")
    import torch.distributed as dist

    dist.barrier()  # rank 0 waits here until it is stopped


def _late_rank_one():
    sd.init_parallel_env(timeout=60)
    if sd.get_rank() == 1:
        time.sleep(60)  # never arrives in time
    sd.monitored_barrier(timeout=3)


def test_spawn_reports_the_failing_rank_and_stops_the_others():
    start = time.time()
    pattern = r"(?s)Rank 1 of 2 raised first.*Traceback.*KeyError: 'planted in spawn'"
    with pytest.raises(sd.DistributedError, match=pattern) as info:
        sd.spawn(_raise_on_rank_one, nprocs=2, threads=1)
    assert info.value.ranks == [1]
    assert time.time() - start < 90


def test_a_barrier_that_times_out_names_the_ranks_that_did_not_arrive():
    start = time.time()
    pattern = r"(?s)Rank 0 of 2 raised first.*Barrier timed out after 3 s on rank 0: rank\(s\) \[1\] did not arrive"
    with pytest.raises(sd.DistributedError, match=pattern):
        sd.spawn(_late_rank_one, nprocs=2, threads=1)
    assert time.time() - start < 55  # rank 1 (asleep for 60 s) was stopped, not waited for


def test_what_cannot_be_pickled_is_named_before_anything_starts():
    lock = threading.Lock()

    def uses_lock():
        with lock:
            return 1

    with pytest.raises(TypeError, match=r"closure variable `lock` of fn \(lock\) -> TypeError: cannot pickle"):
        sd.notebook_launcher(uses_lock, nprocs=2)
    with pytest.raises(TypeError, match=r"args\[1\] \(generator\)"):
        sd.notebook_launcher(print, args=(1, (i for i in range(3))), nprocs=2)


def test_bad_nprocs_and_join_are_refused():
    with pytest.raises(ValueError, match=r"Expected `nprocs` to be a positive int.*Received: nprocs=0"):
        sd.spawn(print, nprocs=0)
    with pytest.raises(ValueError, match=r"Expected `join` to be True"):
        sd.spawn(print, nprocs=2, join=False)
