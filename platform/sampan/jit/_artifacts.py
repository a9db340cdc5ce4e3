"""Exported-model files on disk: names, the metadata file, checksums and version checks.

One *prefix* (``out/lenet``) groups every artifact of one model:

=================  ==========================================
``lenet.pt2``      ``torch.export`` program (``format="pt2"``)
``lenet.aoti.pt2`` AOTInductor package (``format="aoti"``)
``lenet.onnx``     ONNX model (``sampan.onnx.export``)
``lenet.meta.json`` input specs, output names, versions, checksums
=================  ==========================================
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import stat
from pathlib import Path
from typing import Any, Literal

import torch

from sampan._version import __version__
from sampan.errors import CheckpointError, UnsafeFileError, bad_argument
from sampan.spec import InputSpec
from sampan.utils.io import atomic_write_json

Format = Literal["pt2", "aoti", "onnx"]
FORMAT_VERSION = 1
SUFFIXES = {"aoti": ".aoti.pt2", "pt2": ".pt2", "onnx": ".onnx"}
META_SUFFIX = ".meta.json"


class MissingModelError(CheckpointError, FileNotFoundError):
    """An exported model file or its metadata is not where it was asked for."""


def prefix_of(path: str | os.PathLike) -> Path:
    """``out/lenet``, ``out/lenet.pt2``, ``out/lenet.aoti.pt2``, ``out/lenet.onnx`` -> ``out/lenet``.

    A path that names a folder (``out/``, ``out/.``) is refused: the files would go beside the folder, named after
    it (``out.pt2``), and could replace another model's."""
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if os.path.basename(text) in ("", ".", ".."):  # "out/", "out/.", ".."
        inside = Path(text) / "model"
        raise ValueError(bad_argument("path", text, "a file prefix, not a folder",
                                      f"name the files inside it, e.g. {os.fspath(inside)!r} "
                                      f"(writes or reads model.pt2 and model.meta.json there)"))
    for suffix in (META_SUFFIX, *SUFFIXES.values()):
        if text.endswith(suffix):
            return Path(text[: -len(suffix)])
    return Path(text)


def artifact_path(prefix: str | os.PathLike, fmt: Format) -> Path:
    if fmt not in SUFFIXES:
        raise ValueError(bad_argument("format", fmt, f"one of {sorted(SUFFIXES)}"))
    return Path(f"{os.fspath(prefix)}{SUFFIXES[fmt]}")


def meta_path(prefix: str | os.PathLike) -> Path:
    return Path(f"{os.fspath(prefix)}{META_SUFFIX}")


def sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _torch_minor(version: str) -> str:
    return ".".join(version.split("+")[0].split(".")[:2])


def weights_digest(layer: torch.nn.Module) -> str:
    """sha256 of the layer's state (names, shapes, values): tells apart artifacts of different weights."""
    digest = hashlib.sha256()
    for name, tensor in layer.state_dict().items():
        digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}".encode())
        digest.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def record_artifact(prefix: Path, fmt: Format, *, specs: list[InputSpec], output_names: list[str],
                    device: str, check: dict[str, Any], weights: str,
                    example_shapes: list[list[int]] | None = None) -> Path:
    """Adds (or replaces) one artifact in ``prefix.meta.json``; other formats stay when the specs agree.

    ``example_shapes``: the shapes of the inputs the artifact was traced with; the predictor and later checks
    build their samples at these sizes (a network may need more than the default 8 along a dynamic dimension).
    None keeps those recorded by an earlier artifact of the same model."""
    path = meta_path(prefix)
    inputs = [s.to_dict() for s in specs]
    meta: dict[str, Any] = {}
    if path.exists() or path.is_symlink():
        try:  # a link or a device where the meta file goes is never read: the new file replaces it
            check_in_folder(path, prefix, entry=path.name)
            meta = json.loads(read_meta_bytes(path).decode("utf-8"))
        except (OSError, ValueError):  # UnsafeFileError is a ValueError
            meta = {}
    if meta.get("inputs") != inputs or meta.get("outputs") != output_names or meta.get("torch") != torch.__version__ \
            or meta.get("weights") != weights:
        meta = {}  # a different model or torch: older artifacts no longer belong to this prefix
    artifacts = meta.get("artifacts", {})
    previous_shapes = meta.get("example_shapes")
    file = artifact_path(prefix, fmt)
    artifacts[fmt] = {"file": file.name, "sha256": sha256(file), "bytes": file.stat().st_size,
                      "device": device, "check": check}
    meta = {
        "format_version": FORMAT_VERSION,
        "sampan": __version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "inputs": inputs,
        "outputs": list(output_names),
        "weights": weights,
        "artifacts": artifacts,
    }
    shapes = example_shapes if example_shapes is not None else previous_shapes
    if shapes is not None:
        meta["example_shapes"] = [[int(d) for d in shape] for shape in shapes]
    return atomic_write_json(path, meta)


MAX_META_BYTES = 16 << 20  # a meta file holds a few KiB (a quantized model's layout record included)


def check_in_folder(file: Path, prefix: Path, *, entry: str) -> None:
    """Refuses ``file`` unless it is a regular file inside the folder of ``prefix``, followed through links.

    A model folder from someone else may hold links (git and tar keep them) and, from a tar, pipes and device
    files. Its meta file or model file as a link to ``/dev/zero`` or ``/dev/urandom`` would be read for ever (the
    meta file into memory until the machine runs out), a pipe would block the opening for ever, and a link to a
    file elsewhere would make Sampan read outside the folder it was given. Links that stay inside the folder
    (``mlp.pt2 -> v2/mlp.pt2``) and a folder reached through a link (``out -> /data/out``) are fine."""
    folder = prefix.parent.resolve()
    target = file.resolve()
    fix = ("HINT: ask for the model's files themselves (plain files, not links), all in one folder, or export "
           "the model again yourself.")
    if not target.is_relative_to(folder):
        raise UnsafeFileError(f"Refusing {os.fspath(file)!r}: it is a link to {os.fspath(target)!r}, outside the "
                              f"model's folder {os.fspath(folder)!r}. {fix}", path=os.fspath(file), entry=entry)
    try:
        mode = os.stat(target).st_mode
    except OSError as exc:
        raise MissingModelError(f"Cannot read {os.fspath(file)!r}: {exc}. HINT: export the model again.",
                                path=os.fspath(file)) from exc
    if not stat.S_ISREG(mode):
        raise UnsafeFileError(f"Refusing {os.fspath(file)!r}: it is not a regular file (a device, pipe, socket or "
                              f"folder), and reading it may never end. {fix}", path=os.fspath(file), entry=entry)


def read_meta_bytes(path: Path) -> bytes:
    """The bytes of a meta file (checked by :func:`check_in_folder`), refused above :data:`MAX_META_BYTES`: it holds
    no checksum of its own, so its size is whatever the sender made it."""
    with open(path, "rb") as fh:
        data = fh.read(MAX_META_BYTES + 1)
    if len(data) > MAX_META_BYTES:
        raise UnsafeFileError(f"Refusing the metadata file {os.fspath(path)!r}: it is larger than "
                              f"{MAX_META_BYTES >> 20} MiB, and Sampan's are a few KiB. HINT: export the model again.",
                              path=os.fspath(path), entry=path.name)
    return data


def read_metadata(prefix: Path) -> dict[str, Any]:
    """Reads and validates ``prefix.meta.json``; errors say which file and what to do."""
    path = meta_path(prefix)
    if not path.exists():
        raise MissingModelError(
            f"No exported model at {os.fspath(prefix)!r}: the metadata file {os.fspath(path)!r} does not exist. "
            "HINT: export first with sampan.jit.save(layer, path, input_spec=[...]) (or `sampan export`), "
            "and pass the same path without the suffix.", path=os.fspath(path))
    check_in_folder(path, prefix, entry=path.name)
    data = read_meta_bytes(path)  # its refusal is an UnsafeFileError (a ValueError): not "corrupt" below
    try:
        meta = json.loads(data.decode("utf-8"))
        inputs = [InputSpec.from_dict(d) for d in meta["inputs"]]
        version = int(meta["format_version"])
        artifacts = meta["artifacts"]
        if not isinstance(artifacts, dict) or not all(isinstance(e, dict) and isinstance(e.get("file"), str)
                                                      and isinstance(e.get("device", "cpu"), str)
                                                      for e in artifacts.values()):
            raise TypeError("'artifacts' must map each format to {'file': ..., 'sha256': ..., 'device': ...}")
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"The metadata file {os.fspath(path)!r} is corrupt ({exc!r}). "
                              "HINT: export the model again.", path=os.fspath(path)) from exc
    if version != FORMAT_VERSION:
        raise CheckpointError(
            f"The metadata file {os.fspath(path)!r} has format_version {version}; this Sampan ({__version__}) "
            f"reads format_version {FORMAT_VERSION}. HINT: export the model again with this Sampan.",
            path=os.fspath(path))
    meta["_specs"] = inputs
    return meta


def check_artifact(prefix: Path, meta: dict[str, Any], fmt: Format) -> Path:
    """Checks that ``fmt`` was exported, its file exists, its checksum and torch version match."""
    entry = meta["artifacts"].get(fmt)
    if entry is None:
        have = sorted(meta["artifacts"]) or ["none"]
        how = "sampan.onnx.export(...)" if fmt == "onnx" else f"sampan.jit.save(..., format={fmt!r})"
        raise MissingModelError(
            f"{os.fspath(prefix)!r} has no {fmt!r} artifact (exported: {', '.join(have)}). "
            f"HINT: export it with {how} or `sampan export --format {fmt}`.",
            path=os.fspath(prefix))
    file = prefix.parent / str(entry.get("file"))
    if entry.get("file") != artifact_path(prefix, fmt).name:
        raise UnsafeFileError(
            f"{os.fspath(meta_path(prefix))!r} names the {fmt} file {entry.get('file')!r}; the {fmt} file of "
            f"{os.fspath(prefix)!r} is {artifact_path(prefix, fmt).name!r} in the same folder. HINT: export the "
            "model again; do not edit the metadata by hand.", path=os.fspath(meta_path(prefix)), entry=fmt)
    if not file.exists():
        raise MissingModelError(f"The {fmt} model file {os.fspath(file)!r} listed in "
                                f"{os.fspath(meta_path(prefix))!r} does not exist. HINT: export the model again.",
                                path=os.fspath(file))
    check_in_folder(file, prefix, entry=fmt)
    if sha256(file) != entry["sha256"]:
        raise CheckpointError(f"The {fmt} model file {os.fspath(file)!r} is corrupt or was modified after export: "
                              "its sha256 does not match the metadata. HINT: export the model again.",
                              path=os.fspath(file))
    if fmt in ("pt2", "aoti") and _torch_minor(meta.get("torch", "")) != _torch_minor(torch.__version__):
        raise CheckpointError(
            f"{os.fspath(file)!r} was exported with torch {meta.get('torch')} but this is torch "
            f"{torch.__version__}; {fmt} files are only readable by the torch that wrote them. "
            "HINT: export again with this torch, or use the ONNX file.", path=os.fspath(file))
    _check_safe(file, fmt, entry["sha256"])
    return file


def _check_safe(file: Path, fmt: Format, digest: str) -> None:
    """Nothing in the file may run code when loaded (the checksum only proves it matches its own meta file)."""
    from sampan.jit import _safety

    if fmt == "pt2":
        _safety.check_pt2(file)
    elif fmt == "aoti":
        _safety.check_aoti(file, digest)
    else:
        _safety.check_onnx(file)
