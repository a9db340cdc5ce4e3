"""A sweep's name becomes a folder under ``$SAMPAN_DATA/sweeps/`` and a value in MLflow filters: a name that climbs
out of that folder or breaks out of a filter's quotes is refused before anything is created or recorded."""
from __future__ import annotations

import pytest

import sampan.experiments as ex
from sampan.experiments.store import quoted


def _objective(lr):
    return lr


@pytest.mark.parametrize("name", ["../../escaped'sweep", "../outside", "..", "a/b", "x' or tags.`sampan.kind` != '",
                                  "/abs/path", "", ".hidden", "a" * 101, 'two"quotes', "back\\slash"])
def test_a_sweep_name_that_escapes_its_folder_or_a_filter_is_refused(name, tmp_path, data_home, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"Expected `name` to be a study name of letters, digits.*HINT: e\.g\."):
        ex.sweep(_objective, {"lr": "0:1"}, trials=1, metric="score", name=name)
    assert not (data_home / "sweeps").exists() and not any(data_home.parent.glob("escaped*"))
    assert list(tmp_path.iterdir()) == []


def test_a_plain_name_makes_its_folder_and_finds_its_runs(data_home, monkeypatch):
    monkeypatch.setenv("SAMPAN_EXPERIMENT", "sweep-names")
    handle = ex.sweep(_objective, {"lr": "0:1"}, trials=1, metric="score", name="lr-search.2_b", wait=True)
    assert (data_home / "sweeps" / "lr-search.2_b").is_dir()
    assert len(handle.runs()) == 1


@pytest.mark.parametrize("value", ["it's", 'say "x"', "a\\' or 1=1"])
def test_a_filter_value_holding_a_quote_is_refused(value):
    with pytest.raises(ValueError, match="Expected `value` to be a string without quotes"):
        quoted(value)
