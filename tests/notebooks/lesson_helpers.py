"""Running a lesson headless and checking the course conventions, shared by the notebook tests.

A module of its own, not ``conftest``: conftest module names collide across test folders.
"""
from __future__ import annotations

import os
import re
from contextlib import nullcontext
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import find_kernel_specs

from sampan.hapi.loop import FAST_DEV_RUN_ENV
from sampan.utils.io import file_lock
from sampan.utils.notebooks import execute_notebook
from sampan.utils.record import collect_records

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
KERNEL = "sampan" if "sampan" in find_kernel_specs() else "python3"
_MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|root|home|tmp)/")


STARTER_BATCHES = 2  # $SAMPAN_FAST_DEV_RUN of the starter-code runs: batches per epoch in fit and evaluate
_RUNS: dict[tuple, tuple[dict, Path]] = {}
_RUNS_ROOT: dict[str, Path] = {}
SHARED_ENV = "SAMPAN_TEST_LESSONS_DIR"  # set by tests/conftest.py: one folder for every pytest-xdist worker


def _shared_root() -> Path:
    """Where lesson runs are kept: ``$SAMPAN_TEST_LESSONS_DIR`` (shared by the workers of one test run, under
    pytest's own rotating temporary folder), else a folder of this process removed when it exits."""
    if os.environ.get(SHARED_ENV):
        return Path(os.environ[SHARED_ENV])
    if "root" not in _RUNS_ROOT:
        import atexit
        import shutil
        import tempfile

        _RUNS_ROOT["root"] = Path(tempfile.mkdtemp(prefix="sampan-lessons-"))
        atexit.register(shutil.rmtree, _RUNS_ROOT["root"], ignore_errors=True)
    return _RUNS_ROOT["root"]


def lesson_data_dir(lesson: str | Path) -> Path:
    """The ``SAMPAN_DATA`` a lesson's test runs use (its work_dir is ``<this>/lessons/<id>``)."""
    return _shared_root() / _source(lesson).stem / "data"


def _source(lesson: str | Path) -> Path:
    return Path(lesson) if Path(lesson).suffix == ".ipynb" else NOTEBOOKS / f"{lesson}.ipynb"


def lesson_run(lesson: str | Path, *, solution: bool = True, lang: str | None = None,
               **parameters) -> tuple[dict, Path]:
    """Runs a lesson once per test run for each (solution, language, parameters) and returns what it recorded
    and the executed notebook; every test of that lesson, in any pytest-xdist worker, reads the same run.

    ``lesson``: a path, or ``"<stage>/<name>"`` relative to notebooks/. The reference-solution run of a
    bilingual lesson runs its Chinese build (its code is the English one, cell for cell: the bilingual tests
    check that), so the suite runs each lesson twice in all: the solutions in Chinese and the untouched
    starter code in English, as a smoke run (``$SAMPAN_FAST_DEV_RUN``: every cell runs, each ``fit`` and
    ``evaluate`` on a few batches an epoch). A lesson's runs share one data directory and run one at a time (a file lock), so
    a second worker waits for the first one's run instead of repeating it.
    """
    import json

    from sampan.path.lang import build_notebook, is_bilingual

    source = _source(lesson)
    nb = json.loads(source.read_text(encoding="utf-8"))
    if lang is None:
        lang = "zh" if solution and is_bilingual(nb) else "en"
    key = (source.resolve(), solution, lang, tuple(sorted(parameters.items())))
    if key in _RUNS:
        return _RUNS[key]
    home = _shared_root() / source.stem
    workdir = home / "-".join(["solution" if solution else "starter", lang,
                               *(f"{k}={v}" for k, v in sorted(parameters.items()))])
    home.mkdir(parents=True, exist_ok=True)
    # one run of a lesson at a time across workers; lessons that launch process groups (gloo, several ranks) also
    # one at a time among themselves: two at once on 2 cores starve each other's collectives into aborts
    groups = file_lock(_shared_root() / ".process-groups.lock") if launches_process_groups(nb) else nullcontext()
    with file_lock(home / ".lock"), groups:
        done = workdir / "records.json"
        output = workdir / f"{source.stem}.out.ipynb"
        if done.is_file():
            _RUNS[key] = json.loads(done.read_text(encoding="utf-8")), output
        else:
            workdir.mkdir(parents=True, exist_ok=True)
            built = workdir / source.name
            built.write_text(json.dumps(build_notebook(nb, lang) if is_bilingual(nb) else nb,
                                        ensure_ascii=False), encoding="utf-8")
            records, output = _execute(built, workdir, data=home / "data", lang=lang,
                                       parameters={"SOLUTION": solution, **parameters})
            done.write_text(json.dumps(records), encoding="utf-8")  # written last: the run is complete
            _RUNS[key] = records, output
    return _RUNS[key]


def launches_process_groups(nb: dict) -> bool:
    """Whether a lesson (its notebook JSON) starts process groups with ``notebook_launcher``."""
    return any("notebook_launcher" in "".join(c.get("source", "")) for c in nb.get("cells", []))


def _execute(notebook: Path, workdir: Path, *, data: Path, lang: str, parameters: dict) -> tuple[dict, Path]:
    env = {"SAMPAN_DATA": str(data), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
           "MPLBACKEND": "module://matplotlib_inline.backend_inline", "SAMPAN_LANG": lang,
           # the starter-code run is a smoke run: every cell still runs, each fit / evaluate on 2 batches an
           # epoch (the solution run has already trained for real on the same code)
           FAST_DEV_RUN_ENV: "" if parameters.get("SOLUTION", True) else str(STARTER_BATCHES),
           # one hash seed for every lesson kernel, whatever seed_everything left in this worker's environment:
           # kernels are forked from a server started with their own seed (sampan.utils.forkkernels), so one
           # seed means one server per worker
           "PYTHONHASHSEED": "0"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        output = workdir / f"{notebook.stem}.out.ipynb"
        execute_notebook(str(notebook), str(output), parameters={"QUICK": True, **parameters},
                                   kernel_name=KERNEL, cwd=str(workdir), progress_bar=False, log_output=False,
                                   execution_timeout=600)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return collect_records(output), output


def outputs_text(notebook: Path) -> str:
    """Every output of the executed notebook as text, one output a line; the pieces of one stream that the kernel
    sent apart (it flushes on a timer, so under load ``print("a", b)`` can arrive as "a" then " b") joined as a
    reader sees them."""
    nb = nbformat.read(notebook, as_version=4)
    parts: list[str] = []
    for cell in nb.cells:
        stream = None
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == stream:
                parts[-1] += out.get("text", "")
                continue
            stream = out.get("name") if out.get("output_type") == "stream" else None
            parts.append(out.get("text", "") or out.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


def assert_follows_conventions(lesson: Path) -> None:
    """Kernel "Sampan (Python 3)", goal and time first, one ``parameters`` cell with ``QUICK``, an exercise,
    no committed outputs, no absolute paths of a machine."""
    nb = nbformat.read(lesson, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "sampan"
    assert nb.metadata["kernelspec"]["display_name"] == "Sampan (Python 3)"
    first = nb.cells[0]
    assert first.cell_type == "markdown" and "Goal" in first.source and "Time" in first.source
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1 and "QUICK = True" in params[0].source
    assert any("# YOUR ANSWER" in c.source for c in nb.cells if c.cell_type == "code")
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, f"committed output in {lesson.name}"
            assert not _MACHINE_PATH.search(cell.source), f"absolute path in {lesson.name}: {cell.source[:80]}"


def assert_exercises_follow_the_convention(lesson: Path) -> None:
    """Exercises v2 (notebooks/README.md, "Exercises"): a checks module beside the lesson defines every exercise
    the lesson ranges in path.yaml; solution cells are tagged, hidden and only call ``solve``; the lesson ends
    with ``ex.done()``; no check cell compares against a value it spells out."""
    from sampan.path.exercise import Exercises
    from sampan.path.manifest import load_path

    nb = nbformat.read(lesson, as_version=4)
    ids = [x.id for x in load_path(NOTEBOOKS / "path.yaml", check_files=False).lessons
           if x.notebook.resolve() == lesson.resolve()]
    assert ids, f"{lesson.name} is not in path.yaml"
    entry = load_path(NOTEBOOKS / "path.yaml", check_files=False).lesson(ids[0])
    ranged = {m.name[len("exercise_"):] for m in entry.metrics if m.name.startswith("exercise_")}
    checks = lesson.parent / "checks" / f"{ids[0]}.py"
    assert checks.is_file(), f"{lesson.name}: its exercises belong in {checks.relative_to(NOTEBOOKS)}"
    defined = set(Exercises(ids[0]).exercises)
    assert ranged and ranged == defined, f"{lesson.name}: path.yaml ranges {sorted(ranged)}, checks define {sorted(defined)}"
    code = [c for c in nb.cells if c.cell_type == "code"]
    solutions = [c for c in code if "solution" in c.metadata.get("tags", [])]
    assert solutions, f"{lesson.name}: no solution cell tagged `solution`"
    for cell in solutions:
        assert cell.metadata.get("jupyter", {}).get("source_hidden"), f"{lesson.name}: a solution cell is not hidden"
        body = [line.strip() for line in cell.source.splitlines() if line.strip() and not line.strip().startswith("#")]
        assert body[0] == "if SOLUTION:" and all(re.fullmatch(r"ex\.\w+\.solve\(globals\(\)\)", b) for b in body[1:]), \
            f"{lesson.name}: a solution cell holds more than `if SOLUTION: ex.<name>.solve(globals())`:\n{cell.source}"
    for name in defined:
        assert any(f"ex.{name}.check(" in c.source for c in code), f"{lesson.name}: ex.{name}.check(...) is never called"
    assert any("ex.done()" in c.source for c in code), f"{lesson.name}: the lesson never calls ex.done()"
