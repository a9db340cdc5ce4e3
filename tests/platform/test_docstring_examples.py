"""Every docstring example (``>>>``) of ``sampan`` and ``sampan_widgets`` runs: one test per module that has one.

The docstring of a public module, class or function runs as a newcomer would copy it: in a namespace of its own,
so it imports what it uses; a private helper's (``_name``) runs in a copy of its module's globals, as
``python -m doctest`` runs it. Each runs in a scratch folder with its own data directory, on one thread, with
ELLIPSIS and NORMALIZE_WHITESPACE on. Examples that need a server,
a GPU, a network, a long run or files that do not exist carry ``# doctest: +SKIP``. Modules are found by a text
scan, so collecting imports nothing; a module whose text has ``>>>`` but no example that doctest finds fails.
Environment variables and matplotlib settings an example changes are put back afterwards.
"""
from __future__ import annotations

import doctest
import importlib
import os
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]
_PACKAGES = {"sampan": _ROOT / "platform" / "sampan", "sampan_widgets": _ROOT / "widgets" / "sampan_widgets"}
_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

def _modules_with_examples() -> list[str]:
    names = []
    for package, folder in _PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            if ">>>" not in path.read_text(encoding="utf-8"):
                continue
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            names.append(".".join((package, *parts)))
    return names


def _private(qualified: str) -> bool:
    """Whether a docstring's object (``sampan.x.Class.method``) is a private helper: some part starts with ``_``
    (``__init__`` and other dunders are public)."""
    return any(part.startswith("_") and not part.endswith("__") for part in qualified.split("."))


@pytest.fixture
def restored_settings():
    """Puts back ``os.environ`` and matplotlib's rcParams (``_i18n`` sets SAMPAN_LANG, ``use_cjk_font`` a font)."""
    import matplotlib

    environ = dict(os.environ)
    with matplotlib.rc_context():
        yield
    os.environ.clear()
    os.environ.update(environ)


@pytest.mark.parametrize("name", _modules_with_examples())
def test_docstring_examples(name, tmp_path, monkeypatch, one_thread, restored_settings):
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module(name)
    tests = [t for t in doctest.DocTestFinder().find(module) if t.examples]
    assert tests, f"{name} has '>>>' in its text but no docstring example that doctest finds"
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=_FLAGS)
    for test in tests:
        if not _private(test.name):
            test.globs = {"__name__": "__main__"}  # what a newcomer's notebook has: nothing imported yet
        runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
