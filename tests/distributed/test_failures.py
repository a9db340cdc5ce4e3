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


def test_a_stalled_rank_is_named_by_the_rank_that_waited_and_by_the_launcher(tmp_path, train_script):
    # rank 1 sleeps 120 s before step 2's gradient all-reduce; rank 0 gives up after 8 s (not less: on a busy
    # machine the ranks may reach their first collective seconds apart)
    proc, _ = launch(["--nproc_per_node", "2", "--timeout", "8", train_script, str(tmp_path), "--stall-on-rank", "1"],
                     timeout=100)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert re.search(r"DistributedError: A collective timed out after 8 s on rank 0: rank\(s\) \[1\] did not arrive\. "
                     r"Last positions: rank 0: training, epoch 0 step 2; rank 1: after training epoch 0 step 1", output)
    # torchrun's summary blames rank 0 (the first to fail); sampan launch's last word names the stalled rank
    tail = output[output.rindex("Root Cause (first observed failure)"):]
    assert "sampan launch: rank(s) [1] stalled" in tail and "rank(s) [0] gave up waiting" in tail, tail
    assert not (tmp_path / "rank0.json").exists() and not (tmp_path / "rank1.json").exists()


def test_a_stall_with_every_rank_at_the_same_step_blames_the_rank_that_did_not_wait():
    start = time.time()
    pattern = r"(?s)Rank 0 of 2 raised first.*timed out after 6 s on rank 0: rank\(s\) \[1\] did not arrive"
    with pytest.raises(sd.DistributedError, match=pattern):
        sd.spawn(_stall_inside_the_step, nprocs=2, threads=1, timeout=6)
    assert time.time() - start < 55


def _stall_inside_the_step():
    import torch
    import torch.distributed as dist

    from sampan.distributed.watchdog import Heartbeat, watch

    sd.init_parallel_env(timeout=6)
    beat = Heartbeat()
    beat.on_train_batch_begin(0)  # both ranks reach step 0; rank 1 then hangs inside it
    with watch(2, timeout=6, grace=1):
        if sd.get_rank() == 1:
            time.sleep(60)
        dist.all_reduce(torch.ones(1))


def test_launch_timeout_needs_a_positive_number_of_seconds(capsys):
    from sampan.distributed.launch import main

    for argv, shown in ((["--timeout", "abc", "train.py"], "--timeout='abc'"), (["--timeout"], "--timeout=None"),
                        (["--timeout=-5", "train.py"], "--timeout='-5'")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "Expected `--timeout` to be a" in err and f"Received: {shown}" in err and "HINT: write --timeout 120" in err


def test_collectives_wait_minutes_by_default_not_half_an_hour(monkeypatch):
    from sampan.distributed.env import TIMEOUT_ENV, timeout_seconds

    monkeypatch.delenv(TIMEOUT_ENV, raising=False)
    assert timeout_seconds() <= 600
    monkeypatch.setenv(TIMEOUT_ENV, "12")
    assert timeout_seconds() == 12.0 and timeout_seconds(4) == 4.0
    monkeypatch.setenv(TIMEOUT_ENV, "soon")
    with pytest.raises(ValueError, match=r"Expected `SAMPAN_DIST_TIMEOUT` to be a positive number.*'soon'"):
        timeout_seconds()


def test_only_a_collective_timeout_is_taken_for_a_stall():
    from sampan.distributed.watchdog import is_timeout, watch

    gloo = RuntimeError("[third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 3000ms for recv")
    assert is_timeout(gloo)
    assert not is_timeout(RuntimeError("DataLoader timed out after 5 seconds"))
    with pytest.raises(RuntimeError, match="DataLoader timed out"):  # passes through unchanged
        with watch(2):
            raise RuntimeError("DataLoader timed out after 5 seconds")


def _rank_one_aborts_at_exit():
    import os

    rank = int(os.environ["RANK"])
    if rank == 1:  # what gloo's teardown sometimes does: abort the process after its work is done
        threading.Timer(0.5, os.abort).start()
        return "one"
    time.sleep(4)  # rank 0 is slower: it must not be stopped while it finishes
    return "zero"


def test_a_rank_that_crashes_after_its_result_does_not_stop_the_others():
    with pytest.warns(RuntimeWarning, match=r"Rank 1 crashed while exiting \(code -6\) after finishing its work"):
        results = sd.spawn(_rank_one_aborts_at_exit, nprocs=2, threads=1)
    assert results == ["zero", "one"]


def _where_and_what() -> dict:
    import os
    import sys

    return {"parent": os.getppid(), "torch_imported": "torch" in sys.modules, "note": os.environ.get("SAMPAN_TEST_NOTE"),
            "cwd": os.getcwd()}


def test_launches_fork_from_one_server_that_has_torch_and_see_the_launchers_environment_now(monkeypatch, tmp_path):
    import os

    monkeypatch.setenv("SAMPAN_TEST_NOTE", "first")
    first = sd.spawn(_where_and_what, nprocs=2, threads=1)
    monkeypatch.setenv("SAMPAN_TEST_NOTE", "second")  # set after the server started: the ranks must still see it
    monkeypatch.chdir(tmp_path)
    second = sd.notebook_launcher(_where_and_what, nprocs=2, threads=1)
    parents = {r["parent"] for r in first + second}
    assert len(parents) == 1 and os.getpid() not in parents  # one fork server, reused; never this process
    assert all(r["torch_imported"] for r in second)
    assert [r["note"] for r in first + second] == ["first", "first", "second", "second"]
    assert {r["cwd"] for r in second} == {str(tmp_path)}
    with pytest.raises(ValueError, match="start_method.*'forkserver', 'spawn' or 'fork'"):
        sd.spawn(_where_and_what, nprocs=2, start_method="threads")
    assert sd.spawn(_where_and_what, nprocs=2, threads=1, start_method="spawn")[0]["parent"] == os.getpid()


def _explode_in_a_rank(message: str):
    import os

    if "RANK" in os.environ:  # unpickled in a rank, before fn runs
        raise RuntimeError(message)
    return message


class _FailsToArrive:
    def __reduce__(self):
        return _explode_in_a_rank, ("planted while unpickling the arguments",)


def test_an_error_before_fn_runs_is_reported_with_its_traceback():
    pattern = r"(?s)Rank \d of 2 raised first.*Traceback.*RuntimeError: planted while unpickling the arguments"
    with pytest.raises(sd.DistributedError, match=pattern):
        sd.spawn(print, args=(_FailsToArrive(),), nprocs=2, threads=1)


@pytest.mark.parametrize("threads", [-1, 0, 1.5, True, "2"])
def test_threads_must_be_a_positive_int(threads):
    with pytest.raises(ValueError, match=rf"Expected `threads` to be an int >= 1\. Received: threads={threads!r}\. "
                                         r"HINT: pass threads=1"):
        sd.spawn(print, nprocs=2, threads=threads)


def test_a_script_without_a_main_guard_is_told_to_add_one(tmp_path):
    import os
    import subprocess
    import sys

    script = tmp_path / "unguarded.py"
    script.write_text("import sampan.distributed as dist\n\ndef work():\n    return dist.get_rank()\n\n"
                      "print(dist.spawn(work, nprocs=2, threads=1))\n")
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=str(tmp_path),
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert res.returncode == 1
    last = res.stderr.strip().splitlines()[-1]
    assert "exited with code 1 before Sampan's worker started in it" in last, res.stderr
    assert f"imports the launching script ({script}) again" in last
    assert 'HINT: put the code that calls spawn / notebook_launcher under `if __name__ == "__main__":`' in last
    assert "crash in native code" not in last


def test_what_torchs_wrapper_caught_is_the_traceback_reported(tmp_path):
    import pickle

    from sampan.distributed.launcher import _first_failure

    note = tmp_path / "torch-error"
    note.write_bytes(pickle.dumps("Traceback (most recent call last):\nValueError: planted in the wrapper"))
    error = _first_failure(str(tmp_path), 2, 1, "exited with code 1 without a Python traceback.", [None, str(note)])
    assert error.ranks == [1] and "Rank 1 of 2 raised first" in str(error)
    assert "ValueError: planted in the wrapper" in str(error)


_AT_EXIT = """
import atexit, sys
import torch.distributed as dist
atexit.register(lambda: print("at exit the group is", "alive" if dist.is_initialized() else "destroyed"))  # runs last
import sampan.distributed as sd
if sys.argv[1] == "user":  # a group the user made: not Sampan's to destroy
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{sd.free_port()}", rank=0, world_size=1)
print("sampan created it:", sd.init_parallel_env())
if sys.argv[1] == "raises":  # a rank that failed leaves the group alone: its peers may be gone
    raise RuntimeError("planted")
"""


@pytest.mark.parametrize("case, created, at_exit", [("sampan", True, "destroyed"), ("user", False, "alive"),
                                                    ("raises", True, "alive")])
def test_the_group_sampan_created_is_destroyed_at_exit_not_left_to_the_teardown(case, created, at_exit):
    # gloo's threads outliving their group at interpreter exit can abort a rank that finished (SIGABRT,
    # "terminate called without an active exception"), and torchrun then fails the job
    import os
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", _AT_EXIT, case], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert res.returncode == (1 if case == "raises" else 0), res.stderr
    assert res.stdout.split("\n")[:2] == [f"sampan created it: {created}", f"at exit the group is {at_exit}"]


_ABORTS_AFTER_FINISHING = """
import atexit, os, sys, time
from pathlib import Path
import torch
rank = int(os.environ["RANK"])
if rank == 1:
    def abort_once_rank_0_finished():  # what gloo's teardown sometimes does, once the work is done
        note = Path(os.environ["SAMPAN_LAUNCH_NOTES"], "finished-0")
        for _ in range(600):
            if note.exists():
                break
            time.sleep(0.1)
        os.abort()
    atexit.register(abort_once_rank_0_finished)  # runs after Sampan's exit hook, registered later
import sampan.distributed as sd
sd.init_parallel_env()
t = torch.ones(1)
torch.distributed.all_reduce(t)
Path(sys.argv[1], f"rank{rank}").write_text(str(float(t)))
"""


def test_a_rank_that_aborts_at_exit_after_a_clean_finish_does_not_fail_the_launch(tmp_path):
    script = tmp_path / "aborts.py"
    script.write_text(_ABORTS_AFTER_FINISHING)
    proc, _ = launch(["--nproc_per_node", "2", str(script), str(tmp_path)], timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "rank(s) [1] crashed while exiting (SIGABRT" in output and "the job succeeded" in output
    assert [(tmp_path / f"rank{r}").read_text() for r in (0, 1)] == ["2.0", "2.0"]


def test_an_abort_counts_as_success_only_when_every_failed_rank_had_finished(tmp_path):
    from types import SimpleNamespace as Failure

    from sampan.distributed.launch import _aborted_after_finishing

    (tmp_path / "finished-1").touch()
    assert _aborted_after_finishing({1: Failure(exitcode=-6)}, str(tmp_path)) == [1]
    # rank 0 was stopped by torchrun before it had finished: its work is cut short, the job failed
    assert _aborted_after_finishing({1: Failure(exitcode=-6), 0: Failure(exitcode=-15)}, str(tmp_path)) == []
    (tmp_path / "finished-0").touch()
    assert _aborted_after_finishing({1: Failure(exitcode=-6), 0: Failure(exitcode=-15)}, str(tmp_path)) == [1]
    assert _aborted_after_finishing({1: Failure(exitcode=-6), 0: Failure(exitcode=1)}, str(tmp_path)) == []
    assert _aborted_after_finishing({1: Failure(exitcode=-11)}, str(tmp_path)) == []  # a segfault is a failure
    assert _aborted_after_finishing({2: Failure(exitcode=-6)}, str(tmp_path)) == []  # rank 2 did not finish
