"""Shared fixtures: an isolated data directory and small deterministic datasets."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch


# `make test` (pytest-xdist, --dist loadfile --no-loadscope-reorder) hands whole files to the workers in collection
# order. The costliest come first (the lesson runs, dealt evenly to test_courses*.py, then the servers and browsers),
# so that the many short files at the end fill in until the workers finish together; the files that only re-read
# the lessons' runs come last, when those runs are done (tests/notebooks/lesson_helpers.py). Ranked by the
# seconds each file took in `make test` on 2 cores, 2026-12-03.
_COSTLIEST_FIRST = ("notebooks/test_courses", "hub/test_classroom.py", "browser/test_lab_and_dashboards.py",
                    "distributed/test_failures.py", "platform/jit/test_zoo_parity.py",
                    "platform/experiments/test_sweep.py", "browser/test_widgets_browser.py",
                    "hub/test_live_dashboards.py", "platform/path/test_site.py", "browser/", "distributed/", "hub/")
_RE_READ_LAST = ("notebooks/test_bilingual_lessons.py", "notebooks/test_amp_distributed_lessons.py",
                 "notebooks/test_compress_lesson.py", "notebooks/test_deploy_lesson.py")


def pytest_collection_modifyitems(config, items):
    def rank(item) -> int:
        path = item.nodeid.split("::")[0].removeprefix("tests/")
        for i, prefix in enumerate(_COSTLIEST_FIRST):
            if path.startswith(prefix):
                return i
        return len(_COSTLIEST_FIRST) + 1 + (path in _RE_READ_LAST)

    items.sort(key=rank)  # stable: a file's tests keep their order


_CHECKOUT = Path(__file__).resolve().parents[1]
_NOT_SOURCES = {".git", ".venv", "__pycache__", ".pytest_cache", ".ipynb_checkpoints"}


def _checkout_paths() -> set[str]:
    """Every file and folder of the checkout, but for the environment, caches and git's own."""
    found = set()
    for root, dirs, files in os.walk(_CHECKOUT):
        dirs[:] = [d for d in dirs if d not in _NOT_SOURCES and not d.endswith(".egg-info")]
        rel = os.path.relpath(root, _CHECKOUT)
        found.update(os.path.normpath(os.path.join(rel, name)) for name in (*dirs, *files))
    return found


def pytest_sessionstart(session):
    import signal

    # A suite started in the background of a shell without job control (`make test &`, as fresh-ci is often run)
    # inherits SIGINT ignored, and so do its workers and their children; the tests expect Ctrl-C as a terminal
    # gives it (tests/platform/path/test_interrupt.py).
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if not hasattr(session.config, "workerinput"):  # the run's own process (pytest-xdist's controller)
        session.config.stash[_CHECKOUT_KEY] = _checkout_paths()


def pytest_sessionfinish(session, exitstatus):
    """A test writes in its own temporary folder, never in the checkout: a path the run added there fails it
    (a relative path in a test once made tmp/pytest-of-root/... beside the sources)."""
    before = session.config.stash.get(_CHECKOUT_KEY, None)
    if before is None:
        return
    added = sorted(_checkout_paths() - before)
    if added:
        shown = ", ".join(added[:10]) + (f" and {len(added) - 10} more" if len(added) > 10 else "")
        print(f"\nThe tests added to the checkout ({_CHECKOUT.name}/): {shown}. A test must write only under "
              "its tmp_path (or the data folder the fixtures give it).", flush=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_CHECKOUT_KEY = pytest.StashKey[set]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """``SAMPAN_TEST_TIMELINE=<file>``: each test's worker, start and end go to that file as JSON lines, to see
    where a run's workers wait on one another (how the costliest-first order above was checked) and the CPU each
    test spent (``tests/cpu_sampler.py`` adds the processes no test waits for)."""
    path = os.environ.get("SAMPAN_TEST_TIMELINE")
    if not path:
        return (yield)
    import json
    import resource
    import time

    def children() -> float:  # CPU seconds of the child processes waited for so far
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    start, cpu, child_cpu = time.time(), time.process_time(), children()
    try:
        return (yield)
    finally:
        # the worker's own CPU and that of the children it waited for; a process the test started but did not wait
        # for (a forked kernel, a server left to its parent) is not counted: sample /proc to see those
        line = {"worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), "pid": os.getpid(), "test": item.nodeid,
                "start": start, "end": time.time(), "cpu": round(time.process_time() - cpu, 3),
                "children_cpu": round(children() - child_cpu, 3)}
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")


@pytest.fixture(autouse=True)
def sigint_kept():
    """A test that leaves Ctrl-C's handler changed fails by name, and the handler is put back: fresh-ci once failed
    both Ctrl-C tests of tests/platform/path/test_interrupt.py with SIGINT ignored in their worker (a child process
    inherits that, so `sampan path run` ignored the test's Ctrl-C; the cause was fresh-ci started with `&`, see
    pytest_sessionstart)."""
    import signal

    before = signal.getsignal(signal.SIGINT)
    yield
    after = signal.getsignal(signal.SIGINT)
    if after is not before:
        signal.signal(signal.SIGINT, before)
        pytest.fail(f"the test left SIGINT's handler {after!r} (it was {before!r}): restore it when done")


@pytest.fixture(autouse=True)
def data_home(tmp_path_factory, monkeypatch):
    """Every test gets its own empty SAMPAN_DATA (the weight zoo lives there), outside its tmp_path;
    nothing touches the user's cache."""
    home = tmp_path_factory.mktemp("sampan-data")
    monkeypatch.setenv("SAMPAN_DATA", str(home))
    return home


@pytest.fixture(autouse=True)
def hash_seed(monkeypatch):
    """Every test starts with ``PYTHONHASHSEED=0``, the seed of the lessons' kernels
    (tests/notebooks/lesson_helpers.py), whatever an earlier test's ``seed_everything`` left in its worker: a notebook
    a test runs is then forked from the kernel fork server its worker already has (sampan.utils.forkkernels keeps one
    server per hash seed, each 3-4 CPU-seconds to start; three more were started for leftover seeds in a run of the
    suite)."""
    monkeypatch.setenv("PYTHONHASHSEED", "0")


@pytest.fixture(autouse=True, scope="session")
def tracking_store(tmp_path_factory):
    """Every fit is a recorded run: the session's runs (and the lessons' kernels' runs, which inherit the
    environment) go to one temporary MLflow store, never the user's."""
    uri = f"sqlite:///{(tmp_path_factory.mktemp('sampan-tracking') / 'mlflow.db').as_posix()}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SAMPAN_TRACKING_URI", uri)
        mp.setenv("SAMPAN_RECORDER_IDLE", "60")  # the recording service the suite starts leaves a minute after it
        yield uri


@pytest.fixture(autouse=True, scope="session")
def state_home(tmp_path_factory):
    """Sampan's per-user state (the trusted AOTInductor packages) goes to a temporary folder, never the user's
    ~/.local/state, and each test process (pytest-xdist worker) has its own."""
    with pytest.MonkeyPatch.context() as mp:
        path = tmp_path_factory.mktemp("xdg-state")
        mp.setenv("XDG_STATE_HOME", str(path))
        yield path


@pytest.fixture(autouse=True, scope="session")
def lesson_runs(tmp_path_factory):
    """One folder for the course lessons' runs of this test run, shared by the pytest-xdist workers (under
    pytest's rotating temporary folder), so each lesson runs once per mode whichever worker asks first
    (tests/notebooks/lesson_helpers.py)."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "lessons"
    shared.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SAMPAN_TEST_LESSONS_DIR", str(shared))
        yield shared


@pytest.fixture
def one_thread():
    """Small networks run several times faster on one thread of a busy 2-core machine (restored after)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def blobs():
    """A small 2-class problem a tiny MLP learns in a few epochs: (train, val) TensorDatasets."""
    from torch.utils.data import TensorDataset

    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 16, generator=g)
    y = (x[:, :4].sum(1) > 0).long()
    return TensorDataset(x[:192], y[:192]), TensorDataset(x[192:], y[192:])


@pytest.fixture
def mlp():
    def make(seed: int = 0, dropout: float = 0.0):
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Dropout(dropout),
                                   torch.nn.Linear(32, 2))
    return make


@pytest.fixture
def leaky_callback():
    """A callback that leaks 256 KiB of fresh, touched memory per batch (the seeds' "memory keeps growing").

    The memory comes from mmap, not the allocator, so RSS grows even in a long test process whose heap has
    free space left by earlier tests.
    """
    import mmap

    from sampan.callbacks import Callback

    class Leaky(Callback):
        def __init__(self):
            super().__init__()
            self.kept = []

        def on_train_batch_end(self, step, logs=None):
            block = mmap.mmap(-1, 256 * 1024)
            block.write(b"\1" * len(block))
            self.kept.append(block)

    return Leaky
