import subprocess
import sys


def test_monitor_and_profiler_import_no_jupyter():
    code = ("import sys, sampan, sampan.monitor, sampan.profiler\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'IPython', 'ipywidgets', 'ipykernel', 'jupyter_client', 'comm', 'matplotlib'})\n"
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout
