"""Notebook views for Sampan: live training curves, resource monitoring, profiling and smaller views.

Every view draws what a headless ``sampan`` callback or sampler produces; ``LiveCurves`` and
``ResourceMonitor`` are both ``fit`` callbacks and displayable widgets.

Example:
    >>> from sampan_widgets import LiveCurves, ResourceMonitor
    >>> live, monitor = LiveCurves(), ResourceMonitor(interval=0.5)
    >>> # display(live, monitor); model.fit(train, val, epochs=3, callbacks=[live, monitor])
"""
from sampan_widgets.experiment import ExperimentPanel
from sampan_widgets.experiments import RunCompare
from sampan_widgets.live_curves import LiveCurves
from sampan_widgets.profiler_view import ProfilerView
from sampan_widgets.resource_monitor import ResourceMonitor
from sampan_widgets.views import ConfusionMatrixView, DatasetBrowser, SummaryView

__all__ = [
    "ConfusionMatrixView",
    "DatasetBrowser",
    "ExperimentPanel",
    "LiveCurves",
    "ProfilerView",
    "ResourceMonitor",
    "RunCompare",
    "SummaryView",
]
