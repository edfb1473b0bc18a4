# SPDX-License-Identifier: Apache-2.0
"""`make index`: encode a corpus with SPLADE on Ray Data over vLLM engine
actors, into Parquet shards and a manifest (docs/usage.md, "Encoding a
corpus on Ray"; the design: docs/rfcs/corpus-indexing-on-ray.md)."""
