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
    with pytest.raises(ValueError, match="scheduler"):
        Profiler(scheduler=(True, 3))
    with pytest.raises(ValueError, match="targets"):
        Profiler(targets=["tpu"])
    with pytest.raises(ValueError, match=r"Expected `targets`.*Received: targets=\[\]"):
        Profiler(targets=[])


def test_targets_take_a_string():
    with Profiler(targets="cpu") as prof:
        torch.ones(4, 4) @ torch.ones(4, 4)
        prof.step()
    assert any(r["name"] == "aten::mm" for r in prof.summary(print_table=False, row_limit=0))


def test_gpu_target_without_cuda_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for targets in (["gpu"], "gpu", ["cpu", "gpu"]):
        with pytest.raises(ValueError, match=r"Expected `targets` to be \"cpu\" only: this machine has no CUDA"):
            Profiler(targets=targets)


@pytest.mark.parametrize("row_limit", [-1, 1.5, True, "3"])
def test_summary_refuses_a_row_limit_that_is_not_a_count(row_limit):
    with Profiler() as prof:
        torch.ones(4, 4) @ torch.ones(4, 4)
        prof.step()
    with pytest.raises(ValueError, match=r"Expected `row_limit` to be an int >= 0"):
        prof.summary(print_table=False, row_limit=row_limit)
    assert len(prof.summary(print_table=False, row_limit=0)) > len(prof.summary(print_table=False, row_limit=1)) == 1


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


def test_make_scheduler_repeats_until_stopped_by_default_as_paddle():
    windows = []
    prof = Profiler(scheduler=make_scheduler(closed=1, ready=1, record=1),
                    on_trace_ready=lambda _: windows.append(prof.step_num))
    with prof:
        for _ in range(9):
            torch.ones(4, 4) @ torch.ones(4, 4)
            prof.step()
    assert windows == [3, 6, 9]  # steps 2, 5 and 8 (0-based) recorded, each handed over by the step() ending it
    once = make_scheduler(closed=1, ready=1, record=1, repeat=1)
    assert [once(i).name for i in range(6)] == ["NONE", "WARMUP", "RECORD_AND_SAVE", "NONE", "NONE", "NONE"]
    forever = make_scheduler(closed=0, ready=0, record=1, repeat=-1)  # Paddle: repeat <= 0 never ends
    assert all(forever(i).name == "RECORD_AND_SAVE" for i in range(5))
    with pytest.raises(ValueError, match=r"Expected `record` to be an int >= 1. Received: record=0"):
        make_scheduler(closed=1, ready=1, record=0)


def test_profile_fit_breakdown_top_ops_memory_and_trace(tmp_path):
    report = profile_fit(_model(), _data(), steps=4, warmup=2, batch_size=16)
    b = report.breakdown()
    assert report.steps == b["steps"] == 4 and set(b["share"]) == set(PHASES)  # warm-up steps not counted
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


def test_a_trace_exports_as_often_as_asked_and_never_over_a_file_unless_told(tmp_path):
    with Profiler() as prof:
        torch.ones(8, 8) @ torch.ones(8, 8)
        prof.step()
    first = prof.export(tmp_path / "a.json")
    second = prof.export(tmp_path / "b.json")  # torch alone: "Trace is already saved."
    assert first.read_bytes() == second.read_bytes() and json.loads(second.read_text())["traceEvents"]
    keep = tmp_path / "keep.json"
    keep.write_text("mine")
    with pytest.raises(FileExistsError, match=r"keep\.json already exists.*HINT: choose a new file name"):
        prof.export(keep, overwrite=False)
    assert keep.read_text() == "mine"
    (tmp_path / "link.json").symlink_to(keep)
    with pytest.raises(FileExistsError):
        prof.export(tmp_path / "link.json", overwrite=False)
    assert keep.read_text() == "mine"
    assert prof.export(tmp_path / "a.json").read_bytes() == second.read_bytes()  # overwrite=True: replaced
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json", "keep.json", "link.json"]


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


def test_profile_fit_goes_on_into_the_next_epoch_for_its_steps():
    """4 batches an epoch for 2 warm-up + 4 steps: fit goes on into a second epoch (num_iters), and the report
    counts the 4 recorded steps (it counted the warm-up ones too: 6)."""
    model = _model()
    report = profile_fit(model, _data(64), steps=4, warmup=2, batch_size=16)
    assert report.steps == report.breakdown()["steps"] == 4 and model.epoch == 2


def test_profile_steps_on_a_code_block():
    report = profile_steps(lambda: torch.randn(32, 32) @ torch.randn(32, 32), steps=3, warmup=1)
    assert report.steps == 3 and report.timer is None and report.breakdown() == {}
    mm = [r for r in report.top_ops(row_limit=0) if r["name"] == "aten::mm"]
    assert mm and mm[0]["count"] == 3
    with pytest.raises(ValueError, match="steps"):
        profile_steps(lambda: None, steps=0)
