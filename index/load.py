# SPDX-License-Identifier: Apache-2.0
"""Reading `make index`'s output back: the manifest, checked against the
model folder a caller encodes its queries with, and the vectors by id."""
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from index.shards import sha256


def manifest(out: Path, model: Path | None = None) -> dict:
    """The finished index's manifest; with `model`, refused unless the
    index was encoded from a folder with the same files (the same sha256)."""
    path = Path(out) / "manifest.json"
    if not path.is_file():
        raise SystemExit(f"{out}: no manifest.json; run `make index` to the end")
    m = json.loads(path.read_text())
    if model is not None:
        files = {str(p.relative_to(model)): sha256(p)
                 for p in sorted(Path(model).rglob("*")) if p.is_file()}
        if files != m["model_files"]:
            changed = sorted(set(files.items()) ^ set(m["model_files"].items()))
            raise SystemExit(
                f"{out} was encoded with {m['model']}, not with the files of "
                f"{model}: {sorted({name for name, _ in changed})} differ")
    return m


def rows(out: Path) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """(id, indices, values) of every encoded row, shard by shard: the
    shards the manifest lists, each of the size it lists (a shard rewritten
    since, by a later run, is refused)."""
    for shard in manifest(out)["shards"]:
        path = Path(out) / f"{shard['name']}.parquet"
        if path.stat().st_size != shard["bytes"]:
            raise SystemExit(f"{path} changed since {out}/manifest.json was written")
        table = pq.read_table(path)
        yield from zip(table["id"].to_pylist(),
                       table["indices"].to_numpy(zero_copy_only=False),
                       table["values"].to_numpy(zero_copy_only=False))


def vectors(out: Path, ids: list[str]) -> list[dict[int, float]]:
    """The vectors of `ids`, in that order, as {token id: weight}; refused
    where an id is not in the index (a row it refused, or another corpus)."""
    wanted = set(ids)
    found = {id_: dict(zip(idx.tolist(), val.tolist()))
             for id_, idx, val in rows(out) if id_ in wanted}
    missing = [i for i in ids if i not in found]
    if missing:
        raise SystemExit(f"{out} has no vector for {len(missing)} of the "
                         f"{len(ids)} documents (first: {missing[:5]}); see "
                         f"its refused.jsonl")
    return [found[i] for i in ids]
