"""Text: tokenizers with vocabularies, text classifiers, a token-id dataset, pretrained embeddings.

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

__all__ = [
    "BiGRU",
    "CharTokenizer",
    "TextCNN",
    "TextClassificationDataset",
    "Tokenizer",
    "Vocab",
    "WordTokenizer",
    "peoples_daily",
    "ppmi_embeddings",
]
