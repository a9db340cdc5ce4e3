import sys
from types import SimpleNamespace

import matplotlib
import pytest

from sampan.callbacks import Callback
from sampan_widgets import LiveCurves
from sampan_widgets import live_curves as lc_module


class FakeClock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_redraws_are_throttled_whatever_the_step_rate(recorder, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(lc_module, "time", SimpleNamespace(monotonic=clock, process_time=clock, thread_time=clock))
    live = LiveCurves(max_fps=4)
    live.on_train_begin({})
    for step in range(1280):  # 128 steps a second for 10 s
        live.on_train_batch_end(step, {"loss": 1.0 / (step + 1), "batch_size": 8, "step": step + 1})
        clock.t += 1 / 128
    assert live.redraws == 40  # one every 0.25 s
    charts = recorder.updates(live._charts.model_id)
    assert len(charts) == live.redraws
    assert "<svg" in charts[-1]["value"] and "polyline" in charts[-1]["value"]


def test_updates_in_place_without_new_widgets_or_clear_output(recorder, model_and_data):
    model, data = model_and_data()
    live = LiveCurves(max_fps=1000)
    opened_before = len(recorder.opened())
    model.fit(data, data, batch_size=32, epochs=2, verbose=0, log_freq=2, callbacks=[live])
    assert len(recorder.opened()) == opened_before  # the same widgets, updated
    assert all(m["msg_type"] in ("comm_msg", "comm_open") for m in recorder.messages)
    assert not any("clear_output" in str(m["data"]) or "Output" in str(m["data"].get("state", {}).get("_model_name", ""))
                   for m in recorder.messages)
    status = recorder.updates(live._status.model_id)[-1]["value"]
    assert "epoch <b>2/2</b>" in status and "step <b>16</b>" in status and "eval_loss" in status


def test_curves_per_step_and_epoch_train_and_eval(model_and_data):
    model, data = model_and_data()
    live = LiveCurves()
    model.fit(data, data, batch_size=32, epochs=3, verbose=0, log_freq=4, callbacks=[live])
    assert [s for s, _ in live.steps["loss"]] == list(range(1, 25))
    assert [s for s, _ in live.steps["acc"]] == [4, 8, 12, 16, 20, 24]  # metrics every log_freq steps
    assert [s for s, _ in live.epochs["loss"]] == [8, 16, 24]
    assert len(live.epochs["eval_loss"]) == len(live.epochs["eval_acc"]) == 3
    assert "lr" not in live.steps and "batch_size" not in live.steps
    panels = dict(live._panels())
    assert list(panels) == ["loss", "acc"]
    assert [s["label"] for s in panels["loss"]] == ["train (step)", "train (epoch)", "eval"]


def test_metrics_filter_and_bad_fps():
    live = LiveCurves(metrics=[])
    live.on_train_batch_end(0, {"loss": 1.0, "acc": 0.5, "step": 1})
    live.redraw()
    assert list(live.steps) == ["loss"]
    with pytest.raises(ValueError, match="max_fps"):
        LiveCurves(max_fps=0)


def test_final_picture_leaks_no_pyplot_figure(model_and_data):
    model, data = model_and_data(n=64)
    pyplot = sys.modules.get("matplotlib.pyplot")
    before = set(pyplot.get_fignums()) if pyplot else set()  # figures other tests left open are not ours
    live = LiveCurves()
    model.fit(data, data, batch_size=32, epochs=2, verbose=0, callbacks=[live])
    png = live.to_png()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    if "matplotlib.pyplot" in sys.modules:
        assert set(sys.modules["matplotlib.pyplot"].get_fignums()) == before
    assert matplotlib.get_backend()  # untouched, no pyplot backend switch needed
    assert live.final_png is None  # not in a kernel: nothing displayed


def test_is_displayable_as_a_widget(recorder):
    live = LiveCurves()
    bundle = live._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == live._panel.model_id
    assert live.widget is live._panel and live._embedded


def test_slow_redraws_are_spaced_to_keep_within_budget(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(lc_module, "time", SimpleNamespace(monotonic=clock, process_time=clock, thread_time=clock))
    slow_svg = lc_module.svg_lines

    def svg_taking_10ms(*args, **kwargs):
        clock.t += 0.005  # two panels: 10 ms a redraw
        return slow_svg(*args, **kwargs)

    monkeypatch.setattr(lc_module, "svg_lines", svg_taking_10ms)
    live = LiveCurves(max_fps=4, budget=0.01, max_interval=5)  # 10 ms a redraw, 1% of the time: one a second
    for step in range(1000):
        live.on_train_batch_end(step, {"loss": 1.0, "acc": 0.5, "step": step + 1})
        clock.t += 0.01
    assert 9 <= live.redraws <= 11  # ~10 s of training


def test_redraws_never_stop_for_longer_than_max_interval(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(lc_module, "time", SimpleNamespace(monotonic=clock, process_time=clock, thread_time=clock))
    real_svg = lc_module.svg_lines

    def svg_taking_50ms(*args, **kwargs):
        clock.t += 0.05
        return real_svg(*args, **kwargs)

    monkeypatch.setattr(lc_module, "svg_lines", svg_taking_50ms)
    live = LiveCurves(budget=0.004, max_interval=2.0)  # 50 ms / 0.4% would be 12.5 s
    for step in range(1000):
        live.on_train_batch_end(step, {"loss": 1.0, "step": step + 1})
        clock.t += 0.01
    assert 5 <= live.redraws <= 7


class StepClock(Callback):
    """Moves the fake clock on by ``dt`` after every training step: a fit at a chosen step rate."""

    def __init__(self, clock, dt):
        super().__init__()
        self.clock, self.dt = clock, dt

    def on_train_batch_end(self, step, logs=None):
        self.clock.t += self.dt


@pytest.mark.parametrize("steps_per_s", [5, 50, 2000])
def test_redraw_rate_is_capped_in_a_real_fit_against_a_fake_clock(monkeypatch, model_and_data, steps_per_s):
    clock = FakeClock()
    monkeypatch.setattr(lc_module, "time", SimpleNamespace(monotonic=clock, process_time=clock, thread_time=clock))
    model, data = model_and_data(n=64)  # 2 steps an epoch: epoch ends come far more often than 4 a second
    live = LiveCurves(max_fps=4, budget=1.0)  # budget=1: only max_fps limits the rate
    times, redraw = [], live.redraw
    live.redraw = lambda: (times.append(clock.t), redraw())
    epochs = 60
    model.fit(data, data, batch_size=32, epochs=epochs, verbose=0, callbacks=[StepClock(clock, 1 / steps_per_s), live])
    seconds = 2 * epochs / steps_per_s
    *training, final = times
    assert all(b - a >= 0.25 for a, b in zip(training, training[1:]))  # never closer than 1 / max_fps
    dt = 1 / steps_per_s  # a redraw is due at most one step after 0.25 s have passed
    assert seconds / (0.25 + dt) - 1 <= len(training) <= 4 * seconds + 1
    assert final == clock.t and f"step <b>{2 * epochs}</b>" in live._status.value  # fit returns with the last values


@pytest.mark.parametrize("budget", [0, -0.1, 1.5, float("nan"), "0.1", True])
def test_a_budget_outside_0_to_1_is_refused_when_made_not_mid_fit(budget):
    with pytest.raises(ValueError, match=r"Expected `budget` to be a share of the CPU time greater than 0 and at "
                                         r"most 1\. Received: budget=.*HINT: pass budget=0\.002"):
        LiveCurves(budget=budget)


def test_one_metric_name_is_a_metric_not_its_letters(model_and_data):
    live = LiveCurves(metrics="acc")
    assert live.metrics == ["acc"]
    model, data = model_and_data(n=64)
    model.fit(data, data, epochs=1, batch_size=32, verbose=0, callbacks=[live])
    assert list(dict(live._panels())) == ["loss", "acc"]
    with pytest.raises(ValueError, match=r"Expected `metrics` to be a metric name or a list of names"):
        LiveCurves(metrics=[1, 2])
