"""Chinese labels in matplotlib figures: find an installed CJK font and add it to matplotlib's font fallbacks.

matplotlib draws a box (and warns ``Glyph ... missing from font(s) DejaVu Sans``) for every Chinese
character unless a font that has it is among the families of ``rcParams["font.family"]``. :func:`use_cjk_font`
appends the first CJK font it finds to that list, so Latin text looks exactly as before and each Chinese
glyph falls back to the CJK font (matplotlib ≥ 3.6 falls back glyph by glyph across ``font.family``).
The Sampan kernel calls it before the first cell that uses matplotlib (a ``pre_run_cell`` hook set up by
``kernels/sampan/kernel.json``), and ``sampan_widgets`` calls it before it draws.
On Debian/Ubuntu ``apt-get install fonts-noto-cjk`` provides Noto Sans CJK SC (``.ci/run`` installs it).

Example:
    >>> from sampan.utils.fonts import use_cjk_font
    >>> use_cjk_font()  # doctest: +SKIP
    'Noto Sans CJK SC'
"""
from __future__ import annotations

import functools
import warnings

# In order of preference: Simplified Chinese first (Noto / Source Han, WenQuanYi, the Windows and macOS fonts).
CJK_FONTS = ("Noto Sans CJK SC", "Source Han Sans SC", "Noto Sans SC", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei",
             "Microsoft YaHei", "SimHei", "PingFang SC", "Hiragino Sans GB", "Noto Sans CJK JP", "Noto Sans CJK TC")
INSTALL_HINT = ("no CJK font found, so Chinese characters in figures are drawn as boxes. HINT: install one "
                "(Debian/Ubuntu: `sudo apt-get install fonts-noto-cjk`; macOS and Windows have one already), "
                "then restart the kernel")


@functools.cache  # matplotlib's font list does not change while a process runs: looked up once
def cjk_font() -> str | None:
    """The name of the first installed font of :data:`CJK_FONTS` (any font named "CJK" otherwise), or None.

    Example:
        >>> from sampan.utils.fonts import cjk_font
        >>> cjk_font()  # doctest: +SKIP
        'Noto Sans CJK SC'
    """
    from matplotlib import font_manager

    installed = {f.name for f in font_manager.fontManager.ttflist}
    preferred = next((name for name in CJK_FONTS if name in installed), None)
    return preferred or next((name for name in sorted(installed) if "CJK" in name), None)


def use_cjk_font(*, warn: bool = True) -> str | None:
    """Appends :func:`cjk_font` to ``rcParams["font.family"]`` (the fallback) and returns its name; when none
    is installed, warns once with :data:`INSTALL_HINT` (``warn=False``: silently) and returns None.

    Example:
        >>> from sampan.utils.fonts import use_cjk_font
        >>> import matplotlib.pyplot as plt
        >>> name = use_cjk_font()
        >>> _ = plt.title("损失曲线 (loss)")  # Chinese glyphs, not boxes  # doctest: +SKIP
    """
    import matplotlib

    name = cjk_font()
    if name is None:
        if warn:
            warnings.warn(INSTALL_HINT, stacklevel=2)
        return None
    families = list(matplotlib.rcParams["font.family"])
    if name not in families:
        matplotlib.rcParams["font.family"] = families + [name]
    return name
