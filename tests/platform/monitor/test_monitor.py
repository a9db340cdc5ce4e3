import csv
import gc
import logging
import threading
import time
import warnings

import pytest
import torch
from torch.utils.data import TensorDataset

import sampan
from sampan.monitor import LeakDetector, MemoryLeakWarning, MonitorCallback, ResourceSampler
from sampan.monitor import _readers


def _leak(window):
    return {"window": window, "warmup": 3, "min_growth": 2 * 2**20}


def _threads():
    return [t for t in threading.enumerate() if t.name == "sampan-resource-sampler"]


def test_sampler_samples_at_its_rate_and_stops():
    sampler = ResourceSampler(interval=0.05, gpu=False)
    with sampler:
        assert sampler.running
        time.sleep(0.5)
    assert not sampler.running and not _threads()
    n = len(sampler.samples)
    assert 5 <= n <= 13, n
    times = [s["time"] for s in sampler.samples]
    assert times == sorted(times)
    row = sampler.latest
    assert row["rss"] > 10 * 2**20 and row["sys_total"] >= row["sys_used"] > 0 and 0 <= row["cpu"] <= 100
    time.sleep(0.15)
    assert len(sampler.samples) == n  # nothing after stop


def test_forgotten_sampler_thread_ends():
    sampler = ResourceSampler(interval=0.02, gpu=False).start()
    assert _threads()
    del sampler
    gc.collect()
    deadline = time.time() + 2
    while _threads() and time.time() < deadline:
        time.sleep(0.02)
    assert not _threads()


def test_bad_interval_names_the_argument():
    with pytest.raises(ValueError, match="interval"):
        ResourceSampler(interval=0)
    with pytest.raises(ValueError, match=r"`interval` to be a number of seconds > 0. Received: interval=True"):
        ResourceSampler(interval=True)


def test_bad_max_samples_names_the_argument():
    """Audit: max_samples=-1 gave deque's "maxlen must be non-negative"."""
    for bad in (-1, 0, 2.5):
        with pytest.raises(ValueError, match=rf"`max_samples` to be an int >= 1. Received: max_samples={bad}. HINT"):
            ResourceSampler(gpu=False, max_samples=bad)
    sampler = ResourceSampler(gpu=False, max_samples=1)
    sampler.sample_now()
    sampler.sample_now()
    assert len(sampler.samples) == 1
    assert ResourceSampler(gpu=False, max_samples=None)._samples.maxlen is None  # keeps every sample


def test_listener_failure_does_not_stop_sampling(caplog):
    sampler = ResourceSampler(interval=0.02, gpu=False)
    seen = []
    sampler.add_listener(lambda row: 1 / 0)
    sampler.add_listener(seen.append)
    with caplog.at_level(logging.ERROR, logger="sampan.monitor"), sampler:
        time.sleep(0.2)
    assert len(seen) >= 3
    assert sum("listener failed" in r.message for r in caplog.records) == 1


def test_cpu_percent_read_again_at_once_repeats_the_last_reading_not_a_tick_over_a_millisecond():
    """psutil's CPU percent is "since the previous call", counted in clock ticks (10 ms): two reads a millisecond
    apart (the sampler thread, then the fit's end) showed "process 984%" on a 2-core machine, or 0%."""
    import os

    from sampan.utils.host import host_figures

    host_figures()  # a process's very first reading is always 0.0
    end = time.process_time() + 0.3
    while time.process_time() < end:  # busy: 0.3 CPU-s used, however long that takes on a loaded machine
        pass
    first = host_figures()
    again = host_figures()
    assert again["proc_cpu"] == first["proc_cpu"] and again["cpu"] == first["cpu"]
    assert 0 < first["proc_cpu"] <= 100 * os.cpu_count() and 0 <= first["cpu"] <= 100


def test_two_threads_sampling_at_once_keep_the_samples_and_the_listeners_in_time_order(monkeypatch):
    """The fit's end samples in the training thread while the sampler thread may be sampling: a sample stamped
    before a slow read and delivered after a later one made the widget's chart take it for a restarted clock
    and drop its whole history (one point left)."""
    sampler = ResourceSampler(interval=60, gpu=False)
    read, calls = sampler._host.read, []

    def slow_first_read():
        calls.append(1)
        if len(calls) == 1:
            time.sleep(0.3)  # a read held up under load
        return read()

    monkeypatch.setattr(sampler._host, "read", slow_first_read)
    seen = []
    sampler.add_listener(lambda row: seen.append(row["time"]))
    slow = threading.Thread(target=sampler.sample_now)
    slow.start()
    time.sleep(0.05)
    sampler.sample_now()  # later, and fast
    slow.join()
    times = [s["time"] for s in sampler.samples]
    assert len(times) == 2 and times == sorted(times) and seen == times


def test_no_gpu_path_says_it_once(monkeypatch, caplog):
    import pynvml

    def no_driver():
        raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    monkeypatch.setattr(pynvml, "nvmlInit", no_driver)
    monkeypatch.setattr(_readers.torch.cuda, "is_available", lambda: False)
    with caplog.at_level(logging.INFO, logger="sampan.monitor"):
        sampler = ResourceSampler(interval=0.02)
        with sampler:
            time.sleep(0.15)
    assert not sampler.has_gpu
    assert sampler.note == "No NVIDIA GPU found: showing the host only."
    assert not any(k.startswith("gpu") for s in sampler.samples for k in s)
    assert sum("No NVIDIA GPU" in r.message for r in caplog.records) == 1
    assert len(sampler.samples) >= 3


def test_gpu_fields_from_fake_nvml(monkeypatch):
    import pynvml

    class Util:
        gpu = 37

    _fake_nvml(monkeypatch, pynvml, Util)
    sampler = ResourceSampler(interval=1)
    row = sampler.sample_now()
    assert sampler.has_gpu and sampler.note is None
    # version 2 of the memory query: `used` without the driver's reserved memory, as nvidia-smi shows it
    assert row["gpu1_util"] == 37.0 and row["gpu0_mem_used"] == 3 * 2**30 and row["gpu1_mem_total"] == 16 * 2**30


def _fake_nvml(monkeypatch, pynvml, util, *, v2_errors: list | None = None) -> list:
    """Two fake GPUs; the memory query answers version 1 (used counts 600 MiB the driver reserves) and version 2
    (used without it), as drivers since 510 do, except that version 2 raises each NVML error code in ``v2_errors``
    once, in turn. Returns the versions asked for."""
    asked, errors = [], list(v2_errors or [])

    class MemV1:
        used, total = 3 * 2**30 + 600 * 2**20, 16 * 2**30

    class MemV2:
        used, total, reserved = 3 * 2**30, 16 * 2**30, 600 * 2**20

    def memory_info(handle, version=None):
        asked.append(version)
        if version is None:
            return MemV1
        if errors:
            raise pynvml.NVMLError(errors.pop(0))
        assert version == pynvml.nvmlMemory_v2
        return MemV2

    monkeypatch.setattr(pynvml, "nvmlInit", lambda: None)
    monkeypatch.setattr(pynvml, "nvmlShutdown", lambda: None)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetCount", lambda: 2)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetHandleByIndex", lambda i: i)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetUtilizationRates", lambda h: util)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetMemoryInfo", memory_info)
    return asked


def test_gpu_memory_falls_back_to_version_1_once_on_an_old_driver(monkeypatch):
    import pynvml

    class Util:
        gpu = 5

    asked = _fake_nvml(monkeypatch, pynvml, Util, v2_errors=[pynvml.NVML_ERROR_FUNCTION_NOT_FOUND])
    sampler = ResourceSampler(interval=1)
    first, second = sampler.sample_now(), sampler.sample_now()
    assert first["gpu0_mem_used"] == second["gpu1_mem_used"] == 3 * 2**30 + 600 * 2**20
    assert asked.count(pynvml.nvmlMemory_v2) == 1 and sampler.note is None  # asked once, then version 1 for good


def test_a_gpu_error_is_noted_and_does_not_give_up_version_2(monkeypatch):
    import pynvml

    class Util:
        gpu = 5

    _fake_nvml(monkeypatch, pynvml, Util, v2_errors=[pynvml.NVML_ERROR_GPU_IS_LOST])
    sampler = ResourceSampler(interval=1)
    first, second = sampler.sample_now(), sampler.sample_now()
    assert "gpu0_mem_used" not in first and "stopped answering" in sampler.note
    assert second["gpu0_mem_used"] == 3 * 2**30  # version 2 again: used without the driver's reserve


def test_export_csv_and_dataframe(tmp_path):
    sampler = ResourceSampler(interval=1, gpu=False)
    sampler.step = 3
    for _ in range(3):
        sampler.sample_now()
    path = tmp_path / "res.csv"
    sampler.to_csv(path)
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == 3 and rows[0]["step"] == "3" and int(rows[-1]["rss"]) > 0
    df = sampler.to_dataframe()
    assert list(df.columns[:3]) == ["time", "step", "rss"] and len(df) == 3


def test_leak_detector_warns_once_on_growth_not_on_flat_memory():
    flat = LeakDetector(window=10, warmup=2, min_growth=1000)
    for step in range(100):
        assert not flat.update(step, 10_000 + (step % 3) * 500)  # saw-tooth: alloc and free each step
    leaky = LeakDetector(window=10, warmup=2, min_growth=1000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fired = [leaky.update(step, 10_000 + 300 * step) for step in range(40)]
    assert sum(fired) == 1 and fired.index(True) == 2 + 10 - 1
    assert [w.category for w in caught] == [MemoryLeakWarning]
    assert "grew by" in str(caught[0].message) and "loss.item()" in str(caught[0].message)
    assert leaky.report["per_step"] == pytest.approx(300)


def test_leak_detector_rejects_small_window():
    with pytest.raises(ValueError, match="window"):
        LeakDetector(window=2)


def _model():
    torch.manual_seed(0)
    net = torch.nn.Linear(8, 2)
    model = sampan.Model(net)
    # on the CPU even where a GPU is: the leaks planted here are host memory, which the leak check watches
    # (process RSS) only for a model on the CPU; on CUDA it watches torch.cuda allocated
    model.prepare(torch.optim.SGD(net.parameters(), lr=0.1), torch.nn.CrossEntropyLoss(), device="cpu")
    return model


def test_monitor_callback_in_fit_tags_steps_and_catches_a_leak(leaky_callback):
    data = TensorDataset(torch.randn(640, 8), torch.randint(0, 2, (640,)))
    model = _model()
    cb = MonitorCallback(interval=0.05, leak_options=_leak(15), probe_interval=0)
    with pytest.warns(MemoryLeakWarning, match="process RSS grew"):
        model.fit(data, batch_size=8, epochs=1, verbose=0, callbacks=[leaky_callback(), cb])
    assert not cb.sampler.running
    assert cb.sampler.latest["step"] == 80


def test_monitor_callback_quiet_without_leak(monkeypatch):
    data = TensorDataset(torch.randn(640, 8), torch.randint(0, 2, (640,)))
    # the experiment recorder writes each fit's run from its own thread: a one-off burst of ~3 MiB that, with a
    # probe every step (0.5 ms here) and a 15-step window, lands inside the window whenever that thread runs
    # during those steps (the defaults, a probe every 0.1 s over 20 probes, span seconds); it is not this loop's
    sampan.experiments.flush(timeout=60)  # an earlier test's run, still being written
    monkeypatch.setenv("SAMPAN_TRACKING", "0")
    # a process's first fit imports and allocates for good (lazy imports): growth the detector rightly sees when
    # this test runs alone; the steady state is what must stay quiet
    _model().fit(data, batch_size=8, epochs=1, verbose=0)
    cb = MonitorCallback(interval=0.05, leak_options=_leak(15), probe_interval=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MemoryLeakWarning)
        _model().fit(data, batch_size=8, epochs=1, verbose=0, callbacks=[cb])
    assert cb.detector is not None and not cb.detector.warned and cb.detector._seen == 80


def test_leak_probe_is_throttled_by_probe_interval():
    model = _model()
    cb = MonitorCallback(ResourceSampler(interval=60, gpu=False), probe_interval=60)
    cb.set_model(model)
    cb.on_train_begin({})
    for step in range(5):
        cb.on_train_batch_end(step, {"loss": 1.0, "step": step + 1})
    cb.on_train_end({})
    assert cb.detector._seen == 1 and cb.sampler.latest["step"] == 5


def test_leak_detector_words_its_warning_in_english_and_chinese():
    leaky = LeakDetector(window=10, warmup=2, min_growth=1000, name="process RSS")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        for step in range(40):
            leaky.update(step, 10_000 + 300 * step)
    assert leaky.message == leaky.messages["en"] and leaky.messages["en"].startswith("process RSS grew by")
    assert leaky.messages["zh"].startswith("进程常驻内存（RSS） 从第 2 步到第 11 步增长了 0.0 MiB")
    assert "提示：保存 `loss.item()`" in leaky.messages["zh"]


def test_a_chinese_learner_reads_the_leak_message_in_chinese(monkeypatch):
    monkeypatch.setenv("SAMPAN_LANG", "zh")
    leaky = LeakDetector(window=10, warmup=2, min_growth=1000, name="process RSS")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(40):
            leaky.update(step, 10_000 + 300 * step)
    assert leaky.message == leaky.messages["zh"]  # what the profiling lesson prints
    assert str(caught[0].message) == leaky.messages["en"]  # the warning stays English, as every warning does
