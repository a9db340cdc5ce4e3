"""Executes notebooks/03-advanced/compress_a_model.ipynb in quick mode and checks its records."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

papermill = pytest.importorskip("papermill")
from jupyter_client.kernelspec import find_kernel_specs  # noqa: E402

from sampan.utils.record import collect_records  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LESSON = REPO / "notebooks/03-advanced/compress_a_model.ipynb"
KERNEL = "sampan" if "sampan" in find_kernel_specs() else "python3"

pytestmark = [pytest.mark.notebook, pytest.mark.slow]


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("compress_lesson")
    env = {"SAMPAN_DATA": str(tmp / "data"), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
           "MPLBACKEND": "Agg",
           "PYTHONPATH": os.pathsep.join([str(REPO / "platform"), str(REPO / "widgets"),
                                          os.environ.get("PYTHONPATH", "")])}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        output = tmp / "lesson.out.ipynb"
        papermill.execute_notebook(str(LESSON), str(output), parameters={"QUICK": True, "SOLUTION": True},
                                   kernel_name=KERNEL, cwd=str(tmp), progress_bar=False, log_output=False,
                                   execution_timeout=600)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return collect_records(output)


def test_lesson_prunes_quantizes_and_serves_within_the_goals(records):
    assert records["baseline_acc"] > 85.0
    assert 0.40 <= records["pruned_flops_ratio"] <= 0.505        # half the FLOPs, as asked
    assert records["pruned_finetuned_acc"] >= records["baseline_acc"] - 3.0
    assert records["static_int8_acc_drop"] <= 2.0
    assert records["int8_size_ratio"] <= 0.35
    assert records["served_int8_acc"] >= records["baseline_acc"] - 2.0
    assert records["served_pruned_acc"] == pytest.approx(records["pruned_finetuned_acc"], abs=0.5)
    assert records["exercise_keep_sensitive_float"] is True


def test_lesson_follows_the_course_conventions():
    import nbformat

    nb = nbformat.read(LESSON, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "sampan"
    assert nb.cells[0].cell_type == "markdown" and "Goal" in nb.cells[0].source and "Time" in nb.cells[0].source
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1 and "QUICK = True" in params[0].source and "SOLUTION = False" in params[0].source
    assert any("# YOUR ANSWER" in c.source for c in nb.cells if c.cell_type == "code")
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None
            assert "/work/" not in cell.source and "/tmp/" not in cell.source
