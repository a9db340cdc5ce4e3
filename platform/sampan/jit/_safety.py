"""Inspects exported-model files before torch or ONNX Runtime opens them: nothing in them may run code.

``torch.export.load`` unpickles (``weights_only=False``) every weight or constant flagged
``use_pickle`` in the archive's payload config, legacy ``weights/<model>.pt`` files, custom objects
and sample inputs it cannot read safely; it also evaluates the program's symbolic-shape strings
with ``sympy.sympify`` (``eval``) and ``exec``-s its ``guards_code``. A ``.pt2`` from someone else
could therefore run any command. :func:`check_pt2` reads the archive with :mod:`zipfile` first and
refuses every entry that torch would unpickle or evaluate as anything but size arithmetic, naming it.

An AOTInductor package is compiled machine code: loading it *is* running it, so :func:`check_aoti`
accepts only packages that ``sampan.jit.save`` compiled for this user (their sha256 is kept in a
private file). :func:`check_onnx` refuses external-data references that point outside the model's
folder.
"""
from __future__ import annotations

import functools
import io
import json
import os
import re
import warnings
import zipfile
from pathlib import Path

from sampan.errors import UnsafeFileError

_NAME = r"[A-Za-z0-9_.-]+"
# What torch.export.save writes (archive root folder stripped); anything else is refused.
_PT2_MEMBERS = re.compile("|".join([
    r"archive_format", r"archive_version", r"byteorder", r"\.data/version", r"\.data/serialization_id",
    rf"models/{_NAME}\.json", rf"extra/{_NAME}",
    rf"data/weights/{_NAME}_weights_config\.json", r"data/weights/weight_\d+",
    rf"data/constants/{_NAME}_constants_config\.json", r"data/constants/tensor_\d+",
    rf"data/sample_inputs/{_NAME}\.pt",
]))
_CONFIGS = {"data/weights/": "weight_", "data/constants/": "tensor_"}
_REEXPORT = ("HINT: do not load this file; ask its author for a model written by sampan.jit.save "
             "(plain tensors only), or export it again yourself from the network's code and a checkpoint")


def _refuse(file: Path, entry: str, why: str) -> UnsafeFileError:
    return UnsafeFileError(f"Refusing to load {os.fspath(file)!r}: its entry {entry!r} {why}. Loading it could "
                           f"run code from whoever made the file. {_REEXPORT}.", path=os.fspath(file), entry=entry)


def check_pt2(file: str | os.PathLike) -> None:
    """Raises :class:`~sampan.errors.UnsafeFileError` unless ``file`` holds only plain tensors and JSON.

    Example:
        >>> check_pt2("out/lenet.pt2")   # doctest: +SKIP
    """
    file = Path(file)
    try:
        with zipfile.ZipFile(file) as archive:
            infos = [info for info in archive.infolist() if not info.is_dir()]
            names = [info.filename for info in infos]
            if len({n.split("/", 1)[0] for n in names}) > 1 or len(set(names)) != len(names):
                raise _refuse(file, names[-1], "repeats a name or sits in a second root folder (the copy torch "
                                               "reads might not be the one checked)")
            members = {name.split("/", 1)[-1]: name for name in names}
            for name in members:
                if not _PT2_MEMBERS.fullmatch(name):
                    raise _refuse(file, name, "is not part of a plain torch.export program (pickled data or "
                                              "compiled code)")
            for name, member in members.items():
                if name.endswith("_config.json"):
                    _check_payload_config(file, name, archive.read(member))
                elif name.startswith("data/sample_inputs/"):
                    _check_tensors_only(file, name, archive.read(member))
                elif name.startswith("models/"):
                    _check_program_text(file, name, archive.read(member))
    except (zipfile.BadZipFile, OSError) as exc:
        raise UnsafeFileError(f"{os.fspath(file)!r} is not a readable .pt2 archive ({exc}). HINT: export the "
                              "model again.", path=os.fspath(file), entry=None) from exc


def _check_payload_config(file: Path, name: str, raw: bytes) -> None:
    prefix = _CONFIGS["data/weights/" if name.startswith("data/weights/") else "data/constants/"]
    try:
        config = json.loads(raw)["config"]
        entries = config.items()
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise _refuse(file, name, f"is not a valid payload config ({exc!r})") from exc
    for key, meta in entries:
        if not isinstance(meta, dict) or meta.get("use_pickle") is not False:
            raise _refuse(file, f"{name}: {key}", "is flagged use_pickle (torch would unpickle it)")
        if not re.fullmatch(rf"{prefix}\d+", str(meta.get("path_name", ""))):
            raise _refuse(file, f"{name}: {key}", f"points to {meta.get('path_name')!r}, not a plain tensor file")


def _check_tensors_only(file: Path, name: str, raw: bytes) -> None:
    import torch

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an attacker's pickle protocol is no news for the user
            torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - whatever the safe unpickler refuses, torch would retry unsafely
        raise _refuse(file, name, "holds objects other than tensors (torch would retry with weights_only=False)") \
            from exc


# Strings in a serialized program that torch evaluates as Python: symbolic shapes (``expr_str``, read
# with ``sympy.sympify``, i.e. ``eval``) and ``guards_code`` (``exec``-ed into the module's guard
# function). Only arithmetic on sizes may pass: no attribute access but a few tensor methods, no
# private or dunder names, no calls but to sympy/torch shape functions.
_SAFE_STRING = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[-+]?[0-9.]+(e[-+]?[0-9]+)?")
_SYMBOL = re.compile(r"[a-z]+[0-9]+")  # s0, u3, zuf1: sympify makes them Symbols
_GUARD_NAMES = {"L", "math", "inf", "torch"}
_GUARD_ATTRS = {"size", "stride", "storage_offset", "dim", "isnan", "isinf", "floor", "ceil", "trunc", "inf",
                "sym_max", "sym_min", "sym_not", "sym_int", "sym_float", "sym_ite", "sym_sqrt"}


@functools.lru_cache(maxsize=None)
def _shape_names() -> frozenset[str]:
    """Names of sympy and torch shape classes (what ``expr_str`` may call); symbol names like ``s0``."""
    import sympy
    from torch.utils._sympy import functions

    names = set()
    for module in (sympy, functions):
        for name in dir(module):
            obj = getattr(module, name)
            if (isinstance(obj, type) and issubclass(obj, sympy.Basic)) or isinstance(obj, sympy.Basic):
                names.add(name)
    return frozenset(n for n in names if not n.startswith("_"))


def _unsafe_node(text: str, *, guard: bool) -> str | None:
    """Why ``text`` is not plain size arithmetic, or ``None`` when it is."""
    import ast

    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError):
        return "does not parse as an expression"
    allowed_names = _shape_names() | (_GUARD_NAMES if guard else set())
    plain = (ast.Expression, ast.Load, ast.operator, ast.unaryop, ast.cmpop, ast.boolop, ast.BinOp, ast.UnaryOp,
             ast.Compare, ast.BoolOp, ast.keyword)
    for node in ast.walk(tree):
        if isinstance(node, plain):
            if isinstance(node, ast.keyword) and (node.arg is None or node.arg.startswith("_")):
                return "passes **keywords"
            continue
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str) and not _SAFE_STRING.fullmatch(node.value):
                return f"holds the string {node.value!r}"
        elif isinstance(node, ast.Name):
            if node.id not in allowed_names and not _SYMBOL.fullmatch(node.id):
                return f"uses the name {node.id!r}"
        elif isinstance(node, ast.Call):
            func = node.func
            if not (isinstance(func, ast.Name) or (guard and isinstance(func, ast.Attribute))):
                return "calls something other than a shape function"
        elif guard and isinstance(node, ast.Attribute):
            if node.attr not in _GUARD_ATTRS:
                return f"reads the attribute {node.attr!r}"
        elif guard and isinstance(node, ast.Subscript):
            continue
        else:
            return f"contains {type(node).__name__} syntax"
    return None


def _check_program_text(file: Path, name: str, raw: bytes) -> None:
    try:
        program = json.loads(raw)
    except ValueError as exc:
        raise _refuse(file, name, f"is not valid JSON ({exc})") from exc
    for guard in program.get("guards_code") or [] if isinstance(program, dict) else []:
        problem = _unsafe_node(str(guard), guard=True)
        if problem:
            raise _refuse(file, f"{name}: guards_code", f"holds Python that {problem} ({str(guard)[:80]!r}; torch "
                                                        "would exec it)")
    todo = [program]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            text = item.get("expr_str")
            if isinstance(text, str):
                problem = _unsafe_node(text, guard=False)
                if problem:
                    raise _refuse(file, f"{name}: expr_str", f"holds a shape expression that {problem} "
                                                             f"({text[:80]!r}; torch would eval it)")
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)


def _trust_file() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    return Path(state) / "sampan" / "trusted-aoti.json"


def _trusted() -> set[str]:
    try:
        return set(json.loads(_trust_file().read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return set()


def trust_aoti(digest: str) -> None:
    """Records the sha256 of an AOTInductor package this user just compiled (a private 0600 file)."""
    from sampan.utils.io import atomic_write_text

    path = _trust_file()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write_text(path, json.dumps(sorted(_trusted() | {digest})))
    os.chmod(path, 0o600)


def check_aoti(file: str | os.PathLike, digest: str) -> None:
    """Refuses an AOTInductor package that was not compiled by ``sampan.jit.save`` for this user."""
    if digest not in _trusted():
        raise UnsafeFileError(
            f"Refusing to load the AOTInductor package {os.fspath(file)!r}: it is compiled machine code and "
            "loading it runs that code, and it was not compiled on this machine by your sampan.jit.save. "
            "HINT: use the .pt2 or .onnx file of the same model (they hold no code), or compile the package "
            "yourself: sampan.jit.save(network, path, input_spec=[...], format='aoti').",
            path=os.fspath(file), entry=os.path.basename(file))


def check_onnx(file: str | os.PathLike) -> None:
    """Refuses an ONNX model whose external-data references point outside its folder (or are links)."""
    from sampan.utils.imports import require

    onnx = require("onnx")
    from onnx.external_data_helper import _get_all_tensors, uses_external_data

    file = Path(file)
    folder = file.resolve().parent
    model = onnx.load(os.fspath(file), load_external_data=False)
    for tensor in _get_all_tensors(model):
        if not uses_external_data(tensor):
            continue
        location = next((e.value for e in tensor.external_data if e.key == "location"), "")
        target = folder / location
        if (os.path.isabs(location) or ".." in Path(location).parts or target.is_symlink()
                or not target.resolve().is_relative_to(folder)):
            raise UnsafeFileError(
                f"Refusing to load {os.fspath(file)!r}: tensor {tensor.name!r} reads its data from {location!r}, "
                "outside the model's folder. HINT: keep external data files next to the .onnx file, named "
                "relative to it.", path=os.fspath(file), entry=tensor.name)
