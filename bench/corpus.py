# SPDX-License-Identifier: Apache-2.0
"""A deterministic benchmark corpus with a realistic length mix.

Half short queries (4-18 tokens), a quarter short passages (32-128) and a
quarter long passages (128-256), counted with [CLS] and [SEP]. Words are
whole-word entries of the BERT vocabulary, so each is exactly one token and
every text has exactly its drawn length.
"""
import random

from transformers import PreTrainedTokenizerBase

KINDS = ((0.50, 4, 18), (0.25, 32, 128), (0.25, 128, 256))


def _words(tokenizer: PreTrainedTokenizerBase) -> list[str]:
    vocab = tokenizer.get_vocab()
    # BERT's whole words start at id 1996, roughly by frequency.
    return [
        w for w, i in sorted(vocab.items(), key=lambda x: x[1])
        if 1996 <= i < 12000 and w.isalpha() and w.isascii() and len(w) > 1
    ]


def _text(rng: random.Random, words: list[str], weights: list[float],
          num_tokens: int) -> str:
    body = num_tokens - 2  # [CLS] ... [SEP]
    if body <= 18:  # a query: lower case words, maybe a question mark
        question = body > 3 and rng.random() < 0.3
        out = rng.choices(words, weights, k=body - question)
        return " ".join(out) + ("?" if question else "")
    out: list[str] = []
    while len(out) < body:  # sentences of 6-24 tokens, full stop included
        sentence = rng.choices(words, weights, k=rng.randint(5, 23))
        out += [sentence[0].capitalize(), *sentence[1:], "."]
    return " ".join(out[:body]).replace(" .", ".")


def make_corpus(tokenizer: PreTrainedTokenizerBase,
                n: int = 1000,
                seed: int = 0) -> list[str]:
    """`n` texts, the same for the same tokenizer vocabulary and seed."""
    rng = random.Random(seed)
    words = _words(tokenizer)
    weights = [1.0 / (r + 10) for r in range(len(words))]  # Zipf-like
    texts = []
    for _ in range(n):
        x, acc = rng.random(), 0.0
        for share, lo, hi in KINDS:
            acc += share
            if x < acc:
                break
        texts.append(_text(rng, words, weights, rng.randint(lo, hi)))
    return texts


def subset(texts: list[str], n: int) -> list[str]:
    """Every k-th text: `n` texts with the same length mix."""
    step = max(1, len(texts) // n)
    return texts[::step][:n]


def count_tokens(tokenizer: PreTrainedTokenizerBase,
                 texts: list[str]) -> list[int]:
    """Tokens per text, [CLS] and [SEP] included."""
    return [len(ids) for ids in tokenizer(texts)["input_ids"]]
