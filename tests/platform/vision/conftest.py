import pytest
import torch


@pytest.fixture(autouse=True)
def data_home(tmp_path, monkeypatch):
    """Every test gets its own empty data directory (the weight zoo lives there)."""
    home = tmp_path / "sampan-data"
    monkeypatch.setenv("SAMPAN_DATA", str(home))
    return home


@pytest.fixture(autouse=True)
def one_thread():
    """Small networks run several times faster on one thread of a busy 2-core machine (restored after)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
