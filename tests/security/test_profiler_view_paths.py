"""``ProfilerView``'s trace box is typed by whoever opens the dashboard (Voilà serves it to anyone with the link)
and the kernel writes the file as the dashboard's owner: a typed name that climbs out of the folder, names another
folder, or names an existing file (or a link to one) is refused in the status, and nothing is written or created."""
from __future__ import annotations

import pytest
import torch

from sampan_widgets import ProfilerView


@pytest.fixture(scope="module")
def profiled():
    view = ProfilerView(steps=1, warmup=0)
    view.profile(lambda: torch.ones(8, 8) @ torch.ones(8, 8))
    return view


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """The dashboard's folder (the kernel's working directory) and, beside it, a victim file of the owner's."""
    dashboard = tmp_path / "dashboard"
    dashboard.mkdir()
    victim = tmp_path / "notes.json"
    victim.write_text("my precious notes")
    monkeypatch.chdir(dashboard)
    return dashboard, victim


def _press(view, typed):
    view.path.value = typed
    view.export_button.click()
    return view.export_status.value


@pytest.mark.parametrize("typed", ["../notes.json", "{victim}", "new/deep/dir/x.json", "/tmp/../{victim}",
                                   "..\\notes.json", ".hidden.json", "notes", "", " x.json", "a:b.json",
                                   "x.json\n", "sub/.json"])
def test_a_typed_name_outside_the_folder_or_not_a_plain_json_name_is_refused(typed, profiled, folders):
    dashboard, victim = folders
    status = _press(profiled, typed.format(victim=victim))
    assert "Expected `trace` to be a file name ending in .json" in status and "HINT: type a name such as" in status
    assert victim.read_text() == "my precious notes"
    assert list(dashboard.iterdir()) == [] and sorted(p.name for p in victim.parent.iterdir()) == ["dashboard",
                                                                                                    "notes.json"]


def test_an_existing_file_or_a_link_to_one_is_never_overwritten(profiled, folders):
    dashboard, victim = folders
    (dashboard / "link.json").symlink_to(victim)
    (dashboard / "kept.json").write_text("kept")
    for name in ("link.json", "kept.json"):
        status = _press(profiled, name)
        assert "already exists" in status and "written to" not in status
    assert victim.read_text() == "my precious notes" and (dashboard / "kept.json").read_text() == "kept"
    assert "written to" in _press(profiled, "fresh.json") and (dashboard / "fresh.json").stat().st_size > 0
