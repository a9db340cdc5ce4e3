"""sampan.utils.cpp_kernels: a kernel that cannot be built here comes back as a reason, not an exception."""
import torch

from sampan.utils import cpp_kernels


def test_without_a_compiler_the_reason_names_the_compiler_and_the_fix(monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler-here")
    reason = cpp_kernels._load("sampan_test_kernel", __file__, "sampan_test::nothing", "the test kernel", None)
    assert reason == ("no C++ compiler ('no-such-compiler-here' is not on PATH; install g++ or set CXX) to build "
                      "the test kernel")


def test_a_source_that_does_not_compile_gives_the_first_line_of_the_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "extensions"))
    source = tmp_path / "broken.cpp"
    source.write_text("this is not C++;\n")
    reason = cpp_kernels.load("sampan_test_broken", source, "sampan_test_broken::op", "the broken kernel")
    assert reason.startswith("building the broken kernel failed: Error building extension 'sampan_test_broken'")
    # kept for the process: the second call does not build again
    assert cpp_kernels.load("sampan_test_broken", source, "sampan_test_broken::op", "the broken kernel") is reason
    assert not hasattr(torch.ops.sampan_test_broken, "op")
    cpp_kernels._STATE.pop("sampan_test_broken")
