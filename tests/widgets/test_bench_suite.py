"""`sampan bench widgets`: the suite lives beside the widgets; platform/ finds it by name only."""
import pytest

import sampan.bench
from sampan.cli.bench import _suite


def test_sampan_bench_widgets_finds_the_suite_beside_the_widgets():
    mod = _suite("widgets")
    assert mod.__name__ == "sampan_widgets.bench" and callable(mod.run)
    assert _suite("fit").__name__ == "sampan.bench.fit"


def test_a_missing_suite_package_is_named_with_a_hint(monkeypatch):
    monkeypatch.setitem(sampan.bench.SUITE_MODULES, "widgets", "sampan_widgets_absent.bench")
    with pytest.raises(SystemExit, match=r"sampan bench widgets needs the `sampan_widgets_absent` package.*HINT"):
        _suite("widgets")
