"""Chinese labels in matplotlib figures draw with an installed CJK font, not as boxes."""
from __future__ import annotations

import warnings

import matplotlib
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties, findfont, get_font

from sampan.utils.fonts import cjk_font, use_cjk_font

LABEL = "训练损失（loss）与准确率"


def _draw() -> list[str]:
    """Renders a figure with Chinese text; returns the warnings it raised."""
    fig = Figure(figsize=(3, 2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_title(LABEL)
    ax.plot([0, 1], [1, 0], label="准确率")
    ax.legend()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.canvas.draw()
    return [str(w.message) for w in caught]


@pytest.fixture
def rc():
    with matplotlib.rc_context({"font.family": ["sans-serif"], "font.sans-serif": ["DejaVu Sans"]}):
        yield


def test_without_a_cjk_font_chinese_glyphs_are_missing(rc):
    # the failure this module prevents: matplotlib's default font has no Chinese glyphs
    assert any("missing from font" in w for w in _draw())


def test_use_cjk_font_picks_an_installed_cjk_font_and_chinese_draws(rc):
    name = use_cjk_font()
    assert name is not None and name == cjk_font(), "no CJK font: apt-get install fonts-noto-cjk (.ci/run does)"
    assert matplotlib.rcParams["font.family"] == ["sans-serif", name]  # Latin text unchanged, CJK falls back
    font = get_font(findfont(FontProperties(family=name)))
    assert all(font.get_char_index(ord(ch)) for ch in "训练损失准确率"), font.fname  # the font has the glyphs
    assert not [w for w in _draw() if "missing from font" in w]


def test_without_any_cjk_font_the_user_is_told_what_to_install(rc, monkeypatch):
    import sampan.utils.fonts as fonts

    monkeypatch.setattr(fonts, "cjk_font", lambda: None)
    with pytest.warns(UserWarning, match=r"drawn as boxes\. HINT: .*apt-get install fonts-noto-cjk"):
        assert fonts.use_cjk_font() is None
    assert matplotlib.rcParams["font.family"] == ["sans-serif"]


def test_the_sampan_kernel_adds_the_cjk_font_before_the_first_plotting_cell(tmp_path, monkeypatch):
    """kernels/sampan/kernel.json's start-up hook, in a real kernel installed from it."""
    from jupyter_client.manager import start_new_kernel

    from sampan.cli import main
    from sampan.utils.notebooks import with_kernel_restarts

    assert main(["kernel", "install", "--prefix", str(tmp_path)]) == 0
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "share" / "jupyter"))
    km, kc = with_kernel_restarts(lambda: start_new_kernel(kernel_name="sampan", startup_timeout=120))
    try:
        before = kc.execute_interactive("import sys\nprint(sorted({'torch', 'matplot' + 'lib'} & set(sys.modules)))",
                                        timeout=60, output_hook=(out := _Out()))
        assert before["content"]["status"] == "ok" and out.text == "[]\n"  # a kernel that never plots pays nothing
        kc.execute_interactive("import matplotlib.pyplot as plt\nprint(plt.rcParams['font.family'])",
                               timeout=120, output_hook=(out := _Out()))
        assert out.text == f"['sans-serif', '{cjk_font()}']\n"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


class _Out:
    def __init__(self):
        self.text = ""

    def __call__(self, msg):
        if msg["msg_type"] == "stream":
            self.text += msg["content"]["text"]
