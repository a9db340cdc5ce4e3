"""What a learner or a teacher opens from someone else's course: its folder, its translations, its tokenizer and
its pretrained Transformer. Each test builds the attack; none of them may leak a file, run code or freeze the kernel.
"""
from __future__ import annotations

import json
import time

import pytest
import torch

from sampan.errors import CheckpointError, UnsafeFileError


def _notebook(code: str, comments: dict | None = None, strings: dict | None = None) -> dict:
    sampan = {"languages": ["en", "zh"], "comments": {"zh": comments or {}}, "strings": {"zh": strings or {}}}
    return {"cells": [{"cell_type": "code", "metadata": {}, "source": code, "outputs": [], "execution_count": None}],
            "metadata": {"sampan": sampan}, "nbformat": 4, "nbformat_minor": 5}


# --- a course folder whose file is a link out of it --------------------------------------------------------------

def test_building_a_course_never_copies_the_file_a_link_points_to(tmp_path):
    """A shared course ships ``notes.txt`` as a link to the teacher's SSH key; ``sampan lab`` and the hub build the
    course (copying follows links) and the hub then gives every learner the built files (``sync_course`` skips links,
    but the built copy is a plain file by then)."""
    from sampan.path.lang import build_course

    secret = tmp_path / "home" / ".ssh" / "id_rsa"
    secret.parent.mkdir(parents=True)
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    course = tmp_path / "course"
    course.mkdir()
    (course / "intro.md").write_text("# intro\n")
    (course / "notes.txt").symlink_to(secret)
    dest = tmp_path / "built"
    with pytest.raises(UnsafeFileError, match=r"holds 'notes.txt', a link to .*id_rsa.* outside it.*HINT: replace the"
                                              r" link with the file itself") as caught:
        build_course("zh", dest, course)
    assert caught.value.entry == "notes.txt"
    assert not any("PRIVATE KEY" in f.read_text() for f in dest.rglob("*") if f.is_file())


def test_a_link_inside_the_course_folder_still_builds(tmp_path):
    from sampan.path.lang import build_course

    course = tmp_path / "course"
    course.mkdir()
    (course / "intro.md").write_text("# intro\n")
    (course / "same.md").symlink_to(course / "intro.md")
    dest = build_course("zh", tmp_path / "built", course)
    assert (dest / "same.md").read_text() == "# intro\n" and not (dest / "same.md").is_symlink()


# --- translations in a notebook's metadata that would add code ---------------------------------------------------

def _attacks(marker) -> list[tuple[str, dict, dict]]:
    run = f"open({str(marker)!r}, 'w').write('pwned')"
    return [
        # a comment's "translation" on two lines: the second is code
        ("x = 1  # the answer\n", {"the answer": f"答案\n{run}"}, {}),
        # a string literal replaced by code (not one literal)
        ('print("hello")\n', {}, {'"hello"': f'"你好", {run}'}),
        # one literal, but it closes the string the original sat in: the code between runs
        ("print('say \"hi\"')\n", {}, {'"hi"': f"\"' + str({run}) + '\""}),
        # a triple-quoted literal put where the original sat in a comment starts a line of code
        ('x = 1  # say "ok"\n', {}, {'"ok"': f'"""好\n{run}\n#"""'}),
    ]


def test_the_translation_attacks_are_real_on_their_own(tmp_path):
    """Without the check, the built code runs what the metadata hides (the English cell does nothing of it)."""
    from sampan.path.lang import translate_comments, translate_strings

    for n, (code, comments, strings) in enumerate(_attacks(tmp_path / "pwned")):
        exec(compile(translate_strings(translate_comments(code, comments), strings), f"<attack {n}>", "exec"), {})
        assert (tmp_path / "pwned").read_text() == "pwned", n
        (tmp_path / "pwned").unlink()


def test_a_translation_cannot_add_code_to_a_cell(tmp_path):
    from sampan.path.lang import build_notebook

    for n, (code, comments, strings) in enumerate(_attacks(tmp_path / "pwned")):
        with pytest.raises(UnsafeFileError, match=r"change what code cell 0 does, not only its words"):
            build_notebook(_notebook(code, comments, strings), "zh")
        assert build_notebook(_notebook(code, comments, strings), "en")["cells"][0]["source"] == code, n


def test_a_translation_cannot_touch_shell_lines_magics_or_ipython_line_breaks():
    """IPython runs ``!`` lines in a shell and ends lines where ``str.splitlines`` does (``\\u2028`` too), though
    Python reads a comment there; a ``%%bash`` cell is not Python at all."""
    from sampan.path.lang import build_notebook

    cases = [
        ('!echo "hi"\n', {}, {'"hi"': '"$(touch pwned)"'}),
        ('%%bash\necho "hi"\n', {}, {'"hi"': '"$(touch pwned)"'}),
        ("x = 1  # the answer\n", {"the answer": "答案\u2028!touch pwned"}, {}),
        ("x = 1  # the answer\n", {"the answer": "答案\r!touch pwned"}, {}),
    ]
    for code, comments, strings in cases:
        with pytest.raises(UnsafeFileError, match=r"change what code cell 0 does"):
            build_notebook(_notebook(code, comments, strings), "zh")


def test_translations_of_words_still_build():
    from sampan.path.lang import build_notebook

    nb = _notebook('acc = 0.5\nprint(f"test accuracy: {acc:.2%}")  # show the score\nprint("done")\n',
                   {"show the score": "显示得分"},
                   {'f"test accuracy: {acc:.2%}"': 'f"{acc:.2%} 是测试准确率"', '"done"': '"完成"'})
    assert build_notebook(nb, "zh")["cells"][0]["source"] == (
        'acc = 0.5\nprint(f"{acc:.2%} 是测试准确率")  # 显示得分\nprint("完成")\n')


# --- a tokenizer file whose n-grams would fill memory -------------------------------------------------------------

def test_a_tokenizer_file_cannot_ask_for_ngrams_that_fill_memory(tmp_path):
    """``ngram=10**9`` made every character's token the whole rest of the text: 400 MB for 20,000 characters,
    10 GB for 100,000, from a file of a few bytes."""
    from sampan.text import CharTokenizer, Tokenizer, Vocab

    CharTokenizer(Vocab(["a"]), ngram=2).save(tmp_path / "tok.json")
    assert Tokenizer.load(tmp_path / "tok.json").ngram == 2
    data = json.loads((tmp_path / "tok.json").read_text())
    for ngram in (10**9, 0, "2", True):
        (tmp_path / "evil.json").write_text(json.dumps({**data, "ngram": ngram}))
        with pytest.raises(ValueError, match=r"a tokenizer file whose ngram is an int from 1 to 16.*freeze the kernel"):
            Tokenizer.load(tmp_path / "evil.json")


# --- a pretrained Transformer whose config asks for more than its weights ----------------------------------------

def _zoo_entry(name: str, config: dict, state: dict) -> None:
    from sampan.text import CharTokenizer, Vocab
    from sampan.utils.io import zoo_dir

    zoo_dir().mkdir(parents=True, exist_ok=True)
    vocab = CharTokenizer(Vocab(["[MASK]", "a"])).vocab.to_dict()
    torch.save({"format": "sampan.char-transformer", "version": 1, "config": config, "vocab": vocab,
                "lower": True, "state_dict": state}, zoo_dir() / f"{name}.pt")


def _small_state(layers: int = 1, dim: int = 4) -> tuple[dict, dict]:
    from sampan.text import CharTransformer, TransformerConfig

    config = dict(vocab_size=4, dim=dim, heads=1, layers=layers, ffn=0, max_len=2, dropout=0.0)
    return config, CharTransformer(TransformerConfig(**config)).state_dict()


@pytest.mark.timeout(60)  # before the fix, "deep" built layers for hours
def test_a_zoo_transformer_cannot_make_the_kernel_build_a_network_its_weights_do_not_hold():
    """The network is built from the file's config before its weights are copied in: a few KB of config saying
    ``layers=10**8`` took hours (1 ms a layer), ``vocab_size=2**22, dim=2**12`` 64 GiB, allocated and touched as it
    is initialised. (The wide case here asks for 64 TiB, which the allocator refuses at once, so that the test cannot
    itself exhaust the machine's memory if the check is lost.)"""
    from sampan.text import load_pretrained

    config, state = _small_state()
    _zoo_entry("fine", config, state)
    assert load_pretrained("fine")[0].config.layers == 1
    _zoo_entry("deep", {**config, "layers": 10**8}, state)
    _zoo_entry("wide", {**config, "vocab_size": 2**30, "dim": 2**14, "heads": 1}, state)
    start = time.monotonic()
    with pytest.raises(CheckpointError, match=r"implies 1200000004 tensors, but the file holds 16.*take memory"):
        load_pretrained("deep")
    with pytest.raises(CheckpointError, match=r"implies 'embedding.weight' of shape \(1073741824, 16384\)"):
        load_pretrained("wide")
    assert time.monotonic() - start < 10


def test_a_zoo_transformer_cannot_repeat_one_layers_bytes_or_broadcast_a_table():
    """Shapes alone are not enough: 1,000 layers saved as views of one layer's storage, or an embedding table saved
    as a stride-0 view of one row, pass a shape check while the file holds one layer or one row."""
    from sampan.text import load_pretrained

    config, state = _small_state(layers=2)
    shared = {k.replace("layers.0.", "layers.1."): v for k, v in state.items() if "layers.0." in k}
    _zoo_entry("repeated", config, {**state, **shared})  # torch.save keeps one storage for both layers
    with pytest.raises(CheckpointError, match=r"repeat the same bytes"):
        load_pretrained("repeated")
    row = torch.zeros(1, 4)
    _zoo_entry("broadcast", {**config, "vocab_size": 4}, {**state, "embedding.weight": row.expand(4, 4)})
    with pytest.raises(CheckpointError, match=r"repeat the same bytes"):
        load_pretrained("broadcast")



def test_a_translation_of_a_cell_in_ipythons_syntax_builds_but_its_commands_cannot_change():
    """``x = !ls`` and ``t = %time f()`` are not Python, but IPython runs them as calls: a translation of the cell's
    words builds; one that changes the shell command or the magic's code inside them is refused."""
    from sampan.path.lang import build_notebook

    code = '# the files here\nfiles = !ls\nprint("found", len(files))\n'
    built = build_notebook(_notebook(code, {"the files here": "这里的文件"}, {'"found"': '"找到"'}), "zh")
    assert built["cells"][0]["source"] == '# 这里的文件\nfiles = !ls\nprint("找到", len(files))\n'
    # a comment after `x = !cmd` is the shell's (IPython passes it on): part of the command, so never translated
    line = "files = !ls  # the files here\n"
    assert build_notebook(_notebook(line, {"the files here": "这里的文件"}, {}), "zh")["cells"][0]["source"] == line
    for code, strings in [('out = !echo "hi"\n', {'"hi"': '"$(touch pwned)"'}),
                          ('t = %time print("hi")\n', {'"hi"': '"hi", open("pwned", "w")'}),
                          ('t = %time print("hi")\n', {'"hi"': '"你好"'})]:
        with pytest.raises(UnsafeFileError, match=r"change what code cell 0 does"):
            build_notebook(_notebook(code, {}, strings), "zh")
