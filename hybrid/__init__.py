# SPDX-License-Identifier: Apache-2.0
"""Hybrid retrieval end to end: vLLM serves SPLADE and a dense model, real
engines index their vectors, and known-item queries measure the rankings
(`make eval`, docs/eval.md)."""
