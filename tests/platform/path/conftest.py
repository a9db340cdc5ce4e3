"""Tiny planted lessons and manifests in tmp dirs (the real lessons are tested in tests/notebooks/)."""
from __future__ import annotations

import textwrap
from pathlib import Path

import nbformat
import pytest
import yaml

PARAMS = "QUICK = False\nDATA_DIR = ''\nSEED = 0\n"

# Emits a sampan.record output without importing sampan (torch) in the kernel: keeps the tests fast.
# One lesson in each run uses the real sampan.record / sampan.path.mark_done.
RAW_RECORD = textwrap.dedent("""\
    from IPython.display import display
    def record(name, value):
        display({"application/vnd.sampan.record+json": {"name": name, "value": value},
                 "text/plain": f"{name} = {value}"}, raw=True)
    """)


def write_notebook(path: Path, *cells: str, params: bool = True, kernel: str = "sampan") -> Path:
    """A lesson notebook: an optional `parameters` cell, then one code cell per string."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": kernel, "display_name": "Sampan (Python 3)", "language": "python"}
    nb.cells.append(nbformat.v4.new_markdown_cell("# A planted lesson"))
    if params:
        nb.cells.append(nbformat.v4.new_code_cell(PARAMS, metadata={"tags": ["parameters"]}))
    nb.cells.extend(nbformat.v4.new_code_cell(textwrap.dedent(src)) for src in cells)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def write_manifest(root: Path, stages: list[dict], **top) -> Path:
    file = root / "path.yaml"
    file.write_text(yaml.safe_dump({"version": 1, "stages": stages, **top}, sort_keys=False), encoding="utf-8")
    return file


@pytest.fixture
def planted(tmp_path):
    """Builders bound to a tmp course folder."""
    class Planted:
        root = tmp_path / "notebooks"

        def notebook(self, rel: str, *cells: str, **kw) -> Path:
            return write_notebook(self.root / rel, *cells, **kw)

        def manifest(self, stages: list[dict], **top) -> Path:
            self.root.mkdir(parents=True, exist_ok=True)
            return write_manifest(self.root, stages, **top)

    return Planted()


GOOD = """\
import os
import sampan
import sampan.path
sampan.record("acc", 0.9)
sampan.record("quick_seen", QUICK)
sampan.record("data_dir_seen", DATA_DIR)
sampan.record("seed_seen", SEED)
sampan.record("env_data", os.environ["SAMPAN_DATA"])
sampan.record("cwd", os.getcwd())
os.makedirs(os.path.join(DATA_DIR, "zoo"), exist_ok=True)
with open(os.path.join(DATA_DIR, "zoo", "tiny_weights"), "w") as fh:
    fh.write("0.5")
print(sampan.path.mark_done("good", check=False))
"""

STAGES = [
    {"id": "beginner", "lessons": [
        {"id": "good", "notebook": "01-beginner/good.ipynb", "minutes": {"quick": 1, "full": 5},
         "metrics": {"acc": {"quick": [0.8, 1.0], "full": [0.95, 1.0]}}, "produces": ["tiny_weights"]},
        {"id": "broken", "notebook": "01-beginner/broken.ipynb", "metrics": {"acc": [0, 1]}},
    ]},
    {"id": "intermediate", "lessons": [
        {"id": "out_of_range", "notebook": "02-intermediate/out_of_range.ipynb", "metrics": {"acc": [0, 1]}},
        {"id": "after", "notebook": "02-intermediate/after.ipynb", "requires": ["good"],
         "needs": ["tiny_weights"], "metrics": {"acc": [0.4, 0.6]}},
        {"id": "slow", "notebook": "02-intermediate/slow.ipynb"},
    ]},
]


def _plant(root):
    write_notebook(root / "01-beginner/good.ipynb", GOOD)
    write_notebook(root / "01-beginner/broken.ipynb", "x = 1", "raise ValueError('planted failure')",
                   RAW_RECORD + "record('acc', 0.5)")
    write_notebook(root / "02-intermediate/out_of_range.ipynb", RAW_RECORD + "record('acc', 5.0)")
    write_notebook(root / "02-intermediate/after.ipynb",
                   RAW_RECORD + "import os\nrecord('acc', float(open(os.path.join(DATA_DIR, 'zoo', 'tiny_weights')).read()))")
    write_notebook(root / "02-intermediate/slow.ipynb", "import time\ntime.sleep(120)")
    return write_manifest(root, STAGES)


@pytest.fixture(scope="session")
def plant():
    """plant(root) writes five lessons (good, broken, out_of_range, after, slow) and path.yaml; returns it."""
    return _plant


@pytest.fixture(scope="session")
def nb():
    return write_notebook
