# SPDX-License-Identifier: Apache-2.0
"""A shard's input rows, and the rows the server would not encode as they
are: counted and reported, never dropped silently."""
import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from index.shards import Shard, input_format


@dataclass(frozen=True)
class Row:
    row: int  # the row's number in its file: its n-th non-blank line (JSONL)
    id: str | None
    text: str | None
    why: str | None = None  # set where the row is refused


def read_rows(shard: Shard) -> list[Row]:
    """The shard's rows. JSONL: one object with `id` and `text` a line;
    Parquet: columns `id` and `text`. A row that cannot be read keeps its
    row number and a reason."""
    path = Path(shard.file)
    if input_format(path) == "parquet":
        table = _parquet_rows(path, shard.first_row, shard.num_rows)
        return [
            _row(shard.first_row + i, id_, text)
            for i, (id_, text) in enumerate(zip(table["id"].to_pylist(),
                                                table["text"].to_pylist()))
        ]
    rows = []
    with open(path, "rb") as f:
        f.seek(shard.offset)
        for raw in f:
            if len(rows) == shard.num_rows:
                break
            if raw.strip():
                rows.append(_parse(shard.first_row + len(rows), raw))
    return rows


def _parquet_rows(path: Path, first: int, num: int) -> pa.Table:
    """Rows [first, first + num), reading only the row groups that hold
    them."""
    f = pq.ParquetFile(path)
    groups, start, skip = [], 0, 0
    for g in range(f.metadata.num_row_groups):
        n = f.metadata.row_group(g).num_rows
        if start + n > first and start < first + num:
            if not groups:
                skip = first - start
            groups.append(g)
        start += n
    return f.read_row_groups(groups, columns=["id", "text"]).slice(skip, num)


def _parse(row: int, raw: bytes) -> Row:
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return Row(row, None, None, f"not UTF-8 (byte {e.start})")
    try:
        record = json.loads(line.lstrip("\ufeff") if row == 0 else line)
    except ValueError as e:
        return Row(row, None, None, f"not JSON ({e.msg})")
    if not isinstance(record, dict):
        return Row(row, None, None, "not a JSON object")
    return _row(row, record.get("id"), record.get("text"))


def _row(row: int, id_, text) -> Row:
    if id_ is None:
        return Row(row, None, None, "no `id`")
    if isinstance(id_, bool) or not isinstance(id_, str | int):
        return Row(row, None, None, "`id` is not a string or an integer")
    id_ = str(id_)
    if not isinstance(text, str):
        return Row(row, id_, None, "`text` is not a string")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate escaped in the JSON ("\ud800"): /embed_sparse
        # refuses it as TEI does.
        return Row(row, id_, None, "not UTF-8 (a lone surrogate)")
    if not text:
        # TEI's and /embed_sparse's 400: "`inputs` cannot be empty".
        return Row(row, id_, None, "empty")
    return Row(row, id_, text)
