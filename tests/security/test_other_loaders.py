"""Every other file Sampan opens from outside is read without unpickling code (issue 11, security item 1).

Each test writes a file whose pickle runs a shell command (``torch.save`` of an object whose ``__reduce__``
calls ``os.system``) where Sampan reads: a training checkpoint, a model-zoo entry, the ``sampan export``
input, a cached dataset. The file must be refused and the command must not run.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from _attacks import Payload

import sampan
from sampan.errors import CheckpointError


@pytest.fixture
def marker(tmp_path):
    return tmp_path / "pwned"


def test_the_attack_is_real_a_plain_torch_load_runs_the_command(tmp_path, marker):
    torch.save({"model": Payload(marker)}, tmp_path / "evil.pt")
    torch.load(tmp_path / "evil.pt", weights_only=False)
    assert marker.is_file()


def test_model_load_refuses_a_pickled_checkpoint(tmp_path, marker):
    torch.save({"model": Payload(marker), "epoch": 3}, tmp_path / "evil.pt")
    model = sampan.Model(torch.nn.Linear(4, 2))
    with pytest.raises(CheckpointError):
        model.load(tmp_path / "evil.pt")
    assert not marker.exists()


def test_the_model_zoo_refuses_pickled_weights(marker):
    from sampan.vision.models import load_from_zoo, zoo_path

    path = zoo_path("evil-net")
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"weight": Payload(marker)}, path)
    with pytest.raises(CheckpointError, match="Cannot read zoo weights"):
        load_from_zoo(torch.nn.Linear(4, 2), "evil-net")
    assert not marker.exists()


def test_sampan_export_refuses_a_pickled_checkpoint(tmp_path, marker, capsys):
    from sampan.cli import main

    torch.save({"model": Payload(marker)}, tmp_path / "evil.pt")
    code = main(["export", str(tmp_path / "evil.pt"), "--network", "torch.nn:Identity",
                 "--input-spec", "x:float32:None,4", "--output", str(tmp_path / "out")])
    assert code == 1 and "evil.pt" in capsys.readouterr().err
    assert not marker.exists() and not (tmp_path / "out.pt2").exists()


def test_a_cached_dataset_with_pickled_objects_is_not_unpickled(tmp_path, marker):
    from sampan.data._cache import _read

    path = tmp_path / "train.npz"
    np.savez(path, images=np.array([Payload(marker)], dtype=object), labels=np.zeros(1))
    assert _read(path) is None  # treated as a damaged cache: regenerated, never unpickled
    assert not marker.exists()


def test_export_help_says_that_network_runs_code(capsys):
    """`--network module:Factory` imports the module: that is code, and the help says so."""
    from sampan.cli import main

    with pytest.raises(SystemExit) as done:
        main(["export", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "IMPORTS AND RUNS that Python module: name only code you trust (see docs/SECURITY.md)" in text


def test_a_planted_embedding_cache_is_not_unpickled(marker, data_home):
    """``ppmi_embeddings`` keeps its results in the data directory: a pickled array planted under the name it
    reads is ignored (recomputed and replaced), never unpickled."""
    from sampan.text import CharTokenizer, ppmi_embeddings

    texts = ["这本书很好看", "这部电影很好看", "质量不好", "服务不好"] * 5
    tok = CharTokenizer()
    tok.build_vocab(texts)
    honest = ppmi_embeddings(texts, tok, dim=4, window=2)
    (stored,) = (data_home / "cache" / "ppmi").glob("*.npy")
    np.save(stored, np.array([Payload(marker)], dtype=object), allow_pickle=True)
    assert torch.equal(ppmi_embeddings(texts, tok, dim=4, window=2), honest)
    assert not marker.exists()
    assert np.load(stored, allow_pickle=False).dtype == np.float32  # replaced by the honest result


def test_a_tokenizer_file_with_a_pattern_that_backtracks_for_ever_is_refused(tmp_path):
    """A tokenizer from someone else names its own regular expression; ``(\\w+\\s?)*$`` takes exponential time on a
    line of words that ends in a mark, and Python's ``re`` has no time limit: tokenizing one review would hang the
    kernel. A file's pattern must match in time linear in the text; one built in code is the author's own."""
    import json

    from sampan.text import Tokenizer, WordTokenizer

    path = tmp_path / "shared.json"
    tokenizer = WordTokenizer()
    tokenizer.build_vocab(["a b c"])
    tokenizer.save(path)
    text = "word " * 26 + "!"
    for slow in (r"(\w+\s?)*$", r"(a|aa)*$", r"(\w)\1", "x" * 201):
        data = json.loads(path.read_text())
        data["pattern"] = slow
        path.write_text(json.dumps(data))
        with pytest.raises(ValueError, match=r"a tokenizer file whose pattern matches in time linear.*"
                                             r"build the tokenizer in code"):
            Tokenizer.load(path)
    data["pattern"] = r"\w+|[^\w\s]"  # what WordTokenizer writes by default loads as before
    path.write_text(json.dumps(data))
    assert Tokenizer.load(path).tokenize(text)[-1] == "!"
