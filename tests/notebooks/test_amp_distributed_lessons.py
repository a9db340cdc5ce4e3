"""Executes the "Mixed precision" and "Distributed training" lessons (notebooks/03-advanced/) in quick mode.

The distributed lesson runs ``notebook_launcher`` from a real Jupyter kernel (papermill / nbclient), which is
the case other launchers break on: the training function is defined in the notebook's ``__main__``.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

papermill = pytest.importorskip("papermill")
import nbformat  # noqa: E402
from jupyter_client.kernelspec import find_kernel_specs  # noqa: E402

from sampan.utils.record import collect_records  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LESSONS = REPO / "notebooks" / "03-advanced"
KERNEL = "sampan" if "sampan" in find_kernel_specs() else "python3"

pytestmark = [pytest.mark.notebook, pytest.mark.slow]


def _execute(name: str, tmp: Path) -> tuple[dict, Path]:
    env = {"SAMPAN_DATA": str(tmp / "data"), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
           "MPLBACKEND": "Agg",
           "PYTHONPATH": os.pathsep.join([str(REPO / "platform"), os.environ.get("PYTHONPATH", "")])}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        output = tmp / f"{name}.out.ipynb"
        papermill.execute_notebook(str(LESSONS / f"{name}.ipynb"), str(output),
                                   parameters={"QUICK": True, "SOLUTION": True}, kernel_name=KERNEL, cwd=str(tmp),
                                   progress_bar=False, log_output=False, execution_timeout=600)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return collect_records(output), output


def _text(path: Path) -> str:
    nb = nbformat.read(path, as_version=4)
    return "\n".join(o.get("text", "") or o.get("data", {}).get("text/plain", "")
                     for c in nb.cells for o in c.get("outputs", []))


@pytest.fixture(scope="module")
def mixed_precision(tmp_path_factory):
    return _execute("mixed_precision", tmp_path_factory.mktemp("mixed_precision"))


@pytest.fixture(scope="module")
def distributed(tmp_path_factory):
    return _execute("distributed_training", tmp_path_factory.mktemp("distributed_training"))


def test_mixed_precision_lesson_records(mixed_precision):
    records, output = mixed_precision
    assert records["acc_fp32"] > 0.85 and records["acc_bf16"] > 0.85
    assert records["acc_gap_points"] <= 1.0
    assert records["fp16_skipped_steps"] >= 5  # from 2**32 down to a workable scale
    assert records["doctor_module"] == "amplify"
    assert records["o2_master_is_fp32"] is True
    assert records["exercise_fix_overflow"] is True
    assert isinstance(records["cpu_native_bf16"], bool)
    assert "First non-finite output: module 'amplify' (Linear)" in _text(output)


def test_distributed_lesson_records(distributed):
    records, output = distributed
    assert records["world_size"] == 2
    assert records["ranks_agree_on_acc"] is True
    assert 0.0 <= records["ddp_vs_single_max_abs_diff"] < 1e-4
    assert records["unpicklable_named"] is True
    assert records["failing_rank"] == 1
    assert records["exercise_steps"] is True
    text = _text(output)
    assert "global `lock` of fn (lock) -> TypeError" in text and "Rank 1 of 2 raised first" in text


@pytest.mark.parametrize("name", ["mixed_precision", "distributed_training"])
def test_lessons_follow_the_course_conventions(name):
    nb = nbformat.read(LESSONS / f"{name}.ipynb", as_version=4)
    assert nb.metadata["kernelspec"] == {"display_name": "Sampan (Python 3)", "language": "python", "name": "sampan"}
    assert nb.cells[0].cell_type == "markdown" and "**Goal:**" in nb.cells[0].source
    assert "**Time:**" in nb.cells[0].source
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1 and "QUICK = True" in params[0].source
    assert any("# YOUR ANSWER" in c.source for c in nb.cells if c.cell_type == "code")
    assert "sampan.record(\"exercise_" in "".join(c.source for c in nb.cells[-4:])
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None
            assert "/work/" not in cell.source and "/tmp/" not in cell.source
