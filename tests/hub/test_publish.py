"""``sampan publish``: the learner's gallery (files, refusals, CLI) and real Voilà serving it."""
from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request

import nbformat
import pytest
from servers import stop
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from sampan.cli import main
from sampan.cli._servers import server_env
from sampan.errors import UnsafeFileError
from sampan.hub import gallery
from sampan.utils.net import free_port


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv(gallery.LEARNER_HOME_ENV, str(home))
    return home


def notebook(path, code="print('hello from my app')", output="hello from my app\n"):
    nb = new_notebook(cells=[new_markdown_cell("# My app"),
                             new_code_cell(code, outputs=[new_output("stream", name="stdout", text=output)])])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def test_publish_list_and_remove(home):
    source = notebook(home / "apps" / "my app.ipynb")
    entry = gallery.publish(source, thumbnail=False)
    assert (entry.name, entry.source, entry.thumbnail) == ("my_app", "apps/my app.ipynb", None)
    assert [p.name for p in gallery.list_published()] == ["my_app"]
    assert (gallery.gallery_dir() / "my_app.ipynb").read_bytes() == source.read_bytes()
    page = json.loads((gallery.gallery_dir() / gallery.INDEX).read_text())["cells"][0]["source"]
    assert 'href="my_app.ipynb"' in page and "data:image/svg+xml" in page  # placeholder without a thumbnail
    gallery.remove("my_app")
    assert gallery.list_published() == [] and source.is_file()
    assert not (gallery.gallery_dir() / "my_app.ipynb").exists()
    with pytest.raises(KeyError, match="sampan publish --list"):
        gallery.remove("my_app")


def test_publish_refuses_files_outside_the_learners_folder(home, tmp_path):
    outside = notebook(tmp_path / "elsewhere" / "theirs.ipynb")
    with pytest.raises(UnsafeFileError, match="inside your folder"):
        gallery.publish(outside, thumbnail=False)
    (home / "link.ipynb").symlink_to(outside)  # a link inside the folder pointing out is refused too
    with pytest.raises(UnsafeFileError, match="inside your folder"):
        gallery.publish(home / "link.ipynb", thumbnail=False)
    (home / "notes.txt").write_text("not a notebook")
    with pytest.raises(ValueError, match="Expected `notebook` to be a .ipynb notebook"):
        gallery.publish(home / "notes.txt", thumbnail=False)
    with pytest.raises(ValueError, match="Expected `name`"):
        gallery.publish(notebook(home / "a.ipynb"), name="../evil", thumbnail=False)
    assert gallery.list_published() == []


def test_a_chinese_notebook_name_gets_an_ascii_name_that_says_so(home, capsys):
    """Audit: `sampan publish 我的.ipynb` was refused for the name '__' the user never gave."""
    assert main(["publish", str(notebook(home / "apps" / "我的.ipynb")), "--no-thumbnail"]) == 0
    assert main(["publish", str(notebook(home / "你的.ipynb")), "--no-thumbnail"]) == 0
    captured = capsys.readouterr()
    names = [p.name for p in gallery.list_published()]
    assert names == sorted([gallery.default_name("我的.ipynb"), gallery.default_name("你的.ipynb")])
    assert len(set(names)) == 2 and all(gallery._NAME.match(n) and n.startswith("dashboard_") for n in names)
    assert f"publishing 我的.ipynb as {gallery.default_name('我的.ipynb')}" in captured.err
    assert f"Published {gallery.default_name('我的.ipynb')} (from apps/我的.ipynb)" in captured.out
    # the same file name gives the same name again (publishing updates it), and its ASCII part is kept
    assert gallery.publish(home / "apps" / "我的.ipynb", thumbnail=False).name == gallery.default_name("我的.ipynb")
    assert len(gallery.list_published()) == 2
    assert gallery.default_name("数据app.ipynb").startswith("app_")
    assert gallery.default_name("my app.ipynb") == "my_app"  # ASCII names as before, without a note
    assert gallery.default_name("index.ipynb").startswith("index_")  # 'index' is the gallery page's own name
    with pytest.raises(ValueError, match=r"`name` to be ASCII letters.*Received: name='我的'"):
        gallery.publish(home / "apps" / "我的.ipynb", name="我的", thumbnail=False)


def test_a_chinese_notebook_shows_its_title_in_the_galleries_under_an_ascii_url_name(home):
    """The galleries showed only `dashboard_1a2b3c4d` for 手写数字识别.ipynb: its title is now the file name (or
    --title), while the name in the URL stays ASCII; an entry published before titles shows its name."""
    from sampan.hub.service import render_gallery

    source = notebook(home / "手写数字识别.ipynb")
    assert main(["publish", str(source), "--no-thumbnail"]) == 0
    (entry,) = gallery.list_published()
    assert entry.name == gallery.default_name(source) and entry.name.isascii() and entry.title == "手写数字识别"
    catalog = json.loads((gallery.gallery_dir() / "gallery.json").read_text())["dashboards"]
    assert catalog[entry.name]["title"] == "手写数字识别"
    page = json.loads((gallery.gallery_dir() / gallery.INDEX).read_text())["cells"][0]["source"]
    assert ">手写数字识别</div>" in page and f'href="{entry.name}.ipynb"' in page and f"<code>{entry.name}</code>" in page
    shared = render_gallery([("alice", catalog[entry.name])], live=True)
    assert (f'<a href="gallery/alice/{entry.name}"><bdi>手写数字识别</bdi></a> <small><code>{entry.name}</code></small>'
            in shared)
    assert f'href="../live/voila/render/alice/{entry.name}.ipynb"' in shared

    assert main(["publish", str(source), "--name", "digits", "--title", "手写数字 LeNet", "--no-thumbnail"]) == 0
    assert {p.name: p.title for p in gallery.list_published()}["digits"] == "手写数字 LeNet"
    old = {"name": "old_app", "source": "old_app.ipynb", "published_at": "2026-01-01T00:00:00+00:00", "thumbnail": None}
    (gallery.gallery_dir() / "gallery.json").write_text(json.dumps({"version": 1, "dashboards": {"old_app": old}}))
    assert [(p.name, p.title) for p in gallery.list_published()] == [("old_app", "old_app")]
    assert ">old&#95;app</div>" in gallery.index_notebook({"old_app": old})["cells"][0]["source"]
    assert '<a href="gallery/alice/old_app"><bdi>old_app</bdi></a>' in render_gallery([("alice", old)])


def test_a_hand_edited_gallery_json_leaves_out_the_odd_entries_with_a_warning_and_keeps_them_in_the_file(home):
    """gallery.json is the learner's to edit. An entry with a key `publish` never writes, one without a time, one
    with a number for a time, one of another shape: `sampan publish --list` and the gallery page broke on each
    (TypeError, KeyError). Now the good entries show (a missing time as none), each odd one is named in a
    warning, and publishing again keeps them all in the file."""
    notebook(home / "app.ipynb")
    assert main(["publish", str(home / "app.ipynb"), "--no-thumbnail"]) == 0
    path = gallery.gallery_dir() / "gallery.json"
    data = json.loads(path.read_text())
    data["dashboards"].update({
        "extra": {"name": "extra", "source": "extra.ipynb", "published_at": None, "colour": "blue"},
        "no_time": {"name": "no_time", "source": "x.ipynb"},
        "number_time": {"name": "number_time", "published_at": 20261206},
        "not_a_dict": ["name", "published_at"],
        "bad_name": {"name": "../escape", "published_at": "2026-12-06T08:00:00+00:00"}})
    path.write_text(json.dumps(data))
    with pytest.warns(RuntimeWarning) as caught:
        listed = gallery.list_published()
    assert [(p.name, p.published_at) for p in listed][0] == ("app", data["dashboards"]["app"]["published_at"])
    shown = [(p.name, p.published_at, p.title) for p in listed][1:]
    assert shown == [("extra", "", "extra"), ("no_time", "", "no_time")]
    named = " ".join(str(w.message) for w in caught)
    assert all(f"'{key}'" in named for key in ("number_time", "not_a_dict", "bad_name"))
    assert "'extra'" not in named and "'no_time'" not in named
    assert "run `sampan publish` on its notebook again" in named
    page = gallery.index_notebook(data["dashboards"])["cells"][0]["source"]
    assert 'href="app.ipynb"' in page and 'href="extra.ipynb"' in page and "escape" not in page

    notebook(home / "second.ipynb")
    with pytest.warns(RuntimeWarning):
        assert main(["publish", str(home / "second.ipynb"), "--no-thumbnail"]) == 0
        assert main(["publish", "--list"]) == 0
    kept = json.loads(path.read_text())["dashboards"]
    assert {"extra", "no_time", "number_time", "not_a_dict", "bad_name", "second"} <= set(kept)


def test_cli_publish_list_remove(home, capsys, tmp_path):
    source = notebook(home / "app.ipynb")
    assert main(["publish", str(source), "--no-thumbnail"]) == 0
    assert main(["publish", "--list"]) == 0
    assert "app\t" in capsys.readouterr().out
    assert main(["publish", str(notebook(tmp_path / "x.ipynb"))]) == 2
    assert "inside your folder" in capsys.readouterr().err
    assert main(["publish", "--remove", "nope"]) == 2
    assert "Expected `name` to be one of app" in capsys.readouterr().err
    assert main(["publish", "--remove", "app"]) == 0


def _get(url: str, timeout: float = 90.0) -> str:
    deadline = time.time() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=60) as r:
                return r.read().decode()
        except (urllib.error.URLError, ConnectionError, OSError):
            if time.time() > deadline:
                raise
            time.sleep(0.5)


@pytest.mark.slow
def test_gallery_is_served_by_voila_with_thumbnails_and_no_tracebacks(home, tmp_path):
    gallery.publish(notebook(home / "good.ipynb"))  # a real headless-Chromium thumbnail
    bad = notebook(home / "bad.ipynb", code="raise ValueError('secret-detail-42')", output="")
    gallery.publish(bad, thumbnail=False)
    assert (gallery.gallery_dir() / "thumbs" / "good.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    port = free_port()
    log = open(tmp_path / "voila.log", "w")
    proc = subprocess.Popen(gallery.voila_command(port=port), stdout=log, stderr=subprocess.STDOUT,
                            env=server_env("gallery-test-token"))
    try:
        base = f"http://127.0.0.1:{port}/voila/render/"
        anonymous = _get(base + gallery.INDEX)  # without the token: the login page, not the gallery
        assert "token" in anonymous.lower() and "good.ipynb" not in anonymous
        query = "?token=gallery-test-token"
        index = _get(base + gallery.INDEX + query)
        assert 'href="good.ipynb"' in index and 'href="bad.ipynb"' in index
        assert "data:image/png;base64," in index  # good's thumbnail
        good = _get(base + "good.ipynb" + query)
        assert "hello from my app" in good and "print(" not in good  # sources stripped
        with urllib.request.urlopen(base + "good.ipynb" + query, timeout=120) as response:  # others open it:
            policy = response.headers["Content-Security-Policy"]  # the published notebook's scripts do not run
        assert policy.startswith("script-src 'self' 'sha256-") and "object-src 'none'" in policy
        failing = _get(base + "bad.ipynb" + query)
        assert "error" in failing.lower()
        assert "secret-detail-42" not in failing and "Traceback" not in failing
    finally:
        stop(proc)
