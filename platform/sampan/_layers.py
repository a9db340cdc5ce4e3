"""Sampan's layers, bottom to top: a module imports only from its own layer or from a layer below.

Each name is a subpackage or top-level module of ``sampan`` (``"sampan"`` is the package's own
``__init__``, the facade that lazily exposes everything). ``tests/platform/test_layers.py`` walks every
module's imports (static, including imports inside functions) and fails on an import that runs upward,
on a subpackage missing from this table, and on an import of the notebook front end. A new subpackage
goes in the lowest layer that holds everything it imports.

Why the order: the plugin bases (``amp.precision.PrecisionPlugin``, ``distributed.base.Strategy``) sit
beside their implementations, below ``hapi``, which plugs them into the loop; ``experiments`` records
every fit, so ``hapi`` uses it and it sits below ``hapi``; the applications (command line, benchmarks,
learning path and its exercises, classroom hub, environment check) use everything.

Example:
    >>> layer_of("hapi") > layer_of("amp") > layer_of("callbacks") > layer_of("errors")
    True
"""
from __future__ import annotations

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("_layers", "_version", "errors", "spec", "utils")),
    ("building blocks", ("callbacks", "data", "jit", "metric", "monitor", "onnx", "profiler", "pruning", "text",
                         "vision")),
    ("training features", ("amp", "distributed", "experiments", "inference", "quantization")),
    ("high-level API", ("hapi",)),
    ("applications", ("__main__", "bench", "check", "cli", "hub", "path", "sampan")),
)

# The notebook front end: `platform/sampan` runs headless (under torchrun, in a job) and never imports it.
FRONT_END = ("sampan_widgets", "ipywidgets", "ipykernel", "jupyterlab", "jupyter_server", "notebook", "voila")

# Other Jupyter packages, each allowed only where a headless tool needs it.
JUPYTER_ALLOWED = {
    # kernel specs: `sampan kernel install`, the learning-path runner; utils.forkkernels' kernel provisioner
    "jupyter_client": ("cli", "path", "utils"),
    "jupyterhub": ("hub",),  # the classroom hub's spawner and service run inside JupyterHub's process
    "jupyter_core": ("hub",),  # the live dashboards' kernel manager (inside the live Voilà's process)
}
# Front-end packages that one application imports inside their own process only: the classroom hub's live
# service *is* a Voilà server (hub.live's kernel manager and policy are built on first use, inside it).
FRONT_END_ALLOWED = {"voila": ("hub",), "jupyter_server": ("hub",)}


def layer_of(name: str) -> int:
    """The layer index (0 = bottom) of a subpackage or top-level module of ``sampan``.

    Raises:
        KeyError: ``name`` is in no layer (add it to :data:`LAYERS`).
    """
    for index, (_, members) in enumerate(LAYERS):
        if name in members:
            return index
    raise KeyError(f"sampan.{name} is in no layer of sampan/_layers.py. HINT: add it to LAYERS, in the lowest "
                   f"layer that holds everything it imports.")
