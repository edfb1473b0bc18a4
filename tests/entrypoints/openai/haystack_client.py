# SPDX-License-Identifier: Apache-2.0
"""Haystack's TEI sparse embedders (huggingface-api-haystack), unchanged,
against a served /embed_sparse. Runs in .venv-haystack, a client
application's environment apart from vLLM's (test_haystack.py starts it):

    python haystack_client.py URL JOB.json

JOB.json has "queries" and "documents"; the output (stdout, JSON) has each
query's and document's sparse embedding, through the sync and the async
paths, and what the server answered to a batch TEI also refuses."""
import asyncio
import json
import sys

import httpx
from haystack import Document
from haystack_integrations.components.embedders.huggingface_api import (
    HuggingFaceTEISparseDocumentEmbedder,
    HuggingFaceTEISparseTextEmbedder,
)


def as_json(embedding) -> dict:
    return {"indices": list(embedding.indices), "values": list(embedding.values)}


def main(url: str, job_path: str) -> None:
    with open(job_path) as f:
        job = json.load(f)
    queries = job["queries"]
    documents = [Document(content=text) for text in job["documents"]]
    out: dict = {}

    text_embedder = HuggingFaceTEISparseTextEmbedder(api_base_url=url)
    out["queries"] = [
        as_json(text_embedder.run(q)["sparse_embedding"]) for q in queries
    ]

    async def queries_async():
        results = await asyncio.gather(
            *(text_embedder.run_async(q) for q in queries))
        return [as_json(r["sparse_embedding"]) for r in results]

    out["queries_async"] = asyncio.run(queries_async())

    # Its defaults: 32 documents a request, up to 4 requests at once.
    document_embedder = HuggingFaceTEISparseDocumentEmbedder(api_base_url=url)
    embedded = document_embedder.run(documents)["documents"]
    out["documents"] = [as_json(d.sparse_embedding) for d in embedded]
    embedded = asyncio.run(document_embedder.run_async(documents))["documents"]
    out["documents_async"] = [as_json(d.sparse_embedding) for d in embedded]

    # What TEI refuses too: more than 32 inputs in one request.
    too_many = HuggingFaceTEISparseDocumentEmbedder(api_base_url=url,
                                                    batch_size=33)
    try:
        too_many.run(documents[:33])
        out["refused"] = None
    except httpx.HTTPStatusError as error:
        out["refused"] = {"status": error.response.status_code,
                          "body": error.response.json(),
                          "message": str(error)}
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
