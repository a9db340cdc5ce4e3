"""Under nbclient (what papermill runs), LiveCurves leaves a PNG of the final curves in the saved notebook."""
import base64

import nbformat
import pytest
from nbclient import NotebookClient

from sampan.utils.notebooks import with_kernel_restarts

SETUP = """
import torch
from torch.utils.data import TensorDataset
import sampan
from sampan_widgets import LiveCurves
torch.manual_seed(0)
net = torch.nn.Linear(4, 2)
model = sampan.Model(net)
model.prepare(torch.optim.SGD(net.parameters(), lr=0.1), torch.nn.CrossEntropyLoss())
data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
"""


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(SETUP),
                nbformat.v4.new_code_cell("live = LiveCurves()\nlive"),
                nbformat.v4.new_code_cell("model.fit(data, data, batch_size=16, epochs=2, verbose=0, callbacks=[live])\n"
                                          "silent = LiveCurves()\n"
                                          "_ = model.fit(data, batch_size=16, epochs=3, verbose=0, callbacks=[silent])\n"
                                          "import matplotlib.pyplot as plt\nprint('figures', plt.get_fignums())")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    folder = str(tmp_path_factory.mktemp("nb"))
    with_kernel_restarts(lambda: NotebookClient(nb, timeout=120, kernel_name="python3", startup_timeout=90,
                                                resources={"metadata": {"path": folder}}).execute())
    return nb


def test_displayed_live_curves_output_gets_the_final_png(executed):
    (out,) = executed.cells[1].outputs
    assert out["output_type"] == "display_data"
    assert "application/vnd.jupyter.widget-view+json" in out["data"]  # live widget for frontends
    png = base64.b64decode(out["data"]["image/png"])  # static picture for saved / papermill notebooks
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_undisplayed_live_curves_displays_its_picture_and_leaks_no_figure(executed):
    outs = executed.cells[2].outputs
    images = [o for o in outs if o["output_type"] == "display_data" and "image/png" in o["data"]]
    assert len(images) == 1 and "application/vnd.jupyter.widget-view+json" not in images[0]["data"]
    text = "".join(o.get("text", "") for o in outs if o["output_type"] == "stream")
    assert "figures []" in text
