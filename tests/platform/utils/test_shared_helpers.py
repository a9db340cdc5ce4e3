"""One home per helper: the first line of an error, mode switching, parameter and FLOP counting."""
import pytest
import torch

import sampan
from sampan.errors import first_line
from sampan.utils.modes import eval_mode, train_mode


def test_first_line_skips_blank_lines_and_names_the_class_of_an_empty_message():
    assert first_line(RuntimeError("\n  shapes differ  \nat layer 3")) == "shapes differ"
    assert first_line(IndexError()) == "IndexError"
    assert first_line(ValueError("   \n ")) == "ValueError"


def test_eval_and_train_mode_restore_the_previous_mode_even_on_error():
    net = torch.nn.Sequential(torch.nn.Dropout(), torch.nn.Linear(2, 2))
    with pytest.raises(ZeroDivisionError):
        with eval_mode(net):
            assert not net.training and not net[0].training
            1 / 0
    assert net.training and net[0].training
    net.eval()
    with train_mode(net):
        assert net.training
    assert not net.training
    with train_mode(net, False):
        assert not net.training


def test_summary_and_pruning_count_a_quantized_model_alike():
    from sampan.pruning import count_params, flops
    from sampan.quantization import quantize_dynamic

    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
    q = quantize_dynamic(net)
    assert any(b.dtype == torch.int8 for b in q.buffers())  # the weights became int8 buffers
    info = sampan.summary(q, (1, 16), print_table=False)
    assert info["total_params"] == count_params(q) == count_params(net) == 16 * 32 + 32 + 32 * 2 + 2
    assert info["flops"] == flops(q, torch.randn(1, 16)) == flops(net, torch.randn(1, 16))


def test_read_json_dict_tolerates_what_an_atomic_rewrite_replaces(tmp_path):
    from sampan.utils.io import atomic_write_json, read_json_dict

    f = tmp_path / "state.json"
    assert read_json_dict(f) == {}  # missing
    f.write_bytes(b"\xff\xfe not json")
    assert read_json_dict(f) == {}  # garbage
    f.write_text("[1, 2]")
    assert read_json_dict(f) == {}  # not an object
    atomic_write_json(f, {"lessons": {"a": {"status": "done"}}, "other": 3})
    assert read_json_dict(f, "lessons") == {"a": {"status": "done"}}
    assert read_json_dict(f, "other") == {}  # an entry that is not an object
