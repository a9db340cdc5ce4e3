"""The import graph of `sampan`: every import runs to the same or a lower layer (sampan/_layers.py), and
nothing under platform/ imports the notebook front end.

Imports are read statically from every module (including imports inside functions and under TYPE_CHECKING,
and `importlib.import_module("...")` with a literal name), so a lazy import cannot hide an upward edge.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import sampan
from sampan import _layers

SAMPAN = Path(sampan.__file__).parent


def _owner(path: Path, root: Path) -> str:
    """The layer member a file belongs to: its subpackage, or its own name for a top-level module."""
    parts = path.relative_to(root).parts
    if len(parts) > 1:
        return parts[0]
    return "sampan" if parts[0] == "__init__.py" else Path(parts[0]).stem


def _members(root: Path) -> set[str]:
    names = {p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    names |= {p.stem for p in root.glob("*.py") if p.name != "__init__.py"}
    return names


def _module_name(path: Path, root: Path) -> list[str]:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imports(path: Path, root: Path) -> list[tuple[str, int]]:
    """Absolute dotted names this file imports, with line numbers (relative imports resolved)."""
    found: list[tuple[str, int]] = []
    package = ["sampan", *_module_name(path, root)]
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            found += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]  # `from sampan import jit`
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.append((node.args[0].value, node.lineno))
    return found


def violations(root: Path, layers=_layers) -> list[str]:
    """Every upward import, unlisted subpackage and front-end import under ``root`` (a `sampan` source tree)."""
    members = _members(root)
    problems = [f"sampan.{m} is in no layer of sampan/_layers.py" for m in sorted(members - {"__pycache__"})
                if not any(m in names for _, names in layers.LAYERS)]
    for path in sorted(root.rglob("*.py")):
        owner = _owner(path, root)
        where = f"{path.relative_to(root.parent)}"
        for name, line in _imports(path, root):
            top = name.split(".")[0]
            if top in layers.FRONT_END:
                if owner not in layers.FRONT_END_ALLOWED.get(top, ()):
                    problems.append(f"{where}:{line} imports {name} (the notebook front end)")
            elif top.startswith("jupyter") and owner not in layers.JUPYTER_ALLOWED.get(top, ()):
                problems.append(f"{where}:{line} imports {name}, allowed only in "
                                f"{layers.JUPYTER_ALLOWED.get(top, ())} (sampan/_layers.py)")
            if top != "sampan":
                continue
            parts = name.split(".")
            target = parts[1] if len(parts) > 1 and parts[1] in members else "sampan"
            if target == owner or target not in {m for _, names in layers.LAYERS for m in names}:
                continue
            if owner in members | {"sampan"} and layers.layer_of(target) > layers.layer_of(owner):
                problems.append(f"{where}:{line} imports {name}: {owner} ({layers.LAYERS[layers.layer_of(owner)][0]})"
                                f" -> {target} ({layers.LAYERS[layers.layer_of(target)][0]}) runs upward")
    return problems


def test_every_import_runs_downward_and_nothing_imports_the_front_end():
    problems = violations(SAMPAN)
    assert not problems, "\n".join(problems)


def test_the_check_finds_an_upward_import_a_lazy_one_and_a_widget_import(tmp_path):
    root = tmp_path / "sampan"
    for package in ("errors", "hapi", "amp"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "amp" / "plugin.py").write_text("from sampan.hapi import loop\n")
    (root / "amp" / "served.py").write_text("import voila.app\n")  # a front end this layer may import (below)
    (root / "errors" / "text.py").write_text("def f():\n    import sampan_widgets\n    from sampan import amp\n")
    (root / "orphan.py").write_text("")

    class Layers:
        LAYERS = (("bottom", ("errors",)), ("middle", ("amp",)), ("top", ("hapi", "sampan")))
        FRONT_END = _layers.FRONT_END
        JUPYTER_ALLOWED = _layers.JUPYTER_ALLOWED
        FRONT_END_ALLOWED = {"voila": ("amp",)}  # errors/text.py's sampan_widgets stays refused
        layer_of = staticmethod(lambda name: next(i for i, (_, m) in enumerate(Layers.LAYERS) if name in m))

    problems = violations(root, Layers)
    assert any("amp/plugin.py:1 imports sampan.hapi" in p and "runs upward" in p for p in problems)
    assert any("errors/text.py:2 imports sampan_widgets" in p for p in problems)
    assert any("errors/text.py:3 imports sampan.amp" in p for p in problems)
    assert any("sampan.orphan is in no layer" in p for p in problems)
    assert len(problems) == 4, problems


def test_layer_of_names_the_fix_for_an_unlisted_package():
    with pytest.raises(KeyError, match=r"sampan.nowhere is in no layer.*HINT: add it to LAYERS"):
        _layers.layer_of("nowhere")


def test_importing_every_subpackage_loads_no_front_end_module():
    import subprocess
    import sys

    packages = [m for _, names in _layers.LAYERS for m in names if m not in ("sampan", "__main__")]
    code = (f"import importlib, sys\nfor m in {packages!r}: importlib.import_module('sampan.' + m)\n"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {tuple(_layers.FRONT_END)!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout
