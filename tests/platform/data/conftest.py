import pytest


@pytest.fixture(autouse=True)
def data_home(tmp_path, monkeypatch):
    """Every test gets its own empty data directory."""
    home = tmp_path / "sampan-data"
    monkeypatch.setenv("SAMPAN_DATA", str(home))
    return home
