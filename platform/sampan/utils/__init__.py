"""Small helpers shared across Sampan: seeding, determinism, records, atomic files, optional imports.

The seeding helpers import torch when first used, so that light modules here (``sampan.utils.notebooks``,
``sampan.utils.net``) load in processes that never need torch, such as the Voilà servers.
"""
from sampan.utils.record import record

__all__ = ["enable_determinism", "record", "seed_everything"]


def __getattr__(name: str):
    if name in ("enable_determinism", "seed_everything"):
        from sampan.utils import seed

        return getattr(seed, name)
    raise AttributeError(f"module 'sampan.utils' has no attribute {name!r}")
