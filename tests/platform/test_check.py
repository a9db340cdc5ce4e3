"""run_check really runs each capability; `sampan check` exits 1 when something required fails."""
import os
import subprocess
import sys

import pytest
import torch

import sampan
from sampan import check


def test_run_check_proves_each_capability(capsys):
    report = sampan.run_check(compile=False)
    names = [i.name for i in report.items]
    assert names[:2] == ["cpu: forward + backward", "cpu: bf16 autocast step"]
    assert "distributed: gloo all-reduce x2" in names
    assert report.ok and all(i.ok for i in report.items)
    assert "->" in report["cpu: forward + backward"].detail
    assert "sum 1+2 = 3" in report["distributed: gloo all-reduce x2"].detail
    out = capsys.readouterr().out
    assert "Sampan is ready." in out and "torch" in out
    assert report.to_dict()["ok"] is True


def test_a_failing_required_check_makes_the_report_fail(monkeypatch):
    def broken(device, dtype=None):
        raise RuntimeError("no kernel image is available")

    monkeypatch.setattr(check, "_train_step", broken)
    report = check.run_check(compile=False, distributed=False, verbose=False)
    assert not report.ok
    assert "no kernel image" in report["cpu: forward + backward"].detail
    assert "Something required failed" in str(report)


def test_sampan_check_command_and_version():
    out = subprocess.run([sys.executable, "-m", "sampan", "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == f"sampan {sampan.__version__}"
    res = subprocess.run([sys.executable, "-m", "sampan", "check", "--no-compile", "--no-distributed", "--json"], capture_output=True,
                         text=True, timeout=180)
    assert res.returncode == 0, res.stderr
    assert '"ok": true' in res.stdout


def test_the_cuda_stack_verdict_names_the_piece_that_does_not_fit():
    from sampan.check import cuda_stack_verdict

    assert cuda_stack_verdict(None, None, None).startswith("CPU-only torch build")
    assert "compatible" in cuda_stack_verdict("12.6", "12.4", 90100)  # minor-version compatibility
    assert "cuDNN 9.1.0" in cuda_stack_verdict("12.6", "13.0", 90100)
    with pytest.raises(RuntimeError, match="driver supports only CUDA 11.8: update the NVIDIA driver"):
        cuda_stack_verdict("12.6", "11.8", 90100)
    assert "no NVIDIA driver answers, so it runs on the CPU" in cuda_stack_verdict("12.6", None, 90100)


def test_the_report_names_the_container_and_the_cuda_stack(tmp_path):
    import sampan

    report = sampan.run_check(compile=False, distributed=False, verbose=False)
    assert "container" in report.versions
    item = report["CUDA stack: torch build, driver, cuDNN"]
    assert item.ok, item.detail  # this machine's torch is CPU-only or its driver fits
    assert ("CPU-only" in item.detail) == (torch.version.cuda is None)
    assert torch.version.cuda is None or f"CUDA {torch.version.cuda}" in item.detail


def test_the_cpu_kernels_item_builds_them_runs_the_int8_gemv_and_names_the_int8_path(monkeypatch):
    from sampan.quantization import gemv
    from sampan.quantization._pt2e import int8_vnni
    from sampan.utils import cpp_kernels

    detail = check._cpu_kernels()
    path = "inductor" if int8_vnni() else "fbgemm, 1-2 rows on the int8 GEMV"
    assert f"VNNI {'yes' if int8_vnni() else 'no'} (compile_int8: {path})" in detail, detail
    assert "int8 GEMV built, matches float; Winograd F(4x4) built" in detail, detail
    from sampan.jit import amx

    reason = amx.unavailable()  # an Intel Xeon's (from Sapphire Rapids on): elsewhere the reason, not a failure
    assert (f"; AMX bf16x3 convolution unavailable: {reason}" if reason else "; AMX bf16x3 convolution built, within ")\
        in detail, detail
    # without a compiler: a warning that says why, not a failed report
    monkeypatch.setitem(cpp_kernels._STATE, gemv._NAME, "no C++ compiler ('c++' is not on PATH)")
    item = check._run("cpu: Sampan's C++ kernels", check._cpu_kernels, required=False)
    assert not item.ok and "the int8 GEMV kernel: no C++ compiler" in item.detail
    assert "[warn] cpu: Sampan's C++ kernels" in str(check.CheckReport(items=[item]))


def test_run_check_leaves_the_callers_random_stream_where_it_was():
    torch.manual_seed(1234)
    torch.rand(3)
    want = torch.rand(5)
    torch.manual_seed(1234)
    torch.rand(3)
    check.run_check(compile=False, distributed=False, verbose=False)
    assert torch.equal(torch.rand(5), want)
    assert torch.initial_seed() == 1234
    assert check._compile_smoke()  # seeds nothing either
    torch.manual_seed(1234)
    torch.rand(3)
    check._train_step("cpu")
    check._compile_smoke()
    assert torch.equal(torch.rand(5), want)


def test_run_check_in_a_script_without_a_main_guard_passes_its_gloo_check(tmp_path):
    # Paddle's idiom: `paddle.utils.run_check()` at the top of a script. Ranks started with multiprocessing's spawn
    # would import this script again and run its run_check() once more, and never report.
    script = tmp_path / "check_here.py"
    script.write_text("import sampan\n"
                      "report = sampan.run_check(compile=False, verbose=False)\n"
                      "print('gloo:', report['distributed: gloo all-reduce x2'].detail)\n"
                      "assert report.ok, report\n")
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=170,
                         env={**os.environ, "OMP_NUM_THREADS": "1"}, cwd=str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "gloo: 2 processes, sum 1+2 = 3 on both ranks" in res.stdout


def test_a_gloo_rank_that_dies_is_reported_with_its_exit_code_and_stderr(monkeypatch):
    monkeypatch.setattr(check, "_ALLREDUCE_RANK", "import sys\nsys.exit('planted: no gloo here' if sys.argv[1] == '1' "
                                                  "else __import__('time').sleep(120))")
    with pytest.raises(RuntimeError, match=r"rank 1 exited with code 1 before reporting; its stderr ends: planted: "
                                           r"no gloo here"):
        check._gloo_allreduce(timeout=150)  # rank 0 sleeps for 120 s: the wait ends when rank 1 exits
