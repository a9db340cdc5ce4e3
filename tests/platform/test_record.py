"""sampan.record: a print outside a kernel, a MIME output inside one that collect_records reads back."""
import json

import nbformat
import pytest
from nbclient import NotebookClient

import sampan
from sampan.utils.notebooks import with_kernel_restarts
from sampan.utils.record import RECORD_MIME, collect_records


def test_record_outside_a_kernel_prints_and_returns_plain_values(capsys):
    import numpy as np
    import torch

    assert sampan.record("acc", torch.tensor(0.975)) == pytest.approx(0.975)
    assert sampan.record("n", np.int64(3)) == 3
    assert "[sampan.record] acc = 0.975" in capsys.readouterr().out
    with pytest.raises(TypeError, match=r"Expected `value` to be a number.*float\(accuracy\)"):
        sampan.record("bad", object())
    with pytest.raises(ValueError, match=r"Expected `name` to be a non-empty str"):
        sampan.record("", 1)


def test_record_inside_a_real_kernel_is_collected(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import sampan\nsampan.record('test_acc', 0.5 + 0.25)\n"
                                          "sampan.record('curve', [1, 2, 3])")]
    with_kernel_restarts(lambda: NotebookClient(nb, kernel_name="python3", timeout=120).execute())
    path = tmp_path / "out.ipynb"
    nbformat.write(nb, path)
    assert collect_records(path) == {"test_acc": 0.75, "curve": [1, 2, 3]}
    raw = json.loads(path.read_text())
    outputs = raw["cells"][0]["outputs"]
    assert outputs[0]["data"][RECORD_MIME] == {"name": "test_acc", "value": 0.75}
    assert "[sampan.record] test_acc = 0.75" in outputs[0]["data"]["text/plain"]
