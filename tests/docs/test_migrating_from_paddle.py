"""Every ```python block of docs/MIGRATING_FROM_PADDLE.md runs, each in a fresh namespace in a scratch folder."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "MIGRATING_FROM_PADDLE.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def blocks() -> list[tuple[str, str]]:
    """(section heading, code) for each python block, in order."""
    text = GUIDE.read_text(encoding="utf-8")
    found = []
    for match in _BLOCK.finditer(text):
        heading = re.findall(r"^#+ (.+)$", text[:match.start()], re.M)[-1]
        found.append((heading, match.group(1)))
    return found


def test_every_section_has_an_example():
    text = GUIDE.read_text(encoding="utf-8")
    sections = re.findall(r"^## (.+)$", text, re.M)
    with_code = {heading for heading, _ in blocks()}
    untested = [s for s in sections if s != "The name table" and s not in with_code
                and not any(h in with_code for h in _subsections(text, s))]
    assert untested == []


def _subsections(text: str, section: str) -> list[str]:
    part = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^### (.+)$", part, re.M)


@pytest.mark.parametrize("heading, code", blocks(), ids=[h for h, _ in blocks()])
def test_example_runs(heading, code, tmp_path, monkeypatch, one_thread):
    assert re.search(r"^\s*(assert |with pytest\.raises)", code, re.M), f"the example of {heading!r} checks nothing"
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"{GUIDE.name} ({heading})", "exec"), {"__name__": "__guide__"})
