"""sampan.jit.explain: graph count, graph breaks with source lines, plain-language hints."""
from __future__ import annotations

import torch
from jit_helpers import DataDependent, lenet
from torch import nn

import sampan


def test_a_clean_model_is_one_graph():
    report = sampan.jit.explain(lenet(), torch.randn(2, 1, 28, 28))
    assert report.ok and report.graph_count == 1 and report.graph_break_count == 0
    assert report.op_count > 5
    assert "one static graph" in str(report)


def test_data_dependent_branch_is_reported_with_line_and_hint():
    report = sampan.jit.explain(DataDependent(), torch.randn(2, 4))
    assert not report.ok and report.graph_break_count == 1
    brk = report.breaks[0]
    assert brk.filename.endswith("jit_helpers.py") and brk.source == "if y.sum() > 0:  # data-dependent control flow"
    assert "torch.where" in brk.hint and "torch.cond" in brk.hint
    assert "jit_helpers.py" in str(report)


class _Item(nn.Module):
    def forward(self, x):
        scale = x.abs().max().item()
        return x / scale


def test_item_gets_its_own_hint():
    item = sampan.jit.explain(_Item(), torch.randn(3))
    assert item.graph_break_count >= 1 and ".item()" in item.breaks[0].hint
    assert "scale = x.abs().max().item()" in item.breaks[0].source


def test_hints_for_common_causes():
    from sampan.jit.explain import hint_for

    assert "Printing" in hint_for("Unsupported builtin print")
    assert "torch.where" in hint_for("Data-dependent branching")
    assert "NumPy" in hint_for("call to numpy.ndarray")
    assert "torch.compiler.disable" in hint_for("Attempted to call function marked as skipped")


def test_explain_a_layer_already_converted_by_to_static():
    net = sampan.jit.to_static(DataDependent(), backend="aot_eager")
    report = sampan.jit.explain(net, torch.randn(2, 4))
    assert report.graph_break_count == 1


def test_explain_a_decorated_forward_given_as_the_bound_method():
    """``explain(net.forward, x)`` with Paddle's ``@to_static`` on the class's ``forward``: the method keeps its
    instance (``to_static(net).forward`` already worked)."""
    class Decorated(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 3)

        @sampan.jit.to_static(backend="eager")
        def forward(self, x):
            return torch.tanh(self.linear(x))

    net = Decorated()
    for forward in (net.forward, sampan.jit.to_static(nn.Linear(4, 3), backend="eager").forward):
        report = sampan.jit.explain(forward, torch.randn(2, 4))
        assert report.ok and report.graph_count == 1 and report.op_count >= 1


def test_explain_without_inputs_builds_them_from_the_input_spec_or_says_what_to_pass():
    """``explain(net)`` is the natural first try: a layer converted with an ``input_spec`` is run on random inputs
    of that spec; without one the error names the missing argument and both fixes (it was dynamo's
    "forward() missing 1 required positional argument")."""
    import pytest

    net = sampan.jit.to_static(DataDependent(), input_spec=[sampan.InputSpec([None, 4])], backend="aot_eager")
    report = sampan.jit.explain(net)
    assert report.graph_break_count == 1 and "jit_helpers.py" in str(report)
    with pytest.raises(TypeError, match=r"Expected `example_inputs` to be the inputs to run DataDependent on "
                                        r"\(it has no input_spec.*HINT: pass them after the layer.*input_spec="):
        sampan.jit.explain(DataDependent())
    with pytest.raises(TypeError, match=r"the inputs to run _Item on"):
        sampan.jit.explain(sampan.jit.to_static(_Item(), backend="aot_eager"))
