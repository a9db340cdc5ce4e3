"""``sampan bench``: ratios measured side by side in one run.

Each suite is a module (``sampan.bench.<suite>``, or the one named in
:data:`SUITE_MODULES`) exposing ``run(quick: bool = False) -> dict`` that
measures, prints a table and returns its figures. ``sampan bench`` with no
suite runs them all.
"""
from __future__ import annotations

SUITES = {
    "fit": "hand-written loop vs Model.fit vs PyTorch Lightning; import time",
    "static": "eager vs to_static vs exported predictor vs ONNX Runtime",
    "amp": "fp32 vs bf16 (CPU) / fp16, bf16 (CUDA)",
    "ddp": "samples/s at 1 and 2 processes under torchrun",
    "compress": "fp32 vs int8 vs pruned: size, latency, accuracy",
    "widgets": "fit with and without ResourceMonitor and LiveCurves",
    "experiments": "fit with run recording on vs off; a fresh fitting process: recording in it vs through the "
                   "recording service; compare 10 of 1,000 recorded runs",
    "hub": "20 learners logging in and spawning at once on a local JupyterHub (5 with --quick)",
}

# suites that live elsewhere: the widgets benchmark sits beside the widgets, since platform/ never imports them
SUITE_MODULES = {suite: f"sampan.bench.{suite}" for suite in SUITES} | {"widgets": "sampan_widgets.bench",
                                                                       "hub": "sampan.hub.bench"}
