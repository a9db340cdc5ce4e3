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
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sampan._version import __version__
from sampan.errors import CheckpointError
from sampan.utils.io import atomic_path

FORMAT = "sampan.checkpoint"
SUFFIX = ".pt"
ORPHAN_AGE = 60.0  # seconds without a write after which a checkpoint's temporary file is an orphan


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
    """Puts the generators back. The states are host tensors, wherever the checkpoint was loaded to (a
    ``map_location`` of the GPU moves them there)."""
    random.setstate(_as_tuple(state["python"]))
    n = state["numpy"]
    np.random.set_state(("MT19937", n["keys"].cpu().numpy().astype(np.uint32), n["pos"], n["has_gauss"],
                         n["cached"]))
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def _as_tuple(value: Any) -> Any:
    return tuple(_as_tuple(v) for v in value) if isinstance(value, (list, tuple)) else value


def save_checkpoint(path: str | os.PathLike, payload: dict) -> Path:
    """Writes ``payload`` to a temporary file beside ``path``, then renames it over ``path``."""
    target = checkpoint_file(path)
    payload = {"format": FORMAT, "sampan_version": __version__, "torch_version": str(torch.__version__), **payload}
    with atomic_path(target) as tmp:
        torch.save(payload, tmp)
    remove_orphans(target.parent)
    return target


def load_checkpoint(path: str | os.PathLike, map_location: Any = "cpu") -> dict:
    """Reads a checkpoint with ``torch.load(weights_only=True)``; bad files raise :class:`CheckpointError`.

    Example:
        >>> payload = load_checkpoint("checkpoints/final")  # doctest: +SKIP
        >>> payload["epoch"]  # doctest: +SKIP
        5
    """
    target = checkpoint_file(path)
    if not target.is_file():
        near = sorted(p.name for p in target.parent.glob("*.pt")) if target.parent.is_dir() else []
        hint = f" Checkpoints in {target.parent}: {near}." if near else ""
        raise CheckpointError(
            f"Expected `path` to name a checkpoint file. Received: path={str(path)!r}, but {target} does not "
            f"exist.{hint} HINT: pass the path given to model.save() (the .pt suffix is optional).",
            path=str(target),
        )
    payload = _torch_load(target, map_location)
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(
            f"{target} is not a Sampan training checkpoint (no '{FORMAT}' marker). HINT: for a bare "
            f"state_dict use network.load_state_dict(torch.load(path, weights_only=True)).",
            path=str(target),
        )
    if not isinstance(payload.get("model"), dict):
        raise CheckpointError(
            f"The checkpoint {target} has no `model` entry (the network's weights); its entries are "
            f"{sorted(map(str, payload))}. HINT: it was not written by model.save(), or was edited; use a "
            f"checkpoint written by model.save().", path=str(target))
    return payload


def read_state_dict(path: str | os.PathLike) -> dict:
    """The network weights in ``path``: a Sampan checkpoint's ``model`` entry, or a bare ``state_dict``.

    Reads with ``torch.load(weights_only=True)`` on the CPU; anything else raises :class:`CheckpointError`
    with a hint (never the advice to load unsafely).

    Example:
        >>> network.load_state_dict(read_state_dict("checkpoints/final.pt"))  # doctest: +SKIP
    """
    target = Path(path)
    if not target.is_file():
        raise CheckpointError(
            f"Expected `path` to name a checkpoint file. Received: path={str(path)!r}, which does not exist. "
            f"HINT: pass the path written by model.save() or torch.save(network.state_dict(), path).",
            path=str(target))
    payload = _torch_load(target, "cpu")
    if isinstance(payload, dict) and payload.get("format") == FORMAT:
        return load_checkpoint(target)["model"]
    if isinstance(payload, dict) and payload and all(isinstance(v, torch.Tensor) for v in payload.values()):
        return payload
    kind = f"a dict with entries {sorted(map(str, payload))[:10]}" if isinstance(payload, dict) else type(payload).__name__
    raise CheckpointError(
        f"{target} holds neither a Sampan checkpoint nor a state_dict (it holds {kind}). HINT: pass a file "
        f"written by model.save() or torch.save(network.state_dict(), path).", path=str(target))


def _torch_load(target: Path, map_location: Any) -> Any:
    try:
        return torch.load(target, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        if "Unsupported global" not in str(exc):
            raise _corrupt(target, exc) from exc
        raise CheckpointError(
            f"The checkpoint {target} holds Python objects that safe loading (weights_only=True) refuses "
            f"({_torch_reason(exc)}). HINT: save only tensors, numbers, strings and containers of them; "
            f"Sampan never loads checkpoints unsafely.", path=str(target)) from exc
    except Exception as exc:  # noqa: BLE001 - any file torch cannot read is reported the same way
        raise _corrupt(target, exc) from exc


def _torch_reason(exc: Exception) -> str:
    """torch's own reason, without its advice to load with ``weights_only=False`` (Sampan never does)."""
    text = str(exc)
    if "WeightsUnpickler error:" in text:
        text = text.split("WeightsUnpickler error:", 1)[1]
    lines = [line.strip() for line in text.splitlines()
             if line.strip() and "weights_only" not in line and "arbitrary code" not in line]
    return f"{type(exc).__name__}: {lines[0][:200] if lines else ''}".rstrip(": ")


def _looks_like_torch_save(target: Path) -> bool:
    """A zip archive's start (torch.save's format), or an empty file (a write cut short)."""
    try:
        with open(target, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return False
    return head in (b"", b"PK\x03\x04")


def _corrupt(target: Path, exc: Exception) -> CheckpointError:
    if not _looks_like_torch_save(target):
        return CheckpointError(
            f"{target} is not a checkpoint: torch.load cannot read it ({_torch_reason(exc)}). HINT: pass a file "
            f"written by model.save() or torch.save(); move other files out of the checkpoint folder.",
            path=str(target))
    return CheckpointError(
        f"The checkpoint {target} is corrupt or truncated and cannot be read ({_torch_reason(exc)}). "
        f"HINT: it was probably cut short by a crash or a full disk; use an earlier checkpoint from the same "
        f"folder or retrain.", path=str(target))


def load_weights(network: torch.nn.Module, state: dict, *, path: str, skip_mismatch: bool = False,
                 check_only: bool = False) -> list[str]:
    """Loads ``state`` into ``network``; mismatches raise with the key lists, or are skipped and returned.

    With ``check_only`` nothing is loaded: only the mismatch check runs.
    """
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
    if check_only:
        return missing + unexpected + sorted(bad)
    network.load_state_dict({k: v for k, v in state.items() if k in own and k not in bad}, strict=False)
    return missing + unexpected + sorted(bad)


def latest_checkpoint(save_dir: str | os.PathLike) -> Path | None:
    """The most recently written checkpoint in ``save_dir`` (``None`` when there is none)."""
    found = _candidates(Path(save_dir))
    return found[0] if found else None


def _candidates(folder: Path) -> list[Path]:
    """``*.pt`` files in ``folder``, newest first (``final.pt`` first among equals)."""
    found = [p for p in folder.glob("*.pt") if not p.name.startswith(".")] if folder.is_dir() else []
    return sorted(found, key=lambda p: (p.stat().st_mtime_ns, p.name == "final.pt"), reverse=True)


def latest_intact(save_dir: str | os.PathLike, map_location: Any = "cpu") -> tuple[Path, dict] | None:
    """The newest checkpoint in ``save_dir`` that loads, with its payload (``resume="auto"``).

    Unreadable files (truncated by a crash, or not checkpoints at all) are skipped with one
    warning that names them and the checkpoint used; orphan temporary files of killed writes
    are removed first.

    Example:
        >>> found = latest_intact("checkpoints")  # doctest: +SKIP
        >>> found[0].name if found else None  # doctest: +SKIP
        '3.pt'
    """
    folder = Path(save_dir)
    remove_orphans(folder)
    skipped: list[str] = []
    for path in _candidates(folder):
        try:
            payload = load_checkpoint(path, map_location=map_location)
        except CheckpointError as exc:
            skipped.append(f"{path.name} ({str(exc).split(' HINT:')[0]})")
            continue
        if skipped:
            warnings.warn(f"resume='auto' skipped {len(skipped)} unreadable file(s) in {folder}: "
                          f"{'; '.join(skipped)}. Resuming from {path.name} (epoch {payload.get('epoch', 0)}), "
                          f"the newest intact checkpoint.", RuntimeWarning, stacklevel=3)
        return path, payload
    if skipped:
        raise CheckpointError(
            f"resume='auto' found no readable checkpoint in {folder}: {'; '.join(skipped)}. HINT: remove or "
            f"move these files, or pass resume=None to start from scratch.", path=str(folder))
    return None


def remove_orphans(folder: str | os.PathLike, *, min_age: float = ORPHAN_AGE) -> list[Path]:
    """Deletes temporary files (``.NAME.pt.XXXX.tmp``) left by writes that were killed; returns them.

    Only files untouched for ``min_age`` seconds go, so a write in progress is never disturbed.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    now, removed = time.time(), []
    for tmp in folder.glob(".*.pt.*.tmp"):
        try:
            if now - tmp.stat().st_mtime >= min_age:
                tmp.unlink()
                removed.append(tmp)
        except FileNotFoundError:  # another process cleaned it first
            continue
    return removed
