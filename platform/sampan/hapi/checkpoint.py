"""Full training checkpoints: written atomically, loaded with ``weights_only=True``, resumed exactly.

A checkpoint is one file holding the network's weights, the optimizer, the LR
scheduler, the gradient scaler, the epoch, the global step, callbacks' state
and every RNG state (Python, NumPy, torch CPU and CUDA), so that 2 epochs plus
a resume for 2 more give bitwise the weights of 4 epochs straight.
"""
from __future__ import annotations

import os
import pickle
import random
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sampan._version import __version__
from sampan.errors import CheckpointError
from sampan.utils.io import atomic_path

FORMAT = "sampan.checkpoint"
SUFFIX = ".pt"


def checkpoint_file(path: str | os.PathLike) -> Path:
    """``ckpt/final`` -> ``ckpt/final.pt``; a path with a ``.pt``/``.pth`` suffix is kept."""
    path = Path(path)
    return path if path.suffix in (".pt", ".pth") else path.with_name(path.name + SUFFIX)


def rng_state() -> dict:
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": {"keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached": float(cached)},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(_as_tuple(state["python"]))
    n = state["numpy"]
    np.random.set_state(("MT19937", n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _as_tuple(value: Any) -> Any:
    return tuple(_as_tuple(v) for v in value) if isinstance(value, (list, tuple)) else value


def save_checkpoint(path: str | os.PathLike, payload: dict) -> Path:
    """Writes ``payload`` to a temporary file beside ``path``, then renames it over ``path``."""
    target = checkpoint_file(path)
    payload = {"format": FORMAT, "sampan_version": __version__, "torch_version": str(torch.__version__), **payload}
    with atomic_path(target) as tmp:
        torch.save(payload, tmp)
    return target


def load_checkpoint(path: str | os.PathLike, map_location: Any = "cpu") -> dict:
    """Reads a checkpoint with ``torch.load(weights_only=True)``; bad files raise :class:`CheckpointError`."""
    target = checkpoint_file(path)
    if not target.is_file():
        near = sorted(p.name for p in target.parent.glob("*.pt")) if target.parent.is_dir() else []
        hint = f" Checkpoints in {target.parent}: {near}." if near else ""
        raise CheckpointError(
            f"Expected `path` to name a checkpoint file. Received: path={str(path)!r}, but {target} does not "
            f"exist.{hint} HINT: pass the path given to model.save() (the .pt suffix is optional).",
            path=str(target),
        )
    try:
        payload = torch.load(target, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        if "Weights only load failed" not in str(exc):
            raise _corrupt(target, exc) from exc
        raise CheckpointError(
            f"The checkpoint {target} holds Python objects that safe loading (weights_only=True) refuses. "
            f"HINT: save only tensors, numbers, strings and containers of them; Sampan never loads "
            f"checkpoints unsafely.", path=str(target)) from exc
    except (RuntimeError, EOFError, zipfile.BadZipFile, ValueError, OSError) as exc:
        raise _corrupt(target, exc) from exc
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(
            f"{target} is not a Sampan training checkpoint (no '{FORMAT}' marker). HINT: for a bare "
            f"state_dict use network.load_state_dict(torch.load(path, weights_only=True)).",
            path=str(target),
        )
    return payload


def _corrupt(target: Path, exc: Exception) -> CheckpointError:
    first = (str(exc).splitlines() or [""])[0][:200]
    return CheckpointError(
        f"The checkpoint {target} is corrupt or truncated and cannot be read ({type(exc).__name__}: {first}). "
        f"HINT: it was probably cut short by a crash or a full disk; use an earlier checkpoint from the same "
        f"folder or retrain.", path=str(target))


def load_weights(network: torch.nn.Module, state: dict, *, path: str, skip_mismatch: bool = False) -> list[str]:
    """Loads ``state`` into ``network``; mismatches raise with the key lists, or are skipped and returned."""
    own = network.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    mismatched = [(k, tuple(state[k].shape), tuple(own[k].shape)) for k in own
                  if k in state and hasattr(state[k], "shape") and tuple(state[k].shape) != tuple(own[k].shape)]
    if (missing or unexpected or mismatched) and not skip_mismatch:
        lines = [f"The checkpoint {path} belongs to another network:"]
        if missing:
            lines.append(f"  missing in the checkpoint ({len(missing)}): {missing[:10]}")
        if unexpected:
            lines.append(f"  not in this network ({len(unexpected)}): {unexpected[:10]}")
        for name, saved, mine in mismatched[:10]:
            lines.append(f"  shape of {name}: checkpoint {list(saved)} vs network {list(mine)}")
        lines.append("HINT: load it into the network it was saved from, or pass skip_mismatch=True "
                     "to load only the matching parameters.")
        raise CheckpointError("\n".join(lines), path=path, missing=missing, unexpected=unexpected,
                              mismatched=mismatched)
    bad = {name for name, *_ in mismatched}
    network.load_state_dict({k: v for k, v in state.items() if k in own and k not in bad}, strict=False)
    return missing + unexpected + sorted(bad)


def latest_checkpoint(save_dir: str | os.PathLike) -> Path | None:
    """The most recently written checkpoint in ``save_dir`` (``None`` when there is none)."""
    folder = Path(save_dir)
    found = [p for p in folder.glob("*.pt") if not p.name.startswith(".")] if folder.is_dir() else []
    return max(found, key=lambda p: (p.stat().st_mtime_ns, p.name == "final.pt")) if found else None
