"""Checks, hints and reference solution of the lesson sentiment_reviews_zh (hidden from the notebook).

``predict_sentiment`` is called on reviews drawn at random from the held-out splits, on a single review, on
reviews longer than ``MAX_LEN`` and on short sentences of its own, with the network left in training mode
(dropout on) as ``fit`` leaves it; its answers are compared with predictions computed here.
"""
import random

import torch

from sampan.path.exercise import Exercise, Incorrect

_OWN = ("质量很好，物流也快，非常满意", "太差了，用了两天就坏了，再也不买了", "一般般吧", "包装破损，客服也不理人",
        "性价比很高，推荐购买", "失望")


def _expected(net, chars, bigrams, max_len, classes, texts):
    device = next(net.parameters()).device
    was_training = net.training
    net.eval()
    with torch.no_grad():
        logits = net(chars.encode(texts, max_len).to(device), bigrams.encode(texts, max_len).to(device))
    net.train(was_training)
    return [classes[i] for i in logits.argmax(dim=1).tolist()]


class predict_sentiment(Exercise):
    hints = (
        {"en": "Do what fit and predict did for you: encode both inputs as in training, switch dropout off, "
               "turn gradients off, put the ids on the network's device, and map each argmax to a class name.",
         "zh": "把 fit 和 predict 替你做的事自己做一遍：像训练时那样编码两路输入，关掉 dropout，关掉梯度，"
               "把 id 放到网络所在的设备上，再把每个 argmax 映射成类别名。"},
        {"en": "net.eval(); with torch.no_grad(): logits = net(chars.encode(texts, MAX_LEN), "
               "bigrams.encode(texts, MAX_LEN)) — then [test.classes[i] for i in logits.argmax(dim=1).tolist()].",
         "zh": "net.eval()；在 with torch.no_grad(): 中计算 logits = net(chars.encode(texts, MAX_LEN), "
               "bigrams.encode(texts, MAX_LEN))——再返回 [test.classes[i] for i in logits.argmax(dim=1).tolist()]。"},
    )
    solution = '''
def predict_sentiment(texts):
    texts = list(texts)
    device = next(net.parameters()).device
    net.eval()
    with torch.no_grad():
        logits = net(chars.encode(texts, MAX_LEN).to(device), bigrams.encode(texts, MAX_LEN).to(device))
    return [test.classes[i] for i in logits.argmax(dim=1).tolist()]
'''

    def verify(self, predict_sentiment, net=None, tokenizers=None, max_len=None, classes=None, reviews=()):
        chars, bigrams = tokenizers
        rng = random.Random()
        reviews = list(reviews)
        longer = [t for t in reviews if len(t) > max_len]
        cases = [rng.sample(reviews, min(200, len(reviews))), [rng.choice(reviews)],
                 rng.sample(longer, min(5, len(longer))) + rng.sample(_OWN, 3)]
        for texts in cases:
            net.train()  # as fit leaves it: dropout on
            expected = _expected(net, chars, bigrams, max_len, classes, texts)
            net.train()
            got = predict_sentiment(list(texts))
            if not isinstance(got, list) or len(got) != len(texts):
                raise Incorrect({"en": f"for {len(texts)} texts it must return a list of {len(texts)} labels, "
                                       f"got {type(got).__name__}" + (f" of {len(got)}" if isinstance(got, (list, tuple)) else ""),
                                 "zh": f"对 {len(texts)} 条文本，它必须返回包含 {len(texts)} 个标签的列表，"
                                       f"得到的是 {type(got).__name__}"})
            if not set(got) <= set(classes):
                raise Incorrect({"en": f"each label must be one of {list(classes)}, got {sorted(set(got) - set(classes))[:3]}",
                                 "zh": f"每个标签都必须是 {list(classes)} 之一，得到的是 {sorted(set(got) - set(classes))[:3]}"})
            agree = sum(g == e for g, e in zip(got, expected)) / len(texts)
            if agree < 1.0:
                raise Incorrect({"en": f"on {len(texts)} reviews it agrees with the trained network in evaluation mode "
                                       f"on {agree:.0%}, not 100% (the check hands it the network in training mode, "
                                       "as fit leaves it)",
                                 "zh": f"在 {len(texts)} 条评论上，它与评估模式下训练好的网络只有 {agree:.0%} 一致，"
                                       "而不是 100%（检查交给它的网络处于训练模式，就像 fit 结束后那样）"})
