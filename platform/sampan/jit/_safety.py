"""Inspects exported-model files before torch or ONNX Runtime opens them: nothing in them may run code.

``torch.export.load`` unpickles (``weights_only=False``) every weight or constant flagged
``use_pickle`` in the archive's payload config, legacy ``weights/<model>.pt`` files, custom objects
and sample inputs it cannot read safely; it also evaluates the program's symbolic-shape strings
with ``sympy.sympify`` (``eval``) and ``exec``-s its ``guards_code``. A ``.pt2`` from someone else
could therefore run any command. Its graph names operators by string, and some plain ``aten`` ones
reach the file system (``aten.from_file(path, shared=True)`` maps any file for writing). :func:`check_pt2`
reads the archive first, with :mod:`zipfile` and with torch's own zip reader (refusing an archive the two read
differently), and refuses every entry that torch would unpickle or evaluate as anything but size arithmetic,
and every operator outside an allowlist, naming it. :func:`load_pt2` checks and loads the same bytes.

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
from typing import Any

from sampan.errors import UnsafeFileError, first_line

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


def check_pt2(file: str | os.PathLike, data: bytes | None = None) -> None:
    """Raises :class:`~sampan.errors.UnsafeFileError` unless ``file`` holds only plain tensors and JSON.

    ``data``: the file's bytes when already read (what :func:`load_pt2` then gives torch).

    Example:
        >>> check_pt2("out/lenet.pt2")   # doctest: +SKIP
    """
    file = Path(file)
    try:
        data = file.read_bytes() if data is None else data
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
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
            contents = {name: archive.read(member) for name, member in members.items()}
        _same_for_torch(file, data, contents)
        for name, raw in contents.items():
            if name.endswith("_config.json"):
                _check_payload_config(file, name, raw)
            elif name.startswith("data/sample_inputs/"):
                _check_tensors_only(file, name, raw)
            elif name.startswith("models/"):
                _check_program_text(file, name, raw)
    except (zipfile.BadZipFile, OSError) as exc:
        raise UnsafeFileError(f"{os.fspath(file)!r} is not a readable .pt2 archive ({exc}). HINT: export the "
                              "model again.", path=os.fspath(file), entry=None) from exc


def load_pt2(file: str | os.PathLike):
    """``torch.export.load`` of ``file`` after :func:`check_pt2`, on the very bytes that were checked (the file
    cannot change in between)."""
    import torch

    data = Path(file).read_bytes()
    check_pt2(file, data)
    return torch.export.load(io.BytesIO(data))


def _same_for_torch(file: Path, data: bytes, members: dict[str, bytes]) -> None:
    """torch reads the archive with its own zip reader (miniz), which finds the central directory where the end
    record says, while :mod:`zipfile` searches back from the end: one file can show each a different archive."""
    import torch

    try:
        reader = torch._C.PyTorchFileReader(io.BytesIO(data))
        records = reader.get_all_records()
    except RuntimeError as exc:
        raise _refuse(file, "(the archive)", f"cannot be read by torch's zip reader ({first_line(exc)})") from exc
    differ = sorted(set(records) ^ set(members)) or [n for n in records if reader.get_record(n) != members[n]]
    if differ or len(records) != len(members):
        raise _refuse(file, (differ or records)[0], "reads differently with torch's zip reader than with Python's "
                                                    "(an archive made to show the checks one content and torch "
                                                    "another)")


def _check_payload_config(file: Path, name: str, raw: bytes) -> None:
    prefix = _CONFIGS["data/weights/" if name.startswith("data/weights/") else "data/constants/"]
    try:
        config = json.loads(raw)["config"]
        entries = config.items()
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise _refuse(file, name, f"is not a valid payload config ({exc!r})") from exc
    for key, meta in entries:
        if not _DOTTED.fullmatch(str(key)):
            raise _refuse(file, f"{name}: {str(key)[:80]}", "names a weight with characters beyond a dotted name "
                                                            "(torch pastes names into code it runs)")
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
            if isinstance(node.value, str):
                if not _SAFE_STRING.fullmatch(node.value):
                    return f"holds the string {node.value!r}"
            elif not (node.value is None or isinstance(node.value, (bool, int, float))):
                return f"holds the constant {node.value!r}"  # b'"+...' would close torch's quoted message
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


# torch pastes each guard into generated code (``torch._assert(<guard>, "Guard failed: <guard>")``): only these
# characters, so that nothing the parser ignores (a comment) or a quote can change that code's shape.
_GUARD_TEXT = re.compile(r"[A-Za-z0-9_ .,()\[\]+\-*/%<>=!&|~^']*")
# Operators a graph may call (``node.target``): torch's own operator libraries and the builtins torch's verifier
# allows. An operator of another library runs code registered by whoever provides it; a plain aten one may still
# take a file name (``aten.from_file``), hence the check of string arguments below.
_OP_LIBRARIES = ("aten", "quantized_decomposed")
_HIGHER_ORDER = {"cond", "while_loop", "map_impl", "scan", "wrap_with_set_grad_enabled", "wrap_with_autocast"}
_BUILTIN_TARGETS = ({f"_operator.{n}" for n in ("getitem", "add", "mul", "sub", "truediv", "ge", "le", "gt", "lt",
                                                 "eq", "ne", "floordiv", "mod", "and_", "or_", "not_", "pow", "neg",
                                                 "abs", "lshift", "rshift")}
                    | {"math.ceil", "math.floor", "math.trunc", "builtins.round", "torch._C._set_grad_enabled",
                       "torch.autograd.grad_mode.set_grad_enabled", "torch.amp.autocast_mode._enter_autocast",
                       "torch.amp.autocast_mode._exit_autocast"}
                    | {f"torch.sym_{n}" for n in ("int", "float", "ite", "max", "min", "not", "sqrt", "sum")})
# The string arguments of aten operators that choose a mode ("tanh", "floor", "same", ...); any other (a file
# name, a message to print) refuses the operator.
_MODE_ARGUMENTS = {"UPLO", "activation", "algorithm", "approximate", "assert_msg", "driver", "equation", "indexing",
                   "interpolation", "mode", "norm", "ord", "p", "pad_mode", "padding", "padding_side", "reduce",
                   "rounding_mode", "side"}
# aten's internal operators (a leading underscore) skip the checks of the public ones (an unchecked sparse tensor
# densified writes anywhere in memory): only these few, which exports of ordinary models hold, may appear.
_INTERNAL_OPS = {"_assert_tensor_metadata", "_assert_scalar", "_assert_async", "_native_batch_norm_legit_no_training",
                 "_native_batch_norm_legit_functional", "_to_copy", "_softmax", "_log_softmax", "_unsafe_view",
                 "_adaptive_avg_pool2d", "_local_scalar_dense"}
_UNSAFE_OP_WORDS = ("sparse", "nested", "mkldnn")  # layouts whose invariants the operators trust unchecked
_REPOINTING_OPS = {"set_"}  # point a tensor at another's memory with any offset and strides
# Arguments by which a public operator skips its own checks: ``segment_reduce(..., unsafe=True)`` trusts that
# ``lengths``/``offsets`` fit the data and reads past its buffer (heap memory in the output, or a crash). An
# operator taking one is refused, and a node passing one a true value too.
_CHECK_SKIPPING_ARGUMENTS = {"unsafe"}
_SKIPS_CHECKS = "turns off its bounds checks (it may then read or write outside its tensors)"
_STRIDED = 7  # torch._export.serde.schema.Layout.Strided
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Every other string of the program (outside node metadata, which torch only stores) names a value, parameter or
# module, and torch pastes names into the Python it generates and execs (``def forward(self, <name>=...)``):
# identifiers where torch writes them as Python names, dotted names elsewhere, nothing that could close a string.
_PYTHON_NAME = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*)?")
_NAMED_TABLES = {"tensor_values", "sym_int_values", "sym_bool_values", "sym_float_values", "custom_obj_values"}
_TEXT_RULES = {"torch_version": re.compile(r"[A-Za-z0-9_.+\-]*"), "as_string": re.compile(r"[A-Za-z0-9_.,\->]*"),
               **dict.fromkeys(("name", "as_name", "forward_arg_names", "verifiers"), _PYTHON_NAME)}
_DOTTED = re.compile(r"[A-Za-z0-9_.]*")
_CHECKED_KEYS = {"expr_str", "guards_code", "target", "as_operator", "in_spec", "out_spec"}
_SPEC_TYPES = {None, "builtins.tuple", "builtins.list", "builtins.dict", "collections.OrderedDict",
               "torch.fx.immutable_collections.immutable_list", "torch.fx.immutable_collections.immutable_dict"}


@functools.lru_cache(maxsize=None)
def _unsafe_target(target: str) -> str | None:
    """Why a graph may not call ``target``, or ``None`` when it may."""
    if target in _BUILTIN_TARGETS:
        return None
    parts = target.split(".")
    if len(parts) == 4 and parts[:3] == ["torch", "ops", "higher_order"] and parts[3] in _HIGHER_ORDER:
        return None
    if len(parts) != 5 or parts[:2] != ["torch", "ops"] or parts[2] not in _OP_LIBRARIES \
            or not all(_IDENTIFIER.fullmatch(x) and not x.startswith("__") for x in parts[3:]):
        return "is not an operator of torch's own libraries"
    op = parts[3]
    if op.startswith("_") and op not in _INTERNAL_OPS:
        return "is one of aten's internal operators, which skip the checks of the public ones"
    if op in _REPOINTING_OPS:
        return "points a tensor at other memory"
    if any(word in op for word in _UNSAFE_OP_WORDS):
        return "trusts a sparse, nested or opaque layout unchecked"
    import torch

    if parts[2] == "quantized_decomposed":
        import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers the library)
    try:
        schema = getattr(getattr(getattr(torch.ops, parts[2]), parts[3]), parts[4])._schema
    except (AttributeError, RuntimeError):
        return "is not an operator this torch has"
    for argument in schema.arguments:
        if argument.name in _CHECK_SKIPPING_ARGUMENTS:
            return f"takes the argument {argument.name!r}, which {_SKIPS_CHECKS}"
        if "str" in str(argument.type) and argument.name not in _MODE_ARGUMENTS:
            return f"takes the string argument {argument.name!r} (a file name or text it acts on)"
    return None


def _unsafe_spec(text: Any) -> str | None:
    """Why a serialized pytree spec (a program's inputs and outputs) is not plain containers with plain keys:
    torch pastes its keys into the guards' generated code."""
    try:
        todo = [json.loads(text)[1]]
        while todo:
            node = todo.pop()
            if node["type"] not in _SPEC_TYPES:
                return f"has the container type {node['type']!r}"
            context = json.loads(node["context"]) if isinstance(node["context"], str) else node["context"]
            keys = context if isinstance(context, list) else [] if context is None else [context]
            if not all(isinstance(k, int) or (isinstance(k, str) and _IDENTIFIER.fullmatch(k)) for k in keys):
                return f"has the keys {keys!r}"
            todo.extend(node["children_spec"])
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        return f"does not parse ({exc!r})"
    return None


def _check_program_text(file: Path, name: str, raw: bytes) -> None:
    try:
        program = json.loads(raw)
    except ValueError as exc:
        raise _refuse(file, name, f"is not valid JSON ({exc})") from exc
    for guard in program.get("guards_code") or [] if isinstance(program, dict) else []:
        text = str(guard)
        problem = (None if _GUARD_TEXT.fullmatch(text) else "has characters beyond size arithmetic") \
            or _unsafe_node(text, guard=True)
        if problem:
            raise _refuse(file, f"{name}: guards_code", f"holds Python that {problem} ({text[:80]!r}; torch "
                                                        "would exec it)")
    todo: list[tuple[str, Any]] = [("", program)]
    while todo:
        key, item = todo.pop()
        if isinstance(item, dict):
            _check_program_dict(file, name, item)
            for sub, value in item.items():
                if sub == "metadata" or sub in _CHECKED_KEYS:  # node metadata torch only stores; checked above
                    continue
                if sub in _NAMED_TABLES and isinstance(value, dict):
                    bad = next((k for k in value if not _IDENTIFIER.fullmatch(k)), None)
                    if bad is not None:
                        raise _refuse(file, f"{name}: {sub}", f"names a value {bad[:80]!r}, not a Python name "
                                                              "(torch pastes names into code it runs)")
                todo.append((sub, value))
        elif isinstance(item, list):
            todo.extend((key, value) for value in item)
        elif isinstance(item, str) and not _TEXT_RULES.get(key, _DOTTED).fullmatch(item):
            raise _refuse(file, f"{name}: {key}", f"holds {item[:80]!r}, not a plain name (torch pastes names "
                                                  "into code it runs)")


def _check_program_dict(file: Path, name: str, item: dict) -> None:
    """The checks of one object of the program: its custom objects, layouts, shape expression, operator and
    input/output specs."""
    if "as_custom_obj" in item:
        raise _refuse(file, f"{name}: as_custom_obj", "passes a custom object (torch would build it from a class "
                                                     "the file names)")
    for key in ("layout", "as_layout"):
        if key in item and item[key] != _STRIDED:
            raise _refuse(file, f"{name}: {key} {item[key]!r}", "makes a tensor sparse or opaque (operators trust "
                                                                "such layouts unchecked)")
    text = item.get("expr_str")
    if isinstance(text, str):
        problem = _unsafe_node(text, guard=False)
        if problem:
            raise _refuse(file, f"{name}: expr_str", f"holds a shape expression that {problem} ({text[:80]!r}; "
                                                     "torch would eval it)")
    for key in ("target", "as_operator"):
        target = item.get(key)
        if (key == "as_operator" or "inputs" in item) and target is not None:
            problem = _unsafe_target(target) if isinstance(target, str) else "is not a name"
            if problem:
                raise _refuse(file, f"{name}: {key} {str(target)[:80]!r}",
                              f"names an operator that {problem}; a model from someone else may call only torch's "
                              "tensor operators and arithmetic")
    skipping = _check_skipping_argument(item)
    if skipping:
        raise _refuse(file, f"{name}: target {str(item.get('target'))[:80]!r}",
                      f"passes {skipping} to an operator, which {_SKIPS_CHECKS}")
    for key in ("in_spec", "out_spec"):
        if key in item:
            problem = _unsafe_spec(item[key])
            if problem:
                raise _refuse(file, f"{name}: {key}", f"{problem} (torch builds code from it)")


def _check_skipping_argument(item: dict) -> str | None:
    """``name=value`` of a node's argument that turns off its operator's checks, or ``None``. Anything but an
    explicit false (or none) counts as true."""
    inputs = item.get("inputs") if "target" in item else None
    for argument in inputs if isinstance(inputs, list) else []:
        if isinstance(argument, dict) and argument.get("name") in _CHECK_SKIPPING_ARGUMENTS \
                and argument.get("arg") not in ({"as_bool": False}, {"as_none": True}):
            return f"{argument['name']}={json.dumps(argument.get('arg'))[:80]}"
    return None


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
    for tensor in [*_get_all_tensors(model), *_sparse_tensors(model.graph), *(
            t for function in model.functions for t in _sparse_tensors(function))]:
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


def _sparse_tensors(graph) -> list:
    """The values and indices of every sparse tensor in an ONNX graph or function, its subgraphs included
    (``onnx.external_data_helper`` lists only dense ones)."""
    sparse = list(getattr(graph, "sparse_initializer", ()))
    found = []
    for node in graph.node:
        for attribute in node.attribute:
            sparse += [attribute.sparse_tensor] if attribute.HasField("sparse_tensor") else []
            sparse += list(attribute.sparse_tensors)
            for sub in ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs):
                found += _sparse_tensors(sub)
    return found + [t for tensor in sparse for t in (tensor.values, tensor.indices)]
