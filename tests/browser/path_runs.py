"""Real learning-path runs over two planted lessons (the second fails), for the report dashboards' browser tests."""
from __future__ import annotations

from pathlib import Path

import nbformat
import yaml

# the first lesson records a metric without importing sampan in its kernel (a moment of CPU, not torch's import)
_RECORD = ("from IPython.display import display\n"
           "display({'application/vnd.sampan.record+json': {'name': 'acc', 'value': 0.93}, 'text/plain': ''},"
           " raw=True)")


def planted_course(root: Path) -> Path:
    """Two lessons with English and Chinese titles under ``root``; returns their ``path.yaml``."""
    for rel, src in [("01-beginner/warm_up.ipynb", _RECORD),
                     ("01-beginner/broken.ipynb", "x = 1\nraise ValueError('planted')")]:
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "sampan", "display_name": "Sampan (Python 3)", "language": "python"}
        nb.cells = [nbformat.v4.new_code_cell("QUICK = False", metadata={"tags": ["parameters"]}),
                    nbformat.v4.new_code_cell(src)]
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, root / rel)
    manifest = root / "path.yaml"
    manifest.write_text(yaml.safe_dump({"stages": [{"id": "beginner", "title": {"en": "Beginner", "zh": "入门"},
                                                    "lessons": [
        {"id": "warm_up", "title": {"en": "Warm up", "zh": "热身"}, "notebook": "01-beginner/warm_up.ipynb",
         "metrics": {"acc": {"quick": [0.9, 1.0]}}},
        {"id": "broken", "title": {"en": "Broken", "zh": "出错的一课"}, "notebook": "01-beginner/broken.ipynb"}]}]},
                                       allow_unicode=True), encoding="utf-8")
    return manifest


def planted_runs(root: Path, *, lang: str = "en", twice: bool = True) -> Path:
    """A real ``sampan.path.run`` of the planted course in ``lang`` (``--keep-going``: the failure is reported),
    then, with ``twice``, of its first lesson again: one or two run folders under the returned ``runs``."""
    import sampan.path

    manifest, runs = planted_course(root), root / "runs"
    sampan.path.run(quick=True, keep_going=True, manifest=manifest, output_dir=runs, progress=False, lang=lang)
    if twice:
        sampan.path.run(lesson="warm_up", quick=True, manifest=manifest, output_dir=runs, progress=False, lang=lang)
    return runs
