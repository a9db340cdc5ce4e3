"""What one sample reads: GPUs through nvidia-ml-py (pynvml), this process's ``torch.cuda`` allocator, the host
through psutil. Each reader degrades to an empty reading instead of raising, so a sampler thread never spams."""
from __future__ import annotations

import logging
from typing import Any

import torch

from sampan.utils.host import host_figures

_log = logging.getLogger("sampan.monitor")
_MiB = 1024 * 1024
# what a driver without nvmlDeviceGetMemoryInfo_v2 answers to it
_OLD_DRIVER = ("NVML_ERROR_FUNCTION_NOT_FOUND", "NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_ARGUMENT_VERSION_MISMATCH")


class GpuReader:
    """Per device utilisation and memory (``nvmlDeviceGetUtilizationRates`` / ``nvmlDeviceGetMemoryInfo``) plus
    ``torch.cuda.memory_allocated`` / ``memory_reserved`` / ``max_memory_allocated`` for this process.

    ``note`` explains, once, why there is no GPU reading (logged once at INFO, never per sample).
    """

    def __init__(self, *, use_nvml: bool = True) -> None:
        self.note: str | None = None
        self._handles: list[Any] = []
        self._nvml: Any = None
        self._mem_v2: Any = None  # nvmlMemory_v2 where the driver has it (see _memory)
        if use_nvml:
            self._init_nvml()
        if not self._handles and not torch.cuda.is_available():
            self._say("No NVIDIA GPU found: showing the host only.")

    def _init_nvml(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            self._nvml = pynvml
            self._mem_v2 = getattr(pynvml, "nvmlMemory_v2", None)
        except Exception as exc:  # no driver, no library, no device: all mean "no NVML"
            self._handles = []
            if torch.cuda.is_available():
                self._say(f"nvidia-ml-py could not read the GPUs ({type(exc).__name__}: {exc}); "
                          "showing torch.cuda figures only. HINT: pip install nvidia-ml-py")

    def _say(self, text: str) -> None:
        if self.note is None:
            self.note = text
            _log.info(text)

    @property
    def has_gpu(self) -> bool:
        return bool(self._handles) or torch.cuda.is_available()

    def read(self) -> list[dict]:
        """One dict per GPU: ``index, name, util, mem_used, mem_total`` (NVML) and ``allocated, reserved, peak``
        (this process, torch.cuda), in bytes and percent."""
        devices: list[dict] = []
        for i, handle in enumerate(self._handles):
            try:
                util = self._nvml.nvmlDeviceGetUtilizationRates(handle)
                mem = self._memory(handle)
                devices.append({"index": i, "util": float(util.gpu), "mem_used": int(mem.used),
                                "mem_total": int(mem.total)})
            except Exception as exc:
                self._say(f"nvidia-ml-py stopped answering ({type(exc).__name__}: {exc}).")
                devices.append({"index": i})
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            for i in range(torch.cuda.device_count()):
                while len(devices) <= i:
                    devices.append({"index": len(devices)})
                devices[i].update(allocated=int(torch.cuda.memory_allocated(i)),
                                  reserved=int(torch.cuda.memory_reserved(i)),
                                  peak=int(torch.cuda.max_memory_allocated(i)))
        return devices

    def _memory(self, handle: Any) -> Any:
        """``nvmlDeviceGetMemoryInfo``, version 2 where the driver has it: its ``used`` leaves out the memory the
        driver reserves for itself, as ``nvidia-smi`` does (version 1 counts it: about 600 MiB more on an H200).
        Drivers without version 2 fall back to version 1 once, for good."""
        nvml = self._nvml
        if self._mem_v2 is not None:
            try:
                return nvml.nvmlDeviceGetMemoryInfo(handle, version=self._mem_v2)
            except nvml.NVMLError as exc:
                if exc.value not in {getattr(nvml, name) for name in _OLD_DRIVER if hasattr(nvml, name)}:
                    raise  # the device's trouble, not the driver's age: read() notes it
                self._mem_v2 = None
        return nvml.nvmlDeviceGetMemoryInfo(handle)

    def close(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:  # already shut down by someone else
                pass
            self._nvml, self._handles = None, []


class HostReader:
    """This process's RSS, system memory and CPU percent (:func:`sampan.utils.host.host_figures`)."""

    def __init__(self) -> None:
        host_figures()  # prime: the first CPU percent always reads 0.0

    def read(self) -> dict:
        return host_figures()
