# SPDX-License-Identifier: Apache-2.0
"""Shards of input rows, fixed before Ray starts: shard k is rows
[k*size, (k+1)*size) of the input files in order (a shard never spans two
files), so a re-run finds the same shards whatever the cluster."""
import hashlib
import json
import os
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow.parquet as pq

# A row is a non-blank line of a JSONL file, or a row of a Parquet file.
FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".parquet": "parquet"}


@dataclass(frozen=True)
class Shard:
    shard: int
    file: str
    first_row: int  # within `file`
    num_rows: int
    offset: int = 0  # JSONL: the byte offset of `first_row`'s line

    @property
    def name(self) -> str:
        return f"shard-{self.shard:06d}"


def input_format(path: Path) -> str:
    if path.suffix not in FORMATS:
        raise ValueError(f"{path}: not JSONL or Parquet (one of "
                         f"{', '.join(sorted(FORMATS))})")
    return FORMATS[path.suffix]


def _jsonl_offsets(path: Path, size: int) -> tuple[int, list[int]]:
    """Rows of a JSONL file, and the byte offset of every size-th row."""
    rows, pos, offsets = 0, 0, []
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                if rows % size == 0:
                    offsets.append(pos)
                rows += 1
            pos += len(line)
    return rows, offsets


def plan(files: list[Path], size: int) -> list[Shard]:
    if size < 1:
        raise ValueError(f"shard size must be at least 1, not {size}")
    shards: list[Shard] = []
    for path in files:
        if input_format(path) == "parquet":
            schema = pq.read_schema(path)
            missing = {"id", "text"} - set(schema.names)
            if missing:
                raise ValueError(f"{path}: no column {', '.join(sorted(missing))}")
            rows = pq.ParquetFile(path).metadata.num_rows
            offsets = [0] * len(range(0, rows, size))
        else:
            rows, offsets = _jsonl_offsets(path, size)
        for k, first in enumerate(range(0, rows, size)):
            shards.append(Shard(len(shards), str(path.resolve()), first,
                                min(size, rows - first), offsets[k]))
    return shards


def sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def record(out: Path, shard: Shard, job: dict, verify: bool = True) -> dict | None:
    """The shard's manifest where the shard is done: the manifest exists
    (written last), is this shard's and this job's (model, settings,
    input), and names its Parquet file's sha256 (`verify`: hashed again).
    None otherwise: a shard cut short, of another job, or changed since."""
    manifest = out / f"{shard.name}.json"
    parquet = out / f"{shard.name}.parquet"
    if not manifest.is_file() or not parquet.is_file():
        return None
    try:
        rec = json.loads(manifest.read_text())
    except ValueError:
        return None
    if rec.get("shard") != asdict(shard) or rec.get("job") != job:
        return None
    if verify and rec.get("sha256") != sha256(parquet):
        return None
    return rec


def commit(path: Path, write) -> tuple[str, int]:
    """write(tmp), then rename onto `path`: readers see the old file or the
    whole new one (a rename within one POSIX file system). The temporary
    name is the attempt's own, so two attempts at one shard never write
    into one file. Returns the sha256 and the size of what was written."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    write(tmp)
    digest, size = sha256(tmp), tmp.stat().st_size
    os.replace(tmp, path)
    return digest, size
