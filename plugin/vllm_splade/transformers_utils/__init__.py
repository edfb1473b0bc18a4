# SPDX-License-Identifier: Apache-2.0
"""The series' vllm/transformers_utils/sparse_encoder.py, copied into the
wheel by scripts/vendor-series.py."""
