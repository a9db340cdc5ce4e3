"""Fixtures for the jit tests."""
from __future__ import annotations

import pytest
from jit_helpers import IMAGE, lenet


@pytest.fixture(scope="session")
def exported_lenet(tmp_path_factory):
    """LeNet exported once as pt2 under one prefix, with its eager twin."""
    import sampan

    net = lenet()
    prefix = tmp_path_factory.mktemp("lenet") / "lenet"
    sampan.jit.save(net, prefix, input_spec=[IMAGE], output_names=["logits"])
    return net, prefix
