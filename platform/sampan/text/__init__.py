"""Text: tokenizers with vocabularies, text classifiers, a token-id dataset, pretrained embeddings, a small
Transformer pretrained by masked-character prediction.

Example:
    >>> import sampan.text as text
    >>> tok = text.CharTokenizer()
    >>> _ = tok.build_vocab(["这本书很好", "质量太差"])
    >>> ds = text.TextClassificationDataset(["很好", "太差"], [1, 0], tok, max_len=8)
    >>> net = text.TextCNN(len(tok.vocab), num_classes=2)
    >>> net(ds.ids).shape
    torch.Size([2, 2])
"""
from sampan.text.corpus import peoples_daily
from sampan.text.dataset import TextClassificationDataset
from sampan.text.embeddings import ppmi_embeddings
from sampan.text.models import BiGRU, TextCNN
from sampan.text.tokenizer import CharTokenizer, Tokenizer, Vocab, WordTokenizer
from sampan.text.transformer import (MASK_TOKEN, CharTransformer, MaskedLMHead, TransformerClassifier,
                                     TransformerConfig, load_pretrained, mask_tokens, save_pretrained)

__all__ = [
    "BiGRU",
    "CharTokenizer",
    "CharTransformer",
    "MASK_TOKEN",
    "MaskedLMHead",
    "TextCNN",
    "TextClassificationDataset",
    "Tokenizer",
    "TransformerClassifier",
    "TransformerConfig",
    "Vocab",
    "WordTokenizer",
    "load_pretrained",
    "mask_tokens",
    "peoples_daily",
    "ppmi_embeddings",
    "save_pretrained",
]
