import json

import pytest
import torch
from torch.utils.data import TensorDataset

import sampan
from sampan.callbacks import Callback
from sampan.profiler import PHASES, Profiler, StepTimer, make_scheduler, profile_fit, profile_steps


def _model():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    model = sampan.Model(net)
    model.prepare(torch.optim.SGD(net.parameters(), lr=0.1), torch.nn.CrossEntropyLoss())
    return model


def _data(n=256):
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(n, 16, generator=g), torch.randint(0, 3, (n,), generator=g))


def test_profiler_records_only_the_scheduled_window():
    with Profiler(scheduler=(2, 4)) as prof:
        for i in range(6):
            torch.ones(32, 32) @ torch.ones(32, 32)
            prof.step()
    rows = prof.summary(print_table=False, row_limit=0)
    by_name = {r["name"]: r for r in rows}
    assert by_name["aten::mm"]["count"] == 2  # steps 2 and 3 only
    assert len(prof.step_times) == 6 and len(prof.memory_timeline()) == 7


def test_summary_sorts_and_limits(capsys):
    with Profiler(record_shapes=True) as prof:
        torch.randn(64, 64) @ torch.randn(64, 64)
        prof.step()
    rows = prof.summary(sorted_by="count", row_limit=3)
    assert len(rows) == 3 and rows[0]["count"] >= rows[1]["count"] >= rows[2]["count"]
    assert "| name | count |" in capsys.readouterr().out
    with pytest.raises(ValueError, match="sorted_by"):
        prof.summary(sorted_by="speed")


def test_bad_scheduler_and_targets():
    with pytest.raises(ValueError, match="scheduler"):
        Profiler(scheduler=(3, 1))
    with pytest.raises(ValueError, match="targets"):
        Profiler(targets=["tpu"])


def test_nothing_recorded_says_why():
    prof = Profiler(timer_only=True)
    with prof:
        prof.step()
    with pytest.raises(RuntimeError, match="recorded nothing"):
        prof.summary()
    with pytest.raises(RuntimeError, match="No trace"):
        prof.export("x.json")


def test_make_scheduler_maps_paddle_names():
    sched = make_scheduler(closed=1, ready=1, record=2)
    actions = [sched(i).name for i in range(4)]
    assert actions == ["NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE"]


def test_profile_fit_breakdown_top_ops_memory_and_trace(tmp_path):
    report = profile_fit(_model(), _data(), steps=4, warmup=2, batch_size=16)
    b = report.breakdown()
    assert b["steps"] == 4 and set(b["share"]) == set(PHASES)
    assert b["share"]["forward"] > 0 and b["share"]["backward"] > 0 and b["ms"]["optimizer"] > 0
    assert sum(b["share"].values()) == pytest.approx(1.0)
    assert b["loop_overhead"] == pytest.approx(b["loop_ms"] / b["compute_ms"])
    names = {r["name"] for r in report.top_ops(row_limit=0)}
    assert {"aten::addmm", "sampan::forward", "sampan::backward", "sampan::optimizer"} <= names
    timeline = report.memory_timeline()
    assert len(timeline) == 7 and all(r["rss"] > 0 for r in timeline)
    trace = json.loads(report.export_chrome_trace(tmp_path / "t" / "trace.json").read_text())
    events = {e.get("name") for e in trace["traceEvents"]}
    assert "sampan::forward" in events and any(str(n).startswith("ProfilerStep#") for n in events)


class _Slow(Callback):
    def on_train_batch_end(self, step, logs=None):
        import time

        time.sleep(0.05)


def test_step_timer_puts_callback_time_in_callbacks():
    timer = StepTimer(skip=0)
    _model().fit(_data(96), batch_size=16, epochs=1, verbose=0, callbacks=[_Slow(), timer])
    s = timer.summary()
    assert s["steps"] == 6
    assert s["ms"]["callbacks"] >= 49  # the sleep lands in "callbacks", in no other phase
    assert all(s["ms"][p] < 49 for p in ("data", "h2d", "optimizer", "other"))
    assert timer.table().startswith("| phase |")
    # hooks and the wrapped CallbackList.call are gone after the run
    model = timer.model
    assert not model.network._forward_hooks and "call" not in vars(model._callbacks)


def test_profile_steps_on_a_code_block():
    report = profile_steps(lambda: torch.randn(32, 32) @ torch.randn(32, 32), steps=3, warmup=1)
    assert report.timer is None and report.breakdown() == {}
    mm = [r for r in report.top_ops(row_limit=0) if r["name"] == "aten::mm"]
    assert mm and mm[0]["count"] == 3
    with pytest.raises(ValueError, match="steps"):
        profile_steps(lambda: None, steps=0)
