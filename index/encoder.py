# SPDX-License-Identifier: Apache-2.0
"""The engine actor: encodes whole shards with a vLLM `LLM` and commits
each as a Parquet file of sparse vectors and, last, its manifest."""
import importlib.metadata
import json
import os
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from index.rows import Row, read_rows
from index.shards import Shard, commit

# Documents an `LLM.encode` call: bounds what a shard holds as dense
# vectors (30,522 floats a document for BERT's vocabulary) at any time.
CHUNK = 1000


def versions() -> dict:
    """vLLM's and the plugin's distributions as this process imports them
    (the version names the build: +splade for the patched one)."""
    import vllm

    def version(dist: str) -> str | None:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {"vllm": version("vllm"), "vllm_file": vllm.__file__,
            "vllm_splade": version("vllm-splade")}


def route_params(route: str | None):
    """PoolingParams that pick an inference-free Router's route: the
    plugin's helper (the series' field, or `extra_kwargs` on stock vLLM)."""
    try:
        from vllm_splade.stock import route_pooling_params
    except ImportError:  # the patched build without the plugin
        from vllm import PoolingParams

        return PoolingParams(route=route) if route else None
    return route_pooling_params(route)


def document_prompt(model: str, name: str | None) -> str:
    """The sentence-transformers prompt documents take, as `encode_document`
    applies it: `name`'s, or "document"'s where the folder defines one."""
    path = Path(model) / "config_sentence_transformers.json"
    prompts = json.loads(path.read_text()).get("prompts", {}) if path.is_file() else {}
    if name is not None and name not in prompts:
        raise ValueError(f"{model} has no prompt {name!r} (it has {sorted(prompts)})")
    return prompts.get(name or "document", "")


class Prepared:
    """A shard's rows as the server would take them: token ids of the rows
    it encodes (a text longer than the model cut to its length by the
    tokenizer, special tokens kept, as TEI's `truncate` does), and the rows
    it refuses."""

    def __init__(self, rows: list[Row], tokenizer, max_len: int,
                 truncate: bool, lower_case: bool = False, prompt: str = ""):
        self.ids: list[str] = []
        self.token_ids: list[list[int]] = []
        self.refused: list[dict] = []
        self.truncated: list[str] = []
        readable = []
        for r in rows:
            if r.why is not None:
                self.refused.append({"row": r.row, "id": r.id, "why": r.why})
            else:
                readable.append(r)
        texts = [prompt + r.text for r in readable]
        if lower_case:
            texts = [t.lower() for t in texts]
        # Whole, to count and to find the long ones (no warning for those).
        full = tokenizer(texts, verbose=False)["input_ids"] if texts else []
        long = [i for i, t in enumerate(full) if len(t) > max_len]
        cut = {}
        if truncate and long:
            kept = tokenizer([texts[i] for i in long], truncation=True,
                             max_length=max_len)["input_ids"]
            cut = dict(zip(long, kept))
        for i, (r, t) in enumerate(zip(readable, full)):
            if len(t) > max_len and not truncate:
                # TEI without `truncate`: a 413 naming the limit.
                self.refused.append({
                    "row": r.row, "id": r.id,
                    "why": f"longer than the model ({len(t)} tokens > {max_len})"})
                continue
            if i in cut:
                self.truncated.append(r.id)
            self.ids.append(r.id)
            self.token_ids.append(cut.get(i, t))

    @property
    def tokens(self) -> int:
        return sum(map(len, self.token_ids))


class ShardEncoder:
    """A Ray Data actor: one vLLM engine; whole shards in, one summary row
    per shard out."""

    def __init__(self, model: str, out: str, llm_kwargs: dict, job: dict,
                 route: str = "document", truncate: bool = True,
                 prompt_name: str | None = None):
        import ray
        from vllm import LLM

        self.out = Path(out)
        self.job = job
        self.truncate = truncate
        self.prompt = document_prompt(model, prompt_name)
        self.llm = LLM(model=model, runner="pooling", **llm_kwargs)
        model_config = self.llm.llm_engine.model_config
        self.tokenizer = self.llm.get_tokenizer()
        self.max_len = model_config.max_model_len
        self.vocab_size = model_config.get_vocab_size()
        self.lower_case = bool((model_config.encoder_config or {}).get("do_lower_case"))
        routes = (getattr(model_config.hf_config, "sparse_router", None) or {}).get("routes", [])
        if routes and route not in routes:
            raise ValueError(f"{model} has the routes {routes}, not {route!r}")
        # An inference-free Router's route; none for other models.
        self.route = route if routes else None
        self.params = route_params(self.route)
        self.versions = versions()
        self.node = ray.get_runtime_context().get_node_id()
        self.actor = f"{ray.util.get_node_ip_address()}:{os.getpid()}"

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, list]:
        shards = [
            Shard(int(batch["shard"][i]), str(batch["file"][i]),
                  int(batch["first_row"][i]), int(batch["num_rows"][i]),
                  int(batch["offset"][i]))
            for i in range(len(batch["shard"]))
        ]
        rows = [self.encode(s) for s in shards]
        return {k: [r[k] for r in rows] for k in rows[0]}

    def sparse(self, token_ids: list[list[int]]) -> tuple[list, list]:
        """Each text's non-zero weights, CHUNK texts an engine call."""
        indices, values = [], []
        for start in range(0, len(token_ids), CHUNK):
            outputs = self.llm.encode(
                [{"prompt_token_ids": t} for t in token_ids[start:start + CHUNK]],
                self.params, use_tqdm=False, pooling_task="embed")
            for output in outputs:
                dense = output.outputs.data.to("cpu").float().numpy().reshape(-1)
                if dense.shape[0] != self.vocab_size:
                    raise RuntimeError(
                        f"a vector of {dense.shape[0]} weights from a model with "
                        f"{self.vocab_size} tokens: not a SPLADE model")
                nz = np.flatnonzero(dense)
                indices.append(nz.astype(np.int32))
                values.append(dense[nz])
        return indices, values

    def encode(self, shard: Shard) -> dict:
        start = time.perf_counter()
        p = Prepared(read_rows(shard), self.tokenizer, self.max_len,
                     self.truncate, self.lower_case, self.prompt)
        indices, values = self.sparse(p.token_ids)
        table = pa.table({
            "id": pa.array(p.ids, pa.string()),
            "indices": pa.array(indices, pa.list_(pa.int32())),
            "values": pa.array(values, pa.list_(pa.float32())),
        }).replace_schema_metadata({"vocab_size": str(self.vocab_size)})
        parquet = self.out / f"{shard.name}.parquet"
        digest, size = commit(parquet, lambda path: pq.write_table(table, path))
        seconds = time.perf_counter() - start
        summary = {
            "shard": asdict(shard), "job": self.job, "sha256": digest,
            "bytes": size,
            "documents": len(p.ids), "tokens": p.tokens,
            "refused": p.refused, "truncated": p.truncated,
            "max_model_len": self.max_len, "route": self.route,
            "prompt": self.prompt, "vocab_size": self.vocab_size,
            "seconds": seconds, "actor": self.actor, "node": self.node,
            **self.versions,
        }
        # Last: the shard is done once this file names the Parquet's sha256.
        commit(self.out / f"{shard.name}.json",
               lambda path: path.write_text(json.dumps(summary)))
        return {"shard": shard.shard, "documents": len(p.ids),
                "tokens": p.tokens, "refused": len(p.refused),
                "truncated": len(p.truncated), "seconds": seconds,
                "actor": self.actor}
