"""Source rules the widgets keep: no ``Output`` widgets (so no ``with out:`` from a thread), no pyplot."""
import ast
from pathlib import Path

import sampan_widgets

SOURCES = sorted(Path(sampan_widgets.__file__).parent.glob("*.py"))


def _names(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            yield node.attr
        elif isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            yield from (a.name for a in node.names)
            if isinstance(node, ast.ImportFrom) and node.module:
                yield node.module


def test_widgets_use_no_output_widget_no_clear_output_no_pyplot():
    assert len(SOURCES) >= 8
    for path in SOURCES:
        names = set(_names(ast.parse(path.read_text())))
        assert not names & {"Output", "clear_output", "matplotlib.pyplot", "pyplot"}, path.name
