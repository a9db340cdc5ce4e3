"""Model.fit under torchrun with 2 gloo processes matches one process with the same global batch."""
import json
import sys

import pytest
import torch

from dist_helpers import HERE, launch

pytestmark = pytest.mark.distributed
sys.path.insert(0, str(HERE))
import _train_script  # noqa: E402


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory, train_script):
    out = tmp_path_factory.mktemp("ddp")
    proc, _ = launch(["--nproc_per_node", "2", train_script, str(out), "--batch", "16", "--accumulate", "2"],
                     module=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    return out, proc, ranks


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    out = tmp_path_factory.mktemp("single")
    threads = torch.get_num_threads()
    try:
        _train_script.main([str(out), "--batch", "32", "--accumulate", "2"])
    finally:
        torch.set_num_threads(threads)
    return json.loads((out / "rank0.json").read_text())


def test_two_ranks_give_the_weights_of_one_process_with_the_same_global_batch(two_ranks, one_process):
    _, _, ranks = two_ranks
    assert ranks[0]["world_size"] == 2 and one_process["world_size"] == 1
    w2, w1 = torch.tensor(ranks[0]["weights"]), torch.tensor(one_process["weights"])
    assert torch.equal(w2, torch.tensor(ranks[1]["weights"]))  # replicas stay identical
    assert torch.allclose(w2, w1, atol=2e-5), (w2 - w1).abs().max()
    assert (w1 - torch.tensor(_initial_weights())).abs().max() > 0.05  # it did train


def _initial_weights() -> list:
    return torch.cat([p.detach().flatten() for p in _train_script_model().network.parameters()]).tolist()


def _train_script_model():
    _train_script.ARGS = type("A", (), {"accumulate": 1})()
    return _train_script.make_model()


def test_metrics_and_loss_are_reduced_across_ranks(two_ranks, one_process):
    _, _, ranks = two_ranks
    assert ranks[0]["history"] == ranks[1]["history"]
    for key in ("loss", "acc"):
        assert ranks[0]["history"][key] == pytest.approx(one_process["history"][key], abs=1e-5), key


def test_accumulation_steps_skip_the_gradient_all_reduce(two_ranks):
    _, _, ranks = two_ranks
    # 128 samples per rank / batch 16 = 8 micro-batches per epoch, 2 epochs, accumulate 2 -> 8 optimizer steps
    assert ranks[0]["global_step"] == 8
    assert ranks[0]["allreduce_calls"] == 8  # one bucket per optimizer step, none on the no_sync micro-batches


def test_only_rank_zero_prints(two_ranks):
    _, proc, _ = two_ranks
    assert proc.stdout.count("Epoch 1/2") == 1 and proc.stdout.count("Epoch 2/2") == 1, proc.stdout


def test_a_checkpoint_written_by_two_ranks_resumes_in_one_process(two_ranks):
    out, _, ranks = two_ranks
    model = _train_script_model()
    model.load(out / "ckpt")
    weights = torch.cat([p.detach().flatten() for p in model.network.parameters()])
    assert torch.equal(weights, torch.tensor(ranks[0]["weights"]))
    assert model.epoch == 2 and model.global_step == 8
    history = model.fit(_train_script.digits(), batch_size=32, epochs=3, verbose=0, resume=out / "ckpt")
    losses = history.history["loss"]  # the History callback's state is resumed too
    assert model.epoch == 3 and len(losses) == 3
    assert losses[:2] == pytest.approx(ranks[0]["history"]["loss"], abs=1e-9)
    assert losses[2] < losses[1]
