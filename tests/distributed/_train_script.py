"""A tiny digits training run, used by the distributed tests (run under torchrun, or in-process).

Usage: python _train_script.py OUT_DIR [--accumulate K] [--batch B] [--epochs E] [--raise-on-rank R]
                                 [--stall-on-rank R]
Writes OUT_DIR/rank{R}.json with the history, the weights' checksum and the all-reduce count,
and a checkpoint OUT_DIR/ckpt.pt (rank 0).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch


def digits(n: int = 256):
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.data[:n], dtype=torch.float32) / 16.0
    y = torch.tensor(d.target[:n], dtype=torch.long)
    return torch.utils.data.TensorDataset(x, y)


def make_model(lr: float = 0.1):
    import sampan

    sampan.seed_everything(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    model = sampan.Model(net)
    model.prepare(torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9), torch.nn.CrossEntropyLoss(),
                  sampan.metric.Accuracy(), device="cpu", accumulate_steps=ARGS.accumulate)
    return model


def count_allreduce(model) -> list:
    calls = [0]
    ddp = model._train_net
    if not hasattr(ddp, "register_comm_hook"):
        return calls

    def hook(state, bucket):
        calls[0] += 1
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        return allreduce_hook(state, bucket)

    ddp.register_comm_hook(None, hook)
    return calls


class _Stall:
    """Sleeps at the start of step 2, before that step's gradient all-reduce (a stalled rank)."""

    def __new__(cls):
        from sampan.callbacks import Callback

        class Stall(Callback):
            def on_train_batch_begin(self, step, logs=None):
                if step == 2:
                    import time

                    time.sleep(120)

        return Stall()


def main(argv=None) -> None:
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--accumulate", type=int, default=1)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--raise-on-rank", type=int, default=-1)
    p.add_argument("--stall-on-rank", type=int, default=-1, help="this rank sleeps 120 s before step 2's all-reduce")
    ARGS = p.parse_args(argv)
    torch.set_num_threads(1)
    import sampan.distributed as sd

    model = make_model()
    calls = count_allreduce(model)
    rank = sd.get_rank()
    if rank == ARGS.raise_on_rank:
        import time

        print(f"planted at {time.time()}", file=sys.stderr, flush=True)
        raise ValueError(f"planted failure on rank {rank}")
    callbacks = [_Stall()] if rank == ARGS.stall_on_rank else []
    history = model.fit(digits(), batch_size=ARGS.batch, epochs=ARGS.epochs, shuffle=False, verbose=2,
                        callbacks=callbacks)
    model.save(Path(ARGS.out) / "ckpt")
    weights = torch.cat([p.detach().flatten() for p in model.network.parameters()])
    Path(ARGS.out, f"rank{rank}.json").write_text(json.dumps({
        "history": history.history, "weights": weights.tolist(), "allreduce_calls": calls[0],
        "world_size": sd.get_world_size(), "global_step": model.global_step}))


ARGS = None
if __name__ == "__main__":
    main(sys.argv[1:])
