"""A learner's mistakes with quantization, pruning, profiling, monitoring, AMP and distributed arguments:
each gets an error naming the argument (not a bare TypeError / AssertionError from deep inside torch)."""
import re

import pytest
import torch
from torch import nn

from sampan import amp, pruning, quantization
from sampan.monitor import LeakDetector, MonitorCallback
from sampan.profiler import Profiler


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 2)).eval()


def _conv():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2)).eval()


@pytest.fixture(scope="module")
def observed():
    ptq = quantization.PTQ()
    return ptq, ptq.quantize(_conv(), torch.randn(2, 1, 8, 8))


# ---------------------------------------------------------------- quantization
def test_quantize_dynamic_of_a_model_without_linear_layers_says_so_instead_of_returning_it_unchanged():
    with pytest.raises(ValueError, match=r"Expected `model` to be .*Linear.*HINT: .*PTQ"):
        quantization.quantize_dynamic(nn.Sequential(nn.Conv2d(1, 2, 3)))


def test_quantize_dynamic_of_a_quantized_model_says_it_is_quantized_already():
    q = quantization.quantize_dynamic(_mlp())
    with pytest.raises(ValueError, match=r"Expected `model` to be .*quantized already"):
        quantization.quantize_dynamic(q)


def test_quantize_dynamic_layer_types_one_class_names_the_argument():
    with pytest.raises(TypeError, match=r"Expected `layer_types` to be .*layer_types=\(Linear,\)"):
        quantization.quantize_dynamic(_mlp(), layer_types=nn.Linear)


def test_one_skip_name_as_a_string_is_one_name_not_its_letters():
    net = nn.Sequential()
    net.add_module("fc1", nn.Linear(4, 4))
    net.add_module("fc3", nn.Linear(4, 2))
    q = quantization.quantize_dynamic(net, skip="fc3")
    assert type(q.fc3) is nn.Linear and type(q.fc1) is quantization.Int8Linear
    assert quantization.QuantConfig(skip="fc3").skip == ("fc3",)
    assert quantization.QuantConfig(skip=None).skip == ()


def test_quant_config_calibration_batches_true_names_the_argument():
    with pytest.raises(ValueError, match=r"Expected `calibration_batches` to be .*Received: calibration_batches=True"):
        quantization.QuantConfig(calibration_batches=True)


def test_qat_quantize_of_a_class_names_model():
    with pytest.raises(TypeError, match=r"Expected `model` to be a torch.nn.Module"):
        quantization.QAT().quantize(nn.Linear, torch.randn(2, 8))


@pytest.mark.parametrize("batch", [torch.randn(4, 3, 8, 8), torch.randn(4, 1, 10, 10), torch.randn(1, 8, 8)])
def test_calibration_batch_of_the_wrong_shape_names_data_and_both_shapes(observed, batch):
    ptq, obs = observed
    with pytest.raises(ValueError, match=r"Expected `data` to be batches of shape \[\('N', 1, 8, 8\)\].*"
                                         rf"Received: data='<a batch of shape {re.escape(str(tuple(batch.shape)))}"):
        ptq.calibrate(obs, [batch])


@pytest.mark.parametrize("data, what", [
    (None, "data=None"), (torch.randn(4, 1, 8, 8), "a tensor of shape"),
    (torch.utils.data.TensorDataset(torch.randn(4, 1, 8, 8), torch.zeros(4)), "TensorDataset"),
    ([{"x": torch.randn(4, 1, 8, 8)}], "a batch of type dict"),
])
def test_calibration_data_that_is_not_batches_names_data(observed, data, what):
    ptq, obs = observed
    with pytest.raises(TypeError, match=rf"Expected `data` to be .*{what}.*HINT: pass"):
        ptq.calibrate(obs, data)


@pytest.mark.parametrize("batches", [0, -1, "2"])
def test_calibrate_batches_out_of_range_names_batches_instead_of_being_ignored(observed, batches):
    ptq, obs = observed
    with pytest.raises(ValueError, match=r"Expected `batches` to be an int >= 1"):
        ptq.calibrate(obs, [torch.randn(4, 1, 8, 8)], batches=batches)


def test_calibrate_a_float_model_names_observed_instead_of_doing_nothing():
    with pytest.raises(TypeError, match=r"Expected `observed` to be the model returned by quantize\(\)"):
        quantization.PTQ().calibrate(_conv(), [torch.randn(4, 1, 8, 8)])


def test_quant_sensitivity_static_calibration_of_the_wrong_shape_names_calib_data():
    net = _mlp()
    with pytest.raises(ValueError, match=r"Expected `calib_data` to be batches of shape \[\('N', 8\)\]"):
        quantization.sensitivity(net, lambda m: 1.0, method="static", calib_data=[torch.randn(4, 3)],
                                 example_inputs=torch.randn(2, 8))


def test_quant_sensitivity_of_a_model_without_quantizable_layers_names_model():
    with pytest.raises(ValueError, match=r"Expected `model` to be a model with layers to quantize"):
        quantization.sensitivity(nn.Sequential(nn.Conv2d(1, 2, 3)), lambda m: 1.0)


# ---------------------------------------------------------------- eval_fn (pruning and quantization)
@pytest.mark.parametrize("result, shown", [(None, "None"), ({"acc": 0.9}, "{'acc': 0.9}"),
                                           (torch.ones(4, 2), "'<a tensor of shape (4, 2)>'"), ("0.9", "'0.9'")])
def test_eval_fn_returning_something_else_than_one_number_names_eval_fn(result, shown):
    x = torch.randn(4, 8)
    with pytest.raises(TypeError, match=rf"Expected `eval_fn\(model\)` to be one number.*Received: "
                                        rf"eval_fn\(model\)={re.escape(shown)}"):
        pruning.sensitivity(_mlp(), lambda m: result, ratios=(0.5,), example_inputs=x)
    with pytest.raises(TypeError, match=r"Expected `eval_fn\(model\)` to be one number"):
        quantization.sensitivity(_mlp(), lambda m: result)


def test_eval_fn_not_callable_or_nan_baseline_names_eval_fn():
    x = torch.randn(4, 8)
    with pytest.raises(TypeError, match=r"Expected `eval_fn` to be a function"):
        pruning.sensitivity(_mlp(), 0.9, ratios=(0.5,), example_inputs=x)
    with pytest.raises(ValueError, match=r"Expected `eval_fn\(model\)` to be a finite number"):
        pruning.sensitivity(_mlp(), lambda m: float("nan"), ratios=(0.5,), example_inputs=x)


def test_eval_fn_one_element_tensor_still_works():
    x = torch.randn(4, 8)
    table = pruning.sensitivity(_mlp(), lambda m: m(x).sum().detach(), ratios=(0.5,), example_inputs=x)
    assert isinstance(table.baseline, float) and len(table) > 0


# ---------------------------------------------------------------- pruning
def test_sensitivity_ratios_one_float_names_ratios():
    with pytest.raises(TypeError, match=r"Expected `ratios` to be a sequence.*ratios=\(0.5,\)"):
        pruning.sensitivity(_mlp(), lambda m: 1.0, ratios=0.5, example_inputs=torch.randn(4, 8))


@pytest.mark.parametrize("target", [1.5, 0, 50])
def test_prune_to_flops_target_outside_zero_one_names_target_ratio(target):
    x = torch.randn(4, 8)
    table = pruning.sensitivity(_mlp(), lambda m: 1.0, ratios=(0.5,), example_inputs=x)
    with pytest.raises(ValueError, match=rf"Expected `target_ratio` to be .*Received: target_ratio={target}"):
        pruning.prune_to_flops(_mlp(), target, table, example_inputs=x)


def test_structured_pruning_with_example_inputs_the_model_cannot_take_names_example_inputs():
    with pytest.raises(ValueError, match=r"Expected `example_inputs` to be inputs the model runs on .*mat1 and mat2"):
        pruning.prune(_mlp(), 0.5, structured=True, example_inputs=torch.randn(4, 3))


# ---------------------------------------------------------------- profiler
def _profiled():
    prof = Profiler(scheduler=(1, 3))
    with prof:
        for _ in range(4):
            _ = torch.randn(8, 8) @ torch.randn(8, 8)
            prof.step()
    return prof


def test_profiler_export_to_a_folder_names_path_and_writes_nothing(tmp_path):
    with pytest.raises(ValueError, match=r"Expected `path` to be a file name, not a folder.*trace.json"):
        _profiled().export(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_profiler_export_format_other_than_json_names_format(tmp_path):
    with pytest.raises(ValueError, match=r"Expected `format` to be \"json\".*Received: format='csv'"):
        _profiled().export(tmp_path / "t.csv", format="csv")
    assert not (tmp_path / "t.csv").exists()


def test_profiler_on_trace_ready_not_callable_names_it():
    with pytest.raises(TypeError, match=r"Expected `on_trace_ready` to be a function"):
        Profiler(on_trace_ready="trace.json")


# ---------------------------------------------------------------- monitor
@pytest.mark.parametrize("options, name", [({"windw": 10}, "leak_options"), ({"name": "x"}, "leak_options"),
                                           ({"window": 2}, "window"), ({"tolerance": "0.1"}, "tolerance"),
                                           ({"warmup": -1}, "warmup"), ({"min_growth": "4MB"}, "min_growth")])
def test_monitor_leak_options_are_checked_when_the_callback_is_made_not_inside_fit(options, name):
    with pytest.raises(ValueError, match=rf"Expected `{name}` to be"):
        MonitorCallback(leak_options=options)


def test_monitor_leak_options_not_a_dict_and_probe_interval_text_name_the_argument():
    with pytest.raises(TypeError, match=r"Expected `leak_options` to be a dict"):
        MonitorCallback(leak_options=[1])
    with pytest.raises(ValueError, match=r"Expected `probe_interval` to be"):
        MonitorCallback(probe_interval="0.1")
    assert LeakDetector(window=5, warmup=0, min_growth=10).window == 5


# ---------------------------------------------------------------- amp
@pytest.mark.parametrize("kwargs", [{"incr_ratio": 0.5}, {"decr_ratio": 2}, {"init_loss_scaling": 0},
                                    {"init_scale": -1}, {"incr_every_n_steps": 0}, {"init_loss_scaling": "1024"},
                                    {"growth_factor": 1.0}, {"device": "gpu"}])
def test_grad_scaler_settings_out_of_range_name_the_argument(kwargs):
    (name, value), = kwargs.items()
    kwargs.setdefault("device", "cpu")
    with pytest.raises(ValueError, match=rf"Expected `{name}` to be .*Received: {name}="):
        amp.GradScaler(**kwargs)


# ---------------------------------------------------------------- distributed (arguments only)
@pytest.mark.parametrize("backend", ["ncl", "cpu:gloo,cuda:ncl", 3])
def test_init_parallel_env_backend_typo_names_backend(backend):
    import sampan.distributed as dist
    with pytest.raises(ValueError, match=r"Expected `backend` to be one of"):
        dist.init_parallel_env(backend=backend)


@pytest.mark.parametrize("args", [5, "ab"])
def test_spawn_args_not_a_tuple_names_args(args):
    import sampan.distributed as dist
    with pytest.raises(TypeError, match=r"Expected `args` to be a tuple"):
        dist.spawn(print, args=args, nprocs=1)


@pytest.mark.parametrize("count", ["flops", "count_params"])
def test_counting_a_layer_class_asks_for_an_instance(count):
    from sampan.utils import flops as counting

    args = (torch.randn(1, 4),) if count == "flops" else ()
    with pytest.raises(TypeError, match=r"`model`.*create the network first: Linear\(\.\.\.\)"):
        getattr(counting, count)(torch.nn.Linear, *args)
