"""``sampan export CHECKPOINT --format pt2|aoti|onnx --input-spec NAME:DTYPE:SHAPE``.

CHECKPOINT is a Sampan training checkpoint (``model.save``) or a bare ``state_dict``
file, with ``--network module:factory`` to build the network; or an exported
``.pt2`` (``sampan.jit.save``), converted to another format with its saved specs.
"""
from __future__ import annotations

import importlib
import os
import re
import sys
from pathlib import Path

_SPEC_HELP = ("NAME:DTYPE:SHAPE, e.g. image:float32:None,1,28,28 (None, -1 or ? for a dynamic dim); "
              "repeat for several inputs")


def add_parser(sub) -> None:
    p = sub.add_parser("export", help="export a checkpoint to pt2, aoti or onnx",
                       description=__doc__.split("\n\n")[1] if __doc__ else None)
    p.add_argument("checkpoint", help="training checkpoint (.pt), state_dict file, or exported .pt2")
    p.add_argument("--format", choices=["pt2", "aoti", "onnx"], default="pt2", help="what to write (default pt2)")
    p.add_argument("--input-spec", action="append", default=[], metavar="SPEC", help=_SPEC_HELP)
    p.add_argument("--network", metavar="MODULE:FACTORY",
                   help="builds the network, e.g. sampan.vision.models:LeNet (not needed for a .pt2); "
                        "IMPORTS AND RUNS that Python module: name only code you trust (see docs/SECURITY.md)")
    p.add_argument("--output", metavar="PREFIX", help="output prefix (default: the checkpoint path without suffix)")
    p.add_argument("--output-name", action="append", default=None, metavar="NAME", help="output name(s)")
    p.add_argument("--no-verify", action="store_true", help="skip the comparison with eager")


def parse_input_spec(text: str):
    """``image:float32:None,1,28,28`` (brackets optional) -> ``InputSpec``."""
    from sampan.errors import bad_argument
    from sampan.spec import InputSpec

    parts = text.split(":")
    if len(parts) != 3:
        raise ValueError(bad_argument("--input-spec", text, "NAME:DTYPE:SHAPE", "write image:float32:None,1,28,28"))
    name, dtype, shape_text = parts
    dims = []
    for item in filter(None, re.split(r"[,\s\[\]()x]+", shape_text)):
        if item.lower() in ("none", "-1", "?"):
            dims.append(None)
        elif item.isdigit():
            dims.append(int(item))
        else:
            raise ValueError(bad_argument("--input-spec", text, "a shape of ints and None",
                                          "write image:float32:None,1,28,28"))
    return InputSpec(dims, dtype, name or None)


def _build_network(factory: str | None, checkpoint: Path):
    import torch

    from sampan.errors import bad_argument

    if not factory or ":" not in factory:
        raise ValueError(bad_argument("--network", factory, "MODULE:FACTORY that builds the network",
                                      "write --network sampan.vision.models:LeNet"))
    network = _load_factory(factory)()
    state = _read_state(checkpoint, torch)
    _check_fits(network, state, factory, checkpoint)
    network.load_state_dict(state)
    return network.eval()


def _check_fits(network, state: dict, factory: str, checkpoint: Path) -> None:
    """Refuses a checkpoint whose weights do not fit what ``--network`` builds, listing the keys (no traceback)."""
    from sampan.errors import CheckpointError
    from sampan.hapi.checkpoint import load_weights

    try:
        load_weights(network, state, path=str(checkpoint), check_only=True)
    except CheckpointError as exc:
        details = str(exc).split("\nHINT:", 1)[0]
        raise CheckpointError(
            f"{details}\nThe network built by --network {factory} ({type(network).__name__}) does not fit it. "
            f"HINT: pass the --network MODULE:FACTORY that built the network this checkpoint was saved from "
            f"(with the same sizes, e.g. num_classes).", path=str(checkpoint), missing=exc.missing,
            unexpected=exc.unexpected, mismatched=exc.mismatched) from None


def _load_factory(factory: str):
    """The callable named by ``MODULE:FACTORY``; a missing module or name is refused naming it."""
    from sampan.errors import bad_argument

    module_name, attr = factory.split(":", 1)
    form = "MODULE:FACTORY, an importable module and a callable in it that builds the network"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        itself = exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + "."))
        why = (f"there is no module named {exc.name!r}" if itself
               else f"importing {module_name!r} needs {exc.name!r}, which is not installed")
        raise ValueError(bad_argument(
            "--network", factory, form, f"{why}; check the spelling, install the package that provides it, or run "
            "from the folder that holds the module, e.g. --network sampan.vision.models:LeNet")) from None
    built = getattr(module, attr, None)
    if not callable(built):
        public = sorted(n for n, v in vars(module).items()
                        if not n.startswith("_") and callable(v) and getattr(v, "__module__", "") == module_name)[:12]
        raise ValueError(bad_argument(
            "--network", factory, form, f"module {module_name!r} has no callable {attr!r}; "
            f"it has {', '.join(public) or 'none'}; e.g. --network sampan.vision.models:LeNet"))
    return built


def _check_file(checkpoint: Path) -> None:
    if not checkpoint.is_file():
        what = "a folder, not a file" if checkpoint.is_dir() else "a path that does not exist"
        raise FileNotFoundError(f"Expected CHECKPOINT to be a file. Received: {str(checkpoint)!r}, {what}. "
                                "HINT: pass the path written by model.save() or torch.save(state_dict).")


def _read_state(checkpoint: Path, torch) -> dict:
    _check_file(checkpoint)
    from sampan.hapi.checkpoint import read_state_dict

    return read_state_dict(checkpoint)  # weights_only=True; its errors never advise loading unsafely


def _from_pt2(path: Path, specs):
    from sampan.jit import _artifacts as art
    from sampan.jit import _safety
    from sampan.jit._specs import example_shapes, file_samples

    prefix = art.prefix_of(path)
    meta = art.read_metadata(prefix)
    file = art.check_artifact(prefix, meta, "pt2")
    specs = specs or meta["_specs"]
    # traced again at the sizes it was exported with (a network may need more than the default 8); the meta file's
    # sizes are refused, naming the input, before a sample too large is allocated
    fix = ("pass --input-spec NAME:DTYPE:SHAPE for each input with its real shape, its variable dimensions None "
           "(e.g. --input-spec x:float32:None,4), or ask whoever sent the model to export it again")
    examples = file_samples(specs, batch=2, seed=0, like=example_shapes(meta, specs), source=art.meta_path(prefix),
                            fix=fix)
    return _safety.load_pt2(file), specs, meta["outputs"], examples


def export_checkpoint(args) -> Path:
    from sampan.jit import _artifacts as art

    checkpoint = Path(args.checkpoint)
    specs = [parse_input_spec(s) for s in args.input_spec]
    names = args.output_name
    examples = None
    if checkpoint.name.endswith(".pt2"):
        network, specs, saved_names, examples = _from_pt2(checkpoint, specs)
        names = names or saved_names
        default_prefix = Path(str(art.prefix_of(checkpoint)))
    else:
        _check_file(checkpoint)  # before the other arguments: a missing file is the first thing to fix
        if not specs:  # a checkpoint holds weights, not the shapes of the network's inputs
            from sampan.errors import bad_argument

            raise ValueError(bad_argument(
                "--input-spec", None, "given once per input of the network when CHECKPOINT is not an exported "
                ".pt2 (a checkpoint holds weights, not input shapes)",
                "add --input-spec NAME:DTYPE:SHAPE, e.g. --input-spec image:float32:None,1,28,28"))
        network = _build_network(args.network, checkpoint)
        default_prefix = checkpoint.with_suffix("")
    if args.output and os.path.basename(args.output) in ("", ".", ".."):  # Path() would drop the trailing "/"
        from sampan.errors import bad_argument

        raise ValueError(bad_argument("--output", args.output, "a file prefix, not a folder",
                                      f"name the files inside it, e.g. --output {os.path.join(args.output, 'model')}"))
    prefix = Path(args.output) if args.output else default_prefix
    verify = not args.no_verify
    if args.format == "onnx":
        from sampan.onnx import export

        return export(network, prefix, input_spec=specs, output_names=names, verify=verify, examples=examples)
    from sampan.jit import save

    return save(network, prefix, input_spec=specs, format=args.format, output_names=names, verify=verify,
                examples=examples)


def run(args) -> int:
    from sampan.errors import SampanError

    try:
        written = export_checkpoint(args)
    except (ValueError, TypeError, FileNotFoundError, SampanError) as exc:
        print(f"sampan export: {exc}", file=sys.stderr)
        return 1
    from sampan.jit import _artifacts as art

    print(f"wrote {written} and {art.meta_path(art.prefix_of(written))}")
    return 0
