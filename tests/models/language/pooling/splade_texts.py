# SPDX-License-Identifier: Apache-2.0
"""A fixed, varied text set for SPLADE parity tests."""

_SENTENCES = [
    "Sparse retrieval scores documents by the overlap of weighted terms.",
    "SPLADE expands a text with related vocabulary terms and weights them.",
    "An inverted index stores, for every term, the documents that use it.",
    "The masked language model head predicts a score for each vocabulary "
    "entry at every position of the input.",
    "Max pooling keeps, for every term, the largest weight seen in the text.",
    "Engines such as OpenSearch, Elasticsearch and Vespa accept sparse "
    "vectors as lists of token and weight pairs.",
]


def long_passage(n_sentences: int) -> str:
    return " ".join(_SENTENCES[i % len(_SENTENCES)]
                    for i in range(n_sentences))


PARITY_TEXTS: list[str] = [
    # One-word queries.
    "aging", "Paris", "python", "SPLADE", "x", "?",
    # Questions.
    "what causes aging fast",
    "how do vaccines train the immune system?",
    "Who wrote 'Pride and Prejudice'?",
    "when was the eiffel tower built",
    "why is the sky blue during the day but red at sunset",
    "is coffee bad for your heart",
    "what is the difference between a virus and a bacterium",
    # Mixed case, punctuation, symbols.
    "ThE QuIcK bRoWn FoX",
    "HELLO WORLD!!!",
    "e-mail: someone@example.com; phone: +1 (555) 010-9999",
    "C++ vs. C# vs. F#: which one?",
    "well... maybe -- or maybe not; who knows?!",
    "<html><body>tags & entities &amp; more</body></html>",
    "key=value, other_key=other-value / path/to/file.txt",
    "[CLS] [SEP] [MASK] [PAD] written as plain text",
    # Digits and numbers.
    "2024",
    "3.14159 is pi and 2.71828 is e",
    "Order #123456 shipped on 2023-11-05 at 14:30 UTC",
    "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
    "$1,000,000.00 or 1e6 dollars",
    # Accents and non-Latin scripts.
    "café crème brûlée à la carte",
    "Ångström, Øresund, naïve façade, señor, jalapeño",
    "Zürich und München sind Städte in Mitteleuropa",
    "Привет, как дела?",
    "東京は日本の首都です",
    "北京欢迎你",
    "مرحبا بالعالم",
    "שלום עולם",
    "नमस्ते दुनिया",
    "Γειά σου Κόσμε",
    "안녕하세요 세계",
    "emoji 😀 and symbols ★ ✓ → ∞",
    # Repeated words.
    "the the the the the the the the",
    "buffalo buffalo buffalo buffalo buffalo buffalo buffalo buffalo",
    " ".join(["data"] * 50),
    "repeat after me: sparse sparse dense sparse dense dense",
    # Sentences and passages of growing length.
    "The capital of France is Paris.",
    "Learned sparse retrieval combines the efficiency of inverted indexes "
    "with the quality of neural ranking models.",
    long_passage(2),
    long_passage(4),
    long_passage(8),
    long_passage(12),
    long_passage(16),
    long_passage(20),
    # Near the 512-token limit of the checkpoint (checked by the tests).
    long_passage(30),
    # Whitespace and control characters inside text.
    "tabs\tand\nnewlines\r\nmixed   spaces",
    "zero\u200bwidth and non\u00a0breaking spaces",
]
