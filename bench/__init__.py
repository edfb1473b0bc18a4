# SPDX-License-Identifier: Apache-2.0
"""Benchmarks behind `make bench` (scripts/bench.sh)."""
