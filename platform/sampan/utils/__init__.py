"""Small helpers shared across Sampan: seeding, determinism, records, atomic files, optional imports."""
from sampan.utils.seed import enable_determinism, seed_everything
from sampan.utils.record import record

__all__ = ["enable_determinism", "record", "seed_everything"]
