import threading
import time

import ipywidgets as W
import pytest

from sampan.callbacks import Callback
from sampan.monitor import MemoryLeakWarning, _readers
from sampan_widgets import ResourceMonitor


def _leak(window):
    return {"window": window, "warmup": 3, "min_growth": 2 * 2**20}


def _sampler_threads():
    return [t for t in threading.enumerate() if t.name == "sampan-resource-sampler"]


def _wait(pred, timeout=3.0):
    deadline = time.time() + timeout
    while not pred() and time.time() < deadline:
        time.sleep(0.02)
    return pred()


def test_updates_come_from_the_sampler_thread_by_setting_traits(recorder):
    monitor = ResourceMonitor(interval=0.05)

    def updates():  # traitlets sends a message only when the value changes
        return [m for m in recorder.messages if m["comm_id"] == monitor._status.model_id
                and m["data"].get("method") == "update"]

    with monitor:
        assert _wait(lambda: len(updates()) >= 4)
    assert not monitor.running and not _sampler_threads()
    updates = updates()
    # the first sample is taken by start() itself; every later one by the sampler thread
    assert len(updates) >= 4 and {m["thread"] for m in updates[1:]} == {"sampan-resource-sampler"}
    values = [m["data"]["state"]["value"] for m in updates]
    assert len(set(values)) == len(values)  # the time stamp changes: values change over time
    assert "process RSS" in values[-1]
    assert not any(isinstance(w, W.Output) for w in monitor._panel.children)


def test_closing_the_widget_stops_the_thread(recorder):
    monitor = ResourceMonitor(interval=0.02).start()
    assert monitor.running and _sampler_threads()
    monitor.widget.close()
    assert not monitor.running and not _sampler_threads()
    n = len(monitor.samples)
    time.sleep(0.1)
    assert len(monitor.samples) == n


def test_no_gpu_is_said_once(recorder, monkeypatch):
    import pynvml

    monkeypatch.setattr(pynvml, "nvmlInit", lambda: (_ for _ in ()).throw(pynvml.NVMLError(9)))
    monkeypatch.setattr(_readers.torch.cuda, "is_available", lambda: False)
    monitor = ResourceMonitor(interval=0.02)
    with monitor:
        assert _wait(lambda: monitor.updates >= 3)
    html = monitor._status.value
    assert html.count("No NVIDIA GPU found") == 1 and "GPU 0" not in html and "system memory" in html


def test_fit_callback_form_and_leak_warning_in_the_view(recorder, tmp_path, model_and_data, leaky_callback):
    model, data = model_and_data(n=640)
    monitor = ResourceMonitor(interval=0.1, leak_options=_leak(15), probe_interval=0)
    with pytest.warns(MemoryLeakWarning):
        model.fit(data, batch_size=8, epochs=1, verbose=0, callbacks=[leaky_callback(), monitor])
    assert not monitor.running
    assert monitor.leak_warning and "grew by" in monitor.leak_warning
    assert "⚠" in monitor._status.value
    df = monitor.to_dataframe()
    assert len(df) >= 2 and df["step"].dropna().max() == 80
    monitor.to_csv(tmp_path / "r.csv")
    assert (tmp_path / "r.csv").read_text().startswith("time,step,rss")


def test_no_leak_no_warning(recorder, model_and_data):
    import warnings

    model, data = model_and_data(n=320)
    monitor = ResourceMonitor(interval=0.1, leak_options=_leak(10), probe_interval=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MemoryLeakWarning)
        model.fit(data, batch_size=8, epochs=1, verbose=0, callbacks=[monitor])
    assert monitor.leak_warning is None and "⚠" not in monitor._status.value


class _Interrupt(Callback):
    def on_train_batch_end(self, step, logs=None):
        if step == 3:
            raise KeyboardInterrupt


def test_views_survive_a_kernel_interrupt_and_stop_when_closed(recorder, model_and_data):
    from sampan_widgets import LiveCurves

    model, data = model_and_data(n=160)
    live, monitor = LiveCurves(), ResourceMonitor(interval=0.02)
    with pytest.raises(KeyboardInterrupt):
        model.fit(data, batch_size=16, epochs=1, verbose=0, callbacks=[live, monitor, _Interrupt()])
    assert monitor.running  # still showing memory after the interrupt
    before = monitor.updates
    assert _wait(lambda: monitor.updates > before + 2)
    live.redraw()
    assert "step <b>4</b>" in live._status.value
    model.fit(data, batch_size=16, epochs=2, verbose=0, callbacks=[live, monitor])  # the next fit ends it
    assert not monitor.running and not _sampler_threads()
    live.close()
    monitor.close()
    assert live._panel.comm is None and monitor._status.comm is None


def test_is_a_callback_and_displayable(recorder):
    from sampan.callbacks import Callback as Base

    monitor = ResourceMonitor(interval=0.5)
    assert isinstance(monitor, Base) and not monitor.running  # nothing runs until started or fit begins
    bundle = monitor._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == monitor.widget.model_id


def test_chart_keeps_only_the_window_without_copying_the_history(recorder, monkeypatch):
    monitor = ResourceMonitor(interval=1.0, window=120.0, gpu=False)
    monkeypatch.setattr(type(monitor.sampler), "samples", property(lambda s: pytest.fail("history copied")))
    for t in range(301):  # five minutes of samples, one a second
        monitor._on_sample({"time": float(t), "step": t, "rss": 2**20 * (100 + t)})
    assert [s["time"] for s in monitor._recent] == [float(t) for t in range(180, 301)]
    chart = recorder.updates(monitor._chart.model_id)[-1]["value"]
    assert ">180<" in chart and ">300<" in chart  # the x axis spans the window only
    monitor._on_sample({"time": 0.5, "step": 0, "rss": 2**20})  # a new clock: the window starts again
    assert [s["time"] for s in monitor._recent] == [0.5]


@pytest.mark.parametrize("window", [0, -5, float("nan"), "60", None])
def test_a_window_that_is_not_positive_is_refused_when_made(window, recorder):
    before = len(_sampler_threads())
    with pytest.raises(ValueError, match=r"Expected `window` to be a number of seconds greater than 0\. "
                                         r"Received: window=.*HINT: pass window=120"):
        ResourceMonitor(window=window)
    assert len(_sampler_threads()) == before  # refused before any sampler started
