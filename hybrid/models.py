# SPDX-License-Identifier: Apache-2.0
"""The eval's model folders under build/models (fetched by `make setup`).

splade-tiny is a plain BertForMaskedLM folder; the eval serves it the way
SPLADE models are published today, as a sentence-transformers SparseEncoder
folder (MLMTransformer + SpladePooling("max")), which vLLM serves with no
flags and sentence-transformers loads as the reference."""
from pathlib import Path

from tests.checkpoints import ensure_folder, save_sparse_encoder_of

MODELS = Path("build/models")
SPLADE = MODELS / "splade-tiny-sparse-encoder"
DENSE = MODELS / "all-MiniLM-L6-v2"


def ensure_splade(source: Path = MODELS / "splade-tiny",
                  out: Path = SPLADE) -> Path:
    """`source` saved once as a SparseEncoder folder by sentence-transformers."""
    if not (source / "model.safetensors").is_file():
        raise SystemExit(f"eval: {source} is missing: run `make checkpoint`")
    return ensure_folder(save_sparse_encoder_of, str(source), out)


def check_dense(folder: Path = DENSE) -> Path:
    if not (folder / "model.safetensors").is_file():
        raise SystemExit(f"eval: {folder} is missing: run "
                         "scripts/fetch-dense-model.sh (make setup does)")
    return folder


if __name__ == "__main__":
    print(ensure_splade(), check_dense())
