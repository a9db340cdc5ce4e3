"""Strategies: FSDP2 on CPU/gloo matches DDP; make_strategy and the launch command line."""
import pytest
import torch

import sampan
import sampan.distributed as sd
from sampan.distributed.launch import build_torchrun_args, split_argv


def _ddp_then_fsdp():
    torch.set_num_threads(1)
    data = torch.utils.data.TensorDataset(torch.randn(64, 16, generator=torch.Generator().manual_seed(1)),
                                          torch.randint(0, 4, (64,), generator=torch.Generator().manual_seed(2)))
    results = {}
    for kind in ("ddp", "fsdp"):
        sampan.seed_everything(0)
        net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
        model = sampan.Model(net)
        model.prepare(torch.optim.SGD(net.parameters(), lr=0.1), torch.nn.CrossEntropyLoss(), device="cpu",
                      strategy=kind)
        history = model.fit(data, batch_size=8, epochs=2, verbose=0, shuffle=False)
        weight = net[0].weight
        results[kind] = {"loss": history.history["loss"], "sharded": type(weight).__name__,
                         "weight": weight.full_tensor() if hasattr(weight, "full_tensor") else weight.detach()}
    layer = torch.nn.Linear(3, 1, bias=False)
    torch.nn.init.ones_(layer.weight)
    dp = sd.DataParallel(layer)
    dp(torch.full((1, 3), float(sd.get_rank() + 1))).sum().backward()  # rank 0 sees 1s, rank 1 sees 2s
    results["dp"] = {"type": type(dp).__name__, "grad": layer.weight.grad.clone()}
    try:
        model.save("/nonexistent/never-written")
    except sampan.SampanError as exc:
        results["save_error"] = str(exc)
    return results


@pytest.mark.distributed
def test_fsdp2_on_cpu_gloo_matches_ddp_and_data_parallel_averages_gradients():
    results = sd.spawn(_ddp_then_fsdp, nprocs=2, threads=1)
    rank0 = results[0]
    assert rank0["ddp"]["sharded"] == "Parameter" and rank0["fsdp"]["sharded"] == "DTensor"
    assert rank0["fsdp"]["loss"] == pytest.approx(rank0["ddp"]["loss"], abs=1e-5)
    assert torch.allclose(rank0["fsdp"]["weight"], rank0["ddp"]["weight"], atol=1e-5)
    assert rank0["fsdp"]["loss"][1] < rank0["fsdp"]["loss"][0]
    assert "Model.save under strategy='fsdp' is not supported" in rank0["save_error"]
    assert "torch.distributed.checkpoint" in rank0["save_error"]
    assert rank0["dp"]["type"] == "DistributedDataParallel"
    for r in results:  # DataParallel averaged the gradients (1 + 2) / 2 on both ranks
        assert torch.equal(r["dp"]["grad"], torch.full((1, 3), 1.5))


def test_make_strategy_choices_and_errors():
    assert isinstance(sd.make_strategy(None), sd.DDPStrategy)
    assert isinstance(sd.make_strategy("fsdp"), sd.FSDPStrategy)
    assert sd.make_strategy({"kind": "ddp", "timeout": 5}).timeout == 5.0
    with pytest.raises(ValueError, match=r"Expected `strategy` to be None, 'ddp', 'fsdp'.*Received: strategy='tp'"):
        sd.make_strategy("tp")
    with pytest.raises(ValueError, match=r"Expected `timeout` to be a positive number of seconds"):
        sd.DDPStrategy(timeout=-1)


def test_launch_adds_standalone_only_for_a_single_node_without_rendezvous():
    args, env = build_torchrun_args(["--nproc_per_node", "2", "train.py", "--nnodes", "3"])
    assert args == ["--standalone", "--nproc_per_node", "2", "train.py", "--nnodes", "3"] and env == {}
    args, env = build_torchrun_args(["--nnodes", "2", "--node_rank", "1", "--master_addr", "10.0.0.1",
                                     "--master_port", "29500", "--timeout=30", "train.py", "-x"])
    assert "--standalone" not in args and args[-2:] == ["train.py", "-x"]
    assert env == {"SAMPAN_DIST_TIMEOUT": "30.0"} and "--timeout=30" not in args
    args, _ = build_torchrun_args(["--rdzv_endpoint", "host:1", "--nnodes", "1:2", "-m", "pkg.train"])
    assert args[0] == "--rdzv_endpoint" and args[-2:] == ["-m", "pkg.train"]
    assert split_argv(["--standalone", "--nproc-per-node=2", "s.py", "--lr", "1"]) == \
        (["--standalone", "--nproc-per-node=2"], ["s.py", "--lr", "1"])


@pytest.mark.parametrize("option", [
    ["--rdzv_endpoint", "localhost:29611"], ["--rdzv-endpoint", "localhost:29611"], ["--rdzv_endpoint=localhost:1"],
    ["--rdzv_backend", "c10d"], ["--rdzv-backend=c10d"], ["--rdzv_id", "job7"], ["--rdzv-id", "job7"],
    ["--master_port", "29612"], ["--master-port", "29612"], ["--master_port=29612"], ["--master_addr", "127.0.0.1"],
    ["--master-addr=127.0.0.1"], ["--standalone"]])
def test_launch_keeps_the_rendezvous_the_user_chose_in_every_spelling(option):
    args, _ = build_torchrun_args(["--nproc_per_node", "2", *option, "train.py"])
    assert args == ["--nproc_per_node", "2", *option, "train.py"]  # no --standalone added, nothing replaced
    args, _ = build_torchrun_args(["--nnodes", "1", "--nproc-per-node=2", *option, "train.py"])
    assert args.count("--standalone") == option.count("--standalone")


def test_sampan_launch_without_a_script_explains_usage(capsys):
    from sampan.cli import main

    assert main(["launch", "--nproc_per_node", "2"]) == 2
    assert "no script given" in capsys.readouterr().err


def test_outside_a_launcher_rank_is_zero_of_one():
    assert (sd.get_rank(), sd.get_world_size()) == (0, 1)
