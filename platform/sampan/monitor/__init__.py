"""Headless resource monitoring: a sampler thread (nvidia-ml-py, ``torch.cuda``, psutil), a leak check and a
callback for ``Model.fit``. ``sampan_widgets.ResourceMonitor`` draws what these produce.

Example:
    >>> from sampan.monitor import ResourceSampler
    >>> with ResourceSampler(interval=0.5) as sampler:
    ...     pass  # train
    >>> sampler.latest["rss"] > 0
    True
"""
from sampan.monitor.callback import MonitorCallback
from sampan.monitor.leak import LeakDetector, MemoryLeakWarning
from sampan.monitor.sampler import ResourceSampler

__all__ = ["LeakDetector", "MemoryLeakWarning", "MonitorCallback", "ResourceSampler"]
