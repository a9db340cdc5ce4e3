"""Checks, hints and reference solution of the lesson transformer_zh (hidden from the notebook).

The check calls the learner's whole-word masking on the example sentence and on segmented lines of
People's Daily drawn at random (and at a masking rate the notebook never shows), many times over, and
checks every output against the input word by word.
"""
import random

from sampan.data import load_dataset
from sampan.path.exercise import Exercise, Incorrect

MASK = "[MASK]"


def _hidden_sentences(count: int = 40) -> list[list[str]]:
    corpus = load_dataset("peoples-daily", "val", words=True)
    rng = random.Random()
    picks = [corpus[i] for i in rng.sample(range(len(corpus)), count)]
    return [words for words in picks if sum(map(len, words)) >= 8][:count]


def _wrong(en: str, zh: str) -> Incorrect:
    return Incorrect({"en": en, "zh": zh})


def _check_one(words: list[str], out) -> tuple[int, int, int]:
    """Checks one call's output; returns (characters, masked characters, masked characters in multi-character words)."""
    if not isinstance(out, tuple) or len(out) != 2:
        raise _wrong(f"mask_whole_words must return a tuple (chars, labels), got {type(out).__name__}",
                     f"mask_whole_words 必须返回元组 (chars, labels)，得到的是 {type(out).__name__}")
    chars, labels = (list(x) for x in out)
    text = "".join(words)
    if len(chars) != len(text) or len(labels) != len(text):
        raise _wrong(f"for {len(text)} characters, chars and labels must both have {len(text)} items; "
                     f"got {len(chars)} and {len(labels)}",
                     f"输入共有 {len(text)} 个字，chars 和 labels 都应有 {len(text)} 项，实际是 {len(chars)} 和 {len(labels)}")
    masked = in_long = 0
    position = 0
    for word in words:
        span = range(position, position + len(word))
        hidden = [chars[i] == MASK for i in span]
        if any(hidden) and not all(hidden):
            raise _wrong(f"the word {word!r} is masked only in part: mask every character of a chosen word, or none",
                         f"词语「{word}」只被遮盖了一部分：选中的词要整个遮盖，没选中的一个字也不遮")
        for i, ch in zip(span, word):
            if hidden[0] and labels[i] != ch:
                raise _wrong(f"a masked position must have the original character as its label: expected {ch!r}, "
                             f"got {labels[i]!r}", f"被遮盖位置的标签应是原来的字：应为 {ch!r}，得到 {labels[i]!r}")
            if not hidden[0] and (chars[i] != ch or labels[i] is not None):
                raise _wrong(f"an unmasked position must keep its character and have the label None: at {ch!r} got "
                             f"({chars[i]!r}, {labels[i]!r})", f"未遮盖的位置应保留原字、标签为 None：在「{ch}」处得到 "
                             f"({chars[i]!r}, {labels[i]!r})")
        if hidden[0]:
            masked += len(word)
            in_long += len(word) if len(word) > 1 else 0
        position += len(word)
    return len(text), masked, in_long


class mask_whole_words(Exercise):
    hints = (
        {"en": "Decide once per word, not once per character: draw one random number per word and compare it "
               "with rate; then walk through that word's characters.",
         "zh": "每个词只做一次决定，而不是每个字一次：为每个词抽一个随机数与 rate 比较，再逐字处理这个词。"},
        {"en": "for word in words: chosen = random.random() < rate; then for each character ch of the word append "
               "'[MASK]' if chosen else ch to chars, and ch if chosen else None to labels.",
         "zh": "for word in words: chosen = random.random() < rate；然后对词中每个字 ch，"
               "向 chars 追加 '[MASK]' if chosen else ch，向 labels 追加 ch if chosen else None。"},
    )
    solution = '''
import random

def mask_whole_words(words, rate=0.15):
    chars, labels = [], []
    for word in words:
        chosen = random.random() < rate
        for ch in word:
            chars.append("[MASK]" if chosen else ch)
            labels.append(ch if chosen else None)
    return chars, labels
'''

    def verify(self, mask_whole_words):
        example = ["中国", "人民", "银行", "今天", "宣布", "，", "下调", "存款", "利率", "。"]
        sentences = [example, *_hidden_sentences()]
        patterns = set()
        for _ in range(30):
            chars, _labels = mask_whole_words(list(example), rate=0.3)
            patterns.add(tuple(c == MASK for c in chars))
        if len(patterns) < 3:
            raise _wrong("30 calls on the same sentence masked the same words almost every time: choose the words at random",
                         "对同一句话调用 30 次，遮盖的几乎总是相同的词：要随机选择词语")
        for rate in (0.15, random.choice([0.3, 0.4, 0.5])):
            total = masked = in_long = 0
            for _ in range(4):
                for words in sentences:
                    n, m, long_ = _check_one(words, mask_whole_words(list(words), rate=rate))
                    total, masked, in_long = total + n, masked + m, in_long + long_
            share = masked / total
            if not 0.7 * rate <= share <= 1.4 * rate:
                raise _wrong(f"with rate={rate} it masked {share:.1%} of the characters over many sentences; expected "
                             f"about {rate:.0%} (use the rate argument)",
                             f"rate={rate} 时，多句话上共遮盖了 {share:.1%} 的字，应约为 {rate:.0%}（请使用参数 rate）")
            if in_long == 0:
                raise _wrong("no word of two or more characters was ever masked: every word must be a candidate",
                             "从来没有遮盖过两个字以上的词：每个词都应是候选")
