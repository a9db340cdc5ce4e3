"""Checks, hints and reference solutions of the lesson distributed_training (hidden from the notebook).

``steps`` compares the learner's ``optimizer_steps`` with the optimizer steps the lesson measured on 2 real
ranks, and with a replay, for data sizes, world sizes, batches and accumulation drawn at random, of what
``DistributedSampler`` and ``Model.fit``'s loop do (padding, a last short batch, a step on the last batch).
"""
import random

from torch.utils.data.distributed import DistributedSampler

from sampan.path.exercise import Exercise, Incorrect, expect


def _replayed_steps(n_samples: int, world_size: int, per_rank_batch: int, accumulate: int) -> int:
    """Optimizer steps of rank 0 in one epoch: the sampler's share, cut in batches, a step every ``accumulate``
    micro-batches and on the last one (as ``sampan.hapi.loop.train_epoch``)."""
    share = len(DistributedSampler(range(n_samples), num_replicas=world_size, rank=0, shuffle=False))
    batches = len(range(0, share, per_rank_batch))
    return sum(1 for step in range(batches) if (step + 1) % accumulate == 0 or step + 1 == batches)


class steps(Exercise):
    hints = (
        {"en": "Follow one rank: how many samples does the DistributedSampler give it (it pads so every rank gets "
               "as many), how many micro-batches is that, and after how many micro-batches does the optimizer step?",
         "zh": "跟着一个 rank 走：DistributedSampler 分给它多少个样本（它会补齐，让每个 rank 分到一样多），这些样本是多少个"
               "微批次，优化器每隔几个微批次更新一次？"},
        {"en": "share = ceil(n / world); batches = ceil(share / batch); steps = ceil(batches / accumulate) (the last, "
               "short group steps too); samples per step = world * batch * accumulate.",
         "zh": "share = ceil(n / world)；batches = ceil(share / batch)；steps = ceil(batches / accumulate)（最后不满的"
               "一组也会更新一次）；每步样本数 = world * batch * accumulate。"},
    )
    solution = '''
import math

def optimizer_steps(n_samples, world_size, per_rank_batch, accumulate):
    share = math.ceil(n_samples / world_size)           # DistributedSampler pads to equal shares
    batches = math.ceil(share / per_rank_batch)         # the last batch may be short (drop_last=False)
    steps = math.ceil(batches / accumulate)             # the last, incomplete group still steps
    return steps, world_size * per_rank_batch * accumulate
'''

    def verify(self, optimizer_steps, measured_steps=None, n_samples=1024):
        rng = random.Random()
        cases = [(n_samples, 2, 32, 2)]
        cases += [(rng.randint(50, 5000), rng.choice((1, 2, 3, 4, 8)), rng.choice((8, 16, 32, 64)),
                   rng.choice((1, 2, 3, 4))) for _ in range(5)]
        for i, (n, world, batch, accumulate) in enumerate(cases):
            got = optimizer_steps(n, world, batch, accumulate)
            what = f"optimizer_steps({n}, {world}, {batch}, {accumulate})"
            if not isinstance(got, (tuple, list)) or len(got) != 2:
                raise Incorrect({"en": f"{what} must return two numbers (steps per rank, samples per step), got "
                                       f"{got!r}",
                                 "zh": f"{what} 必须返回两个数（每个 rank 的步数，每步的样本数），得到的是 {got!r}"})
            expected = _replayed_steps(n, world, batch, accumulate)
            if i == 0 and measured_steps is not None and measured_steps != expected:
                raise AssertionError(f"the replay says {expected} steps, the lesson measured {measured_steps}")
            expect(got[0], expected, {"en": f"{what}: optimizer steps per rank", "zh": f"{what}：每个 rank 的优化器步数"})
            expect(got[1], world * batch * accumulate, {"en": f"{what}: samples in one full optimizer step",
                                                        "zh": f"{what}：一次完整优化器步的样本数"})
