# SPDX-License-Identifier: Apache-2.0
"""The eval's corpus and queries, derived mechanically from Debian's package
descriptions (scripts/fetch-corpus.sh pins the file).

Known-item search: a package's synopsis (its one-line description) is the
query, and its long description, which never contains the synopsis line, is
the one relevant document. Only packages a synopsis can identify are asked:
a synopsis used by no other package (case-insensitive), a long description
whose first paragraph no other package shares (families such as foo,
foo-data and foo-doc repeat it) and of at least MIN_WORDS words. The other
documents of the corpus are drawn from every package with a long
description, siblings and near-duplicates included. No text here is
written by hand; both samples are seeded.
"""
import collections
import lzma
import random
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "build/downloads/bookworm-12.15-Translation-en.xz"
MIN_WORDS = 20
SEED = 0


@dataclass(frozen=True)
class Package:
    name: str
    synopsis: str
    paragraphs: tuple[str, ...]

    @property
    def text(self) -> str:
        return "\n".join(self.paragraphs)


def read_packages(path: Path = CORPUS) -> list[Package]:
    """Every entry of a Translation-en file, in file order. A long
    description's lines start with a space; " ." separates paragraphs."""
    packages = []
    with lzma.open(path, "rt", encoding="utf-8") as f:
        blocks = f.read().strip().split("\n\n")
    for block in blocks:
        fields = block.split("\n")
        name = next(line[9:] for line in fields if line.startswith("Package: "))
        at = next(i for i, line in enumerate(fields)
                  if line.startswith("Description-en: "))
        synopsis = fields[at][len("Description-en: "):].strip()
        paragraphs, lines = [], []
        for line in fields[at + 1:]:
            line = line.strip()
            if line == ".":
                if lines:
                    paragraphs.append(" ".join(lines))
                lines = []
            elif line:
                lines.append(line)
        if lines:
            paragraphs.append(" ".join(lines))
        packages.append(Package(name, synopsis, tuple(paragraphs)))
    return packages


def doc_ids(packages: list[Package]) -> list[str]:
    """An id per package: its name, and `name#2`, `name#3`... for the
    repeats of a name (15 names come twice in bookworm's file)."""
    seen: collections.Counter = collections.Counter()
    ids = []
    for p in packages:
        seen[p.name] += 1
        ids.append(p.name if seen[p.name] == 1 else f"{p.name}#{seen[p.name]}")
    return ids


def known_items(packages: list[Package]) -> list[Package]:
    """The packages whose synopsis identifies their long description."""
    synopses = collections.Counter(p.synopsis.lower() for p in packages)
    firsts = collections.Counter(p.paragraphs[0] for p in packages
                                 if p.paragraphs)
    return [
        p for p in packages
        if p.paragraphs and synopses[p.synopsis.lower()] == 1
        and firsts[p.paragraphs[0]] == 1 and len(p.text.split()) >= MIN_WORDS
    ]


@dataclass(frozen=True)
class Task:
    docs: list[Package]  # the corpus; doc i has id i
    queries: list[tuple[str, int]]  # (synopsis, id of its document)
    eligible: int  # packages a synopsis identifies
    packages: int  # entries in the file
    doc_ids: list[str]  # doc i's id in `make index`'s corpus (doc_ids)


def load_task(docs: int = 0, queries: int = 1000,
              path: Path = CORPUS) -> Task:
    """`queries` known items (a seeded sample of the eligible packages) in
    a corpus of `docs` long descriptions (0: every package that has one):
    the known items' own, and a seeded sample of all the others."""
    packages = read_packages(path)
    items = set(map(id, known_items(packages)))
    rng = random.Random(SEED)
    eligible = [i for i, p in enumerate(packages) if id(p) in items]
    asked = rng.sample(eligible, min(queries, len(eligible)))
    others = sorted(set(i for i, p in enumerate(packages) if p.paragraphs) -
                    set(asked))
    n_docs = len(others) + len(asked) if docs <= 0 else max(docs, len(asked))
    chosen = sorted(set(asked) | set(rng.sample(others, n_docs - len(asked))))
    doc_of = {i: d for d, i in enumerate(chosen)}  # corpus in file order
    task_queries = [(packages[i].synopsis, doc_of[i]) for i in sorted(asked)]
    ids = doc_ids(packages)
    return Task([packages[i] for i in chosen], task_queries, len(eligible),
                len(packages), [ids[i] for i in chosen])
