import pytest

from dist_helpers import HERE, ROOT, launch  # noqa: F401


@pytest.fixture(scope="session")
def train_script() -> str:
    return str(HERE / "_train_script.py")
