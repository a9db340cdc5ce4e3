"""Executes notebooks/03-advanced/develop_dynamic_deploy_static.ipynb in quick mode and checks its records."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

papermill = pytest.importorskip("papermill")
from jupyter_client.kernelspec import find_kernel_specs  # noqa: E402

from sampan.utils.record import collect_records  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LESSON = REPO / "notebooks/03-advanced/develop_dynamic_deploy_static.ipynb"
KERNEL = "sampan" if "sampan" in find_kernel_specs() else "python3"

pytestmark = [pytest.mark.notebook, pytest.mark.slow]


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("deploy_lesson")
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
    return collect_records(output), output


def test_lesson_converts_explains_exports_and_serves(executed):
    records, _ = executed
    assert records["eager_acc"] > 0.8
    assert 0.0 <= records["static_max_abs_diff"] < 1e-4
    assert records["graph_breaks_before"] >= 1 and records["graph_breaks_after"] == 0
    assert 0.0 <= records["loaded_max_abs_diff"] < 1e-4
    assert records["predictor_matches_eager"] is True
    assert records["latency_ratio_eager_over_predictor_b1"] > 0
    assert records["exercise_fix_graph_break"] is True


def test_lesson_shows_the_fallback_warning_and_the_input_check(executed):
    import nbformat

    _, output = executed
    nb = nbformat.read(output, as_version=4)
    text = "\n".join(o.get("text", "") or o.get("data", {}).get("text/plain", "")
                     for c in nb.cells for o in c.get("outputs", []))
    assert "if x.abs().max() > 10:" in text and "torch.where" in text
    assert "status: eager" in text
    assert "bad input -> input 'image' has dtype float64" in text


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
            assert "/work/" not in cell.source and "/tmp/" not in cell.source  # no absolute paths
