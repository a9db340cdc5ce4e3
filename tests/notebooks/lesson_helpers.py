"""Running a lesson headless and checking the course conventions, shared by the notebook tests.

A module of its own, not ``conftest``: conftest module names collide across test folders.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
import papermill
from jupyter_client.kernelspec import find_kernel_specs

from sampan.utils.record import collect_records

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
KERNEL = "sampan" if "sampan" in find_kernel_specs() else "python3"
_MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|root|home|tmp)/")


def run_lesson(lesson: Path, workdir: Path, **parameters) -> tuple[dict, Path]:
    """Executes ``lesson`` with papermill in ``workdir`` (``QUICK=True, SOLUTION=True`` unless overridden),
    with ``SAMPAN_DATA`` in ``workdir/data``; returns what it recorded and the executed notebook."""
    env = {"SAMPAN_DATA": str(workdir / "data"), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
           "MPLBACKEND": "Agg"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        output = workdir / f"{lesson.stem}.out.ipynb"
        papermill.execute_notebook(str(lesson), str(output), parameters={"QUICK": True, "SOLUTION": True, **parameters},
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
    nb = nbformat.read(notebook, as_version=4)
    return "\n".join(o.get("text", "") or o.get("data", {}).get("text/plain", "")
                     for c in nb.cells for o in c.get("outputs", []))


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
