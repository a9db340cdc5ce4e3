"""The small character Transformer: masking, padding, the MLM loss, and the zoo round trip."""
import pytest
import torch

from sampan.errors import CheckpointError
from sampan.text import (MASK_TOKEN, CharTokenizer, CharTransformer, MaskedLMHead, TransformerClassifier,
                         TransformerConfig, Vocab, load_pretrained, mask_tokens, save_pretrained)


def _tiny(vocab_size=20, **kw):
    torch.manual_seed(0)
    return CharTransformer(TransformerConfig(vocab_size=vocab_size, dim=16, heads=2, layers=1, max_len=12, **kw))


def test_mask_tokens_follows_bert_15_80_10_10():
    ids = torch.randint(3, 500, (400, 64))
    ids[:, 50:] = 0  # padding is never chosen
    ids[:, 0] = 1    # nor <unk>
    inputs, labels = mask_tokens(ids, 2, 500, generator=torch.Generator().manual_seed(0))
    chosen = labels != -100
    real = ids >= 3
    assert not chosen[ids < 2].any()
    assert abs(chosen.sum().item() / real.sum().item() - 0.15) < 0.01
    assert torch.equal(labels[chosen], ids[chosen])
    assert torch.equal(inputs[~chosen], ids[~chosen])
    masked = (inputs[chosen] == 2).float().mean().item()
    kept = (inputs[chosen] == ids[chosen]).float().mean().item()
    assert abs(masked - 0.8) < 0.02 and abs(kept - 0.1) < 0.02  # a random draw equal to the original counts as kept
    replaced = inputs[chosen & (inputs != 2) & (inputs != ids)]
    assert replaced.numel() > 0 and replaced.min() >= 2 and replaced.max() < 500 and not (replaced == 2).any()


def test_mask_tokens_is_reproducible_and_checks_its_arguments():
    ids = torch.randint(3, 50, (4, 10))
    a = mask_tokens(ids, 2, 50, generator=torch.Generator().manual_seed(1))
    b = mask_tokens(ids, 2, 50, generator=torch.Generator().manual_seed(1))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    with pytest.raises(ValueError, match=r"Expected `rate` to be a share in \(0, 1\]. Received: rate=1.5"):
        mask_tokens(ids, 2, 50, rate=1.5)
    with pytest.raises(ValueError, match=r"`mask_id`.*Received: mask_id=0.*HINT: pass mask_id=tokenizer.vocab"):
        mask_tokens(ids, 0, 50)


def test_padding_changes_nothing_for_the_classifier():
    net = TransformerClassifier(_tiny(dropout=0.0), 2).eval()
    short = torch.tensor([[5, 6, 7, 0]])
    longer = torch.tensor([[5, 6, 7, 0, 0, 0, 0, 0]])
    with torch.no_grad():
        assert torch.allclose(net(short), net(longer), atol=1e-5)
        assert not torch.allclose(net(short), net(torch.tensor([[5, 6, 8, 0]])), atol=1e-5)


def test_mlm_loss_scores_only_the_labelled_positions_and_learns():
    head = MaskedLMHead(_tiny(dropout=0.0))
    ids = torch.randint(3, 20, (8, 12))
    labels = torch.full_like(ids, -100)
    labels[:, 4] = ids[:, 4]
    inputs = ids.clone()
    inputs[:, 4] = 2
    loss, _ = head.loss(inputs, labels)
    expected = torch.nn.functional.cross_entropy(head(inputs)[:, 4], ids[:, 4])
    assert torch.allclose(loss, expected, atol=1e-5)
    # the masked character is the one two positions back: learnable from context only
    ids[:, 4] = ids[:, 2]
    labels[:, 4] = ids[:, 4]
    optimizer = torch.optim.Adam(head.parameters(), lr=1e-2)
    for _ in range(150):
        loss, acc = head.loss(inputs.copy_(ids).index_fill_(1, torch.tensor([4]), 2), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert acc.item() == 1.0


def test_config_and_inputs_are_checked():
    with pytest.raises(ValueError, match=r"Expected `heads` to be a divisor of dim=10"):
        TransformerConfig(vocab_size=5, dim=10, heads=4)
    with pytest.raises(ValueError, match=r"at most max_len=12 positions"):
        _tiny()(torch.ones(1, 13, dtype=torch.int64))


def test_zoo_round_trip_keeps_weights_and_vocabulary():
    tok = CharTokenizer(Vocab([MASK_TOKEN, *"人民日报新年"]))
    enc = _tiny(vocab_size=len(tok.vocab))
    path = save_pretrained(enc, tok, "tiny-zh")
    assert path.name == "tiny-zh.pt" and path.parent.name == "zoo"
    again, tok2 = load_pretrained("tiny-zh")
    assert tok2.vocab == tok.vocab and again.config == enc.config
    assert all(torch.equal(a, b) for a, b in zip(enc.state_dict().values(), again.state_dict().values()))


def test_zoo_errors_say_what_to_do():
    with pytest.raises(FileNotFoundError, match=r"No pretrained Transformer 'absent'.*sampan path run --lesson transformer_zh"):
        load_pretrained("absent")
    tok = CharTokenizer(Vocab(["a", "b"]))
    with pytest.raises(ValueError, match=r"Expected `tokenizer` to be a vocabulary of 20 tokens"):
        save_pretrained(_tiny(), tok, "tiny")
    path = save_pretrained(_tiny(vocab_size=4), tok, "tiny")
    torch.save({"format": "something else"}, path)
    with pytest.raises(CheckpointError, match="Cannot read the pretrained Transformer"):
        load_pretrained("tiny")


def test_a_blank_row_gets_finite_logits_in_inference():
    """An all-padding row (a blank review) under eval + no_grad, where torch runs its fused kernel."""
    net = TransformerClassifier(_tiny(dropout=0.0), 2).eval()
    ids = torch.tensor([[5, 6, 7, 0], [0, 0, 0, 0]])
    with torch.no_grad():
        fused = net(ids)
        hidden = net.encoder(ids)
    assert torch.isfinite(fused).all() and torch.isfinite(hidden).all()
    torch.testing.assert_close(fused[1], net.head.bias.detach())  # it averages nothing: the head's bias
    torch.testing.assert_close(fused, net(ids).detach(), rtol=1e-5, atol=1e-5)  # the same as the unfused path
    with torch.no_grad():
        torch.testing.assert_close(net(ids[:1]), fused[:1])  # the other rows are untouched
