import pytest
import torch

from sampan.text import BiGRU, CharTokenizer, TextClassificationDataset, TextCNN


@pytest.mark.parametrize("net", [TextCNN(30, 3, embed_dim=8, num_filters=4), BiGRU(30, 3, embed_dim=8, hidden_size=6)])
def test_classifiers_map_token_ids_to_logits(net):
    ids = torch.randint(1, 30, (5, 12))
    assert net(ids).shape == (5, 3)
    assert net(torch.tensor([[4, 0, 0, 0]])).shape == (1, 3)  # shorter than the widest kernel, mostly padding


@pytest.mark.parametrize("arch", [TextCNN, BiGRU])
def test_one_encoded_text_is_a_batch_of_one(arch):
    """Audit: net(tok.encode("很好")) -- ids [L] -- crashed with an IndexError."""
    torch.manual_seed(0)
    tok = CharTokenizer()
    tok.build_vocab(["很好", "不好"])
    net = arch(len(tok.vocab), 3, embed_dim=8).eval()
    with torch.no_grad():
        one = net(tok.encode("很好"))
        assert one.shape == (1, 3)
        torch.testing.assert_close(one, net(tok.encode(["很好"])))
    with pytest.raises(ValueError, match=r"`ids` to be an integer tensor of token ids.*dtype torch.float32"):
        net(tok.encode(["很好"]).float())


def test_bigru_ignores_padding():
    torch.manual_seed(0)
    net = BiGRU(20, 2, embed_dim=4, hidden_size=5).eval()
    short = torch.tensor([[3, 7, 9]])
    padded = torch.tensor([[3, 7, 9, 0, 0, 0]])
    with torch.no_grad():
        assert torch.allclose(net(short), net(padded), atol=1e-6)
        # the batch order does not matter either (enforce_sorted=False)
        batch = torch.tensor([[3, 7, 9, 0], [5, 6, 7, 8]])
        assert torch.allclose(net(batch)[0], net(short)[0], atol=1e-6)


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match=r"`vocab_size` to be an int >= 1. Received: vocab_size=0"):
        TextCNN(0, 2)
    with pytest.raises(ValueError, match=r"`kernel_sizes`.*Received: kernel_sizes=\(\)"):
        TextCNN(10, 2, kernel_sizes=())
    with pytest.raises(ValueError, match=r"`hidden_size`.*Received: hidden_size=-3"):
        BiGRU(10, 2, hidden_size=-3)


def _planted(n: int, positive: str, negative: str) -> tuple[list[str], list[int]]:
    """n texts of 8 filler characters with `positive` (label 1) or `negative` (label 0) inserted."""
    fillers = list("今天这个东西书质量物流价格一般还")
    g = torch.Generator().manual_seed(0)
    texts, labels = [], []
    for i in range(n):
        body = [fillers[j] for j in torch.randint(len(fillers), (8,), generator=g)]
        body.insert(int(torch.randint(8, (1,), generator=g)), positive if i % 2 else negative)
        texts.append("".join(body))
        labels.append(i % 2)
    return texts, labels


@pytest.mark.parametrize("arch", [TextCNN, BiGRU])
def test_classifiers_learn_a_keyword_rule(arch):
    """Positive texts contain 好, negative ones 差: both nets must separate them after a short fit."""
    torch.manual_seed(0)
    texts, labels = _planted(256, "好", "差")
    tok = CharTokenizer()
    tok.build_vocab(texts)
    ds = TextClassificationDataset(texts, labels, tok, max_len=12)
    net = arch(len(tok.vocab), 2, embed_dim=16)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    loader = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0))
    for _ in range(4):
        for ids, y in loader:
            loss = torch.nn.functional.cross_entropy(net(ids), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    with torch.no_grad():
        accuracy = (net(ds.ids).argmax(1) == ds.labels).float().mean().item()
    assert accuracy > 0.95


def test_textcnn_with_bigrams_trains_through_model_with_two_inputs():
    """Two aligned inputs (characters, bigrams) through Model.fit; the rule needs character order:
    positive texts say 好不差 ("good, not bad"), negative ones 差不好 — the same characters."""
    import sampan

    torch.manual_seed(0)
    texts, labels = _planted(320, "好不差", "差不好")
    chars, bigrams = CharTokenizer(), CharTokenizer(ngram=2)
    chars.build_vocab(texts)
    bigrams.build_vocab(texts)
    ds = TextClassificationDataset(texts, labels, [chars, bigrams], max_len=12)
    net = TextCNN(len(chars.vocab), 2, embed_dim=16, num_filters=16, ngram_vocab_size=len(bigrams.vocab))
    model = sampan.Model(net, inputs=[sampan.InputSpec([None, 12], "int64", "chars"),
                                      sampan.InputSpec([None, 12], "int64", "bigrams")])
    model.prepare(torch.optim.Adam(net.parameters(), lr=1e-2), torch.nn.CrossEntropyLoss(), sampan.metric.Accuracy())
    model.fit(ds, epochs=4, batch_size=32, verbose=0)
    assert model.evaluate(ds, batch_size=64, verbose=0)["acc"] >= 0.95
    with pytest.raises(ValueError, match="`ngram_ids`"):
        net(ds.inputs[0][:2])  # built with bigrams: they are required
    with pytest.raises(ValueError, match="the shape of ids"):
        net(ds.inputs[0][:2], ds.inputs[1][:2, :5])


@pytest.mark.parametrize("layout", ["transposed view", "contiguous"])
def test_textcnn_convolutions_match_conv1d_forward_and_backward(layout):
    """ChannelsLastConv1d convolves the transposed embeddings as a 2-D channels-last map: it must give nn.Conv1d's
    outputs and gradients (input, weight, bias), for the view TextCNN passes and for a contiguous [B, C, L]."""
    from sampan.text.models import ChannelsLastConv1d

    torch.manual_seed(0)
    ours = ChannelsLastConv1d(6, 5, 3)
    reference = torch.nn.Conv1d(6, 5, 3)
    reference.load_state_dict(ours.state_dict())
    embeddings = torch.randn(4, 9, 6)  # [B, L, C], as an embedding returns it
    inputs = []
    for _ in range(2):
        leaf = embeddings.clone().requires_grad_()
        view = leaf.transpose(1, 2)
        inputs.append((leaf, view if layout == "transposed view" else view.contiguous()))
    upstream = torch.randn(4, 5, 7)
    out = ours(inputs[0][1])
    expected = reference(inputs[1][1])
    assert out.shape == expected.shape == (4, 5, 7)
    torch.testing.assert_close(out, expected)
    (out * upstream).sum().backward()
    (expected * upstream).sum().backward()
    torch.testing.assert_close(inputs[0][0].grad, inputs[1][0].grad)
    torch.testing.assert_close(ours.weight.grad, reference.weight.grad)
    torch.testing.assert_close(ours.bias.grad, reference.bias.grad)
    assert isinstance(ours, torch.nn.Conv1d) and ours.state_dict().keys() == reference.state_dict().keys()
