# SPDX-License-Identifier: Apache-2.0
"""Encoding throughput of one SPLADE deployment: the corpus's documents
through /embed_sparse, BATCH texts a request, requests spread round-robin
over the given servers (one URL: one server, whatever its data
parallelism). Prints and returns documents/s, the median of --rounds.

    python -m hybrid.scale LABEL OUT.json URL [URL ...] [--docs N]
        [--log SERVER.log ...]

The cores each engine was bound to are read from the servers' logs (vLLM
prints them at start), so the page says what ran, not what was asked.
"""
import argparse
import itertools
import json
import re
import threading
from pathlib import Path

from hybrid import clients, corpus


def bound(log: str) -> list[str]:
    """Each engine's cores, as its server's log says ("core ids=[0]")."""
    return re.findall(r"core ids=(\[[0-9, ]*\])", Path(log).read_text())


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("label")
    p.add_argument("out")
    p.add_argument("urls", nargs="+")
    p.add_argument("--docs", type=int, default=2000)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--log", action="append", default=[])
    args = p.parse_args(argv)
    texts = [d.text for d in corpus.load_task(args.docs, 0).docs]
    servers = itertools.cycle(args.urls)
    lock = threading.Lock()

    def embed(batch):
        with lock:
            url = next(servers)
        return clients.embed_sparse(url, batch)

    warm = [texts[:clients.BATCH]] * args.concurrency * len(args.urls)
    clients.encode_all(embed, sum(warm, []), args.concurrency)  # every rank
    rates = sorted(len(texts) / clients.encode_all(embed, texts,
                                                   args.concurrency)[1]
                   for _ in range(args.rounds))
    row = {"label": args.label, "servers": len(args.urls),
           "documents": len(texts), "rounds": rates,
           "docs_per_s": rates[len(rates) // 2],
           "cores": [bound(log) for log in args.log]}
    out = Path(args.out)
    rows = json.loads(out.read_text()) if out.exists() else []
    rows = [r for r in rows if r["label"] != args.label] + [row]
    out.write_text(json.dumps(rows, indent=1))
    print(f"scale: {args.label}: {row['docs_per_s']:.1f} documents/s "
          f"(median of {rates}, {len(texts)} documents a round)", flush=True)
    return row


if __name__ == "__main__":
    main()
