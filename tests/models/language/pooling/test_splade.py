# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""SPLADE sparse embeddings against sentence-transformers' SparseEncoder.

Runs on a seeded random BertForMaskedLM written here (no network needed:
gelu_new, a LayerNorm eps of its own, tied embeddings saved without a
decoder weight, [CLS]/[SEP] ids in its config) and on a pretrained SPLADE
checkpoint, by default naver/splade-cocondenser-ensembledistil; set
VLLM_TEST_SPLADE_MODEL to a local folder to run offline.
"""

import os
from functools import partial

import pytest
import torch

PRETRAINED = os.environ.get(
    "VLLM_TEST_SPLADE_MODEL", "naver/splade-cocondenser-ensembledistil"
)
OVERRIDES = {"architectures": ["BertSpladeSparseEmbeddingModel"]}

TEXTS = [
    "what causes aging fast",
    "The capital of France is Paris.",
    "[CLS] tokens and [SEP] tokens count too",
    "SPLADE " * 60,
    "1 2 3 4 5 6 7 8 9 10",
]

WORDS = [
    "the", "a", "of", "to", "and", "in", "is", "was", "for", "on", "that",
    "with", "as", "by", "at", "from", "it", "what", "causes", "aging", "fast",
    "capital", "france", "paris", "tokens", "count", "too", "splade", "sparse",
    "vector", "model", "query", "passage",
]  # fmt: skip


def save_random_splade(path: str, architecture: str = "BertForMaskedLM") -> None:
    """A seeded random masked-LM checkpoint with a WordPiece tokenizer."""
    import transformers
    from transformers import BertTokenizerFast

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += [str(i) for i in range(11)] + list("abcdefghijklmnopqrstuvwxyz")
    vocab += [w for w in WORDS if w not in vocab]
    vocab += ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"]
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")
    BertTokenizerFast(os.path.join(path, "vocab.txt")).save_pretrained(path)

    torch.manual_seed(0)
    model_class = getattr(transformers, architecture)
    config = model_class.config_class(
        vocab_size=len(vocab) + 3,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=130,
        hidden_act="gelu_new",
        layer_norm_eps=1e-6,
        pad_token_id=0,
        cls_token_id=2,
        sep_token_id=3,
    )
    model = model_class(config)
    head = model.lm_head if hasattr(model, "lm_head") else model.cls
    for p in head.parameters():
        torch.nn.init.normal_(p, std=0.5)
    model.save_pretrained(path)


@pytest.fixture(scope="module")
def random_splade(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("random-splade"))
    save_random_splade(path)
    return path


def sentence_transformers_vectors(model: str, texts: list[str]) -> torch.Tensor:
    from sentence_transformers import SparseEncoder

    encoder = SparseEncoder(model, device="cpu")
    return encoder.encode(texts, convert_to_tensor=True).to_dense().float()


def embed(llm, texts: list[str]) -> torch.Tensor:
    outputs = llm.encode(texts, pooling_task="embed")
    return torch.stack([o.outputs.data for o in outputs])


def vllm_vectors(model: str, texts: list[str], **kwargs) -> torch.Tensor:
    from vllm import LLM

    kwargs.setdefault("hf_overrides", OVERRIDES)
    llm = LLM(
        model=model,
        runner="pooling",
        dtype="float32",
        enforce_eager=True,
        **kwargs,
    )
    try:
        return embed(llm, texts)
    finally:
        del llm


def test_checkpoint_without_head_fails_naming_it(
    random_splade: str, tmp_path, monkeypatch
):
    """A checkpoint with no masked-LM head is no SPLADE model: loading fails
    and names the missing head weights, rather than serving noise."""
    import shutil

    from safetensors.torch import load_file, save_file

    # In process, the loader's error reaches the caller, not only the engine
    # core's "initialization failed".
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    path = tmp_path / "no-head"
    shutil.copytree(random_splade, path)
    weights = load_file(path / "model.safetensors")
    save_file(
        {k: v for k, v in weights.items() if not k.startswith("cls.")},
        path / "model.safetensors",
    )
    with pytest.raises(Exception, match=r"mlm_head\.dense\.weight"):
        vllm_vectors(str(path), TEXTS[:1])


def load_weights(model: torch.nn.Module, weights: list[tuple[str, torch.Tensor]]):
    # Module level, so that it pickles by name for the worker processes.
    return model.load_weights(weights)


def test_partial_weight_updates(random_splade: str, monkeypatch):
    """load_weights with one tensor at a time (as RLHF weight sync does)
    loads just that tensor: no error for the rest of the head."""
    from safetensors.torch import load_file

    from vllm import LLM

    monkeypatch.setenv("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
    name = "cls.predictions.transform.dense.weight"
    weight = load_file(os.path.join(random_splade, "model.safetensors"))[name]
    llm = LLM(
        model=random_splade,
        runner="pooling",
        dtype="float32",
        enforce_eager=True,
        hf_overrides=OVERRIDES,
    )
    vectors = [embed(llm, TEXTS)]
    (loaded,) = llm.apply_model(partial(load_weights, weights=[(name, weight * 0)]))
    vectors.append(embed(llm, TEXTS))
    llm.apply_model(partial(load_weights, weights=[(name, weight)]))
    vectors.append(embed(llm, TEXTS))
    assert loaded == {"mlm_head.dense.weight"}
    assert not torch.equal(vectors[1], vectors[0])
    torch.testing.assert_close(vectors[2], vectors[0], rtol=0, atol=1e-6)


@pytest.mark.parametrize("model", ["random", PRETRAINED])
def test_model_matches_sentence_transformers(model: str, random_splade: str):
    path = random_splade if model == "random" else model
    want = sentence_transformers_vectors(path, TEXTS)
    got = vllm_vectors(path, TEXTS)
    assert got.shape == want.shape
    for g, w in zip(got, want):
        assert torch.equal(g > 0, w > 0)
        torch.testing.assert_close(g, w, rtol=0, atol=1e-5)


def save_sparse_encoder(
    path: str, backbone: str, pooling: str, activation: str, layout: str
) -> None:
    """A sentence-transformers SparseEncoder folder of `backbone`, as
    sentence-transformers 6 saves it, or rewritten to the 5.x layout."""
    import json

    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import (
        SpladePooling,
        Transformer,
    )

    transformer = Transformer(backbone, transformer_task="fill-mask")
    splade = SpladePooling(pooling_strategy=pooling, activation_function=activation)
    SparseEncoder(modules=[transformer, splade], device="cpu").save(path)
    if layout == "5.x":
        modules_file = os.path.join(path, "modules.json")
        with open(modules_file) as f:
            modules = json.load(f)
        for module, name in zip(modules, ["MLMTransformer", "SpladePooling"]):
            module["type"] = f"sentence_transformers.sparse_encoder.models.{name}"
        with open(modules_file, "w") as f:
            json.dump(modules, f)


@pytest.mark.parametrize(
    ("pooling", "activation", "layout"),
    [("max", "relu", "6.x"), ("sum", "relu", "6.x"), ("max", "log1p_relu", "5.x")],
)
def test_sparse_encoder_folder_needs_no_flags(
    pooling: str, activation: str, layout: str, random_splade: str, tmp_path
):
    """A SparseEncoder folder is served as SPLADE with no flags, pooled as
    its SpladePooling module says."""
    path = str(tmp_path / "sparse-encoder")
    save_sparse_encoder(path, random_splade, pooling, activation, layout)
    want = sentence_transformers_vectors(path, TEXTS)
    got = vllm_vectors(path, TEXTS, hf_overrides=None)
    for g, w in zip(got, want):
        assert torch.equal(g > 0, w > 0)
        # A sum adds up to max_model_len token weights, each within 1e-5.
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


def test_plain_masked_lm_keeps_its_meaning(random_splade: str):
    """A BertForMaskedLM folder without SpladePooling stays per-token
    masked-LM logits: SPLADE is opted into, never guessed."""
    from vllm import LLM

    llm = LLM(model=random_splade, runner="pooling", enforce_eager=True)
    try:
        assert llm.model_config.architecture == "BertForMaskedLM"
        with pytest.raises(ValueError):
            llm.embed(TEXTS[:1])
    finally:
        del llm


@pytest.mark.parametrize(
    ("architecture", "splade_architecture"),
    [
        ("RobertaForMaskedLM", "RobertaSpladeSparseEmbeddingModel"),
        ("XLMRobertaForMaskedLM", "RobertaSpladeSparseEmbeddingModel"),
    ],
)
def test_roberta_family_matches_sentence_transformers(
    architecture: str, splade_architecture: str, tmp_path
):
    """RoBERTa and XLM-R SPLADE models, through --hf-overrides and as
    SparseEncoder folders with no flags."""
    path = str(tmp_path / "masked-lm")
    save_random_splade(path, architecture)
    want = sentence_transformers_vectors(path, TEXTS)
    overrides = {"architectures": [splade_architecture]}
    folder = str(tmp_path / "sparse-encoder")
    save_sparse_encoder(folder, path, "max", "relu", "6.x")
    for got in (
        vllm_vectors(path, TEXTS, hf_overrides=overrides),
        vllm_vectors(folder, TEXTS, hf_overrides=None),
    ):
        for g, w in zip(got, want):
            assert torch.equal(g > 0, w > 0)
            torch.testing.assert_close(g, w, rtol=0, atol=1e-5)


def test_vectors_leave_the_engine_sparse(random_splade: str):
    """`embed` outputs are sparse tensors, read as their non-zero terms by
    `EmbeddingOutput.sparse` (sentence-transformers' non-zero set, values
    within 1e-5) and dense, unchanged, by `embedding`; raw logits
    (`use_activation=False`) stay dense."""
    from vllm import LLM, EmbeddingRequestOutput, PoolingParams

    want = sentence_transformers_vectors(random_splade, TEXTS)
    # Not eager: the engine's profiling run then pools sparse outputs too.
    llm = LLM(
        model=random_splade,
        runner="pooling",
        dtype="float32",
        hf_overrides=OVERRIDES,
    )
    try:
        outputs = llm.encode(TEXTS, pooling_task="embed")
        assert all(o.outputs.is_sparse for o in outputs)
        embeds = llm.embed(TEXTS)
        raw = llm.encode(
            TEXTS[:2],
            pooling_task="embed",
            pooling_params=PoolingParams(use_activation=False),
        )
    finally:
        del llm
    for output, w in zip(embeds, want):
        assert isinstance(output, EmbeddingRequestOutput)
        sparse = output.outputs.sparse
        assert sparse.indices == torch.nonzero(w).squeeze(1).tolist()
        torch.testing.assert_close(
            torch.tensor(sparse.values), w[sparse.indices], rtol=0, atol=1e-5
        )
        torch.testing.assert_close(
            torch.tensor(output.outputs.embedding), w, rtol=0, atol=1e-5
        )
    for pooled in raw:
        assert not pooled.outputs.is_sparse
        assert (pooled.outputs.data < 0).any()


def save_router_encoder(
    path: str, backbone: str, prompts: dict[str, str] | None = None
) -> None:
    """An inference-free SparseEncoder, as sentence-transformers saves it: a
    Router whose "query" route is a SparseStaticEmbedding (a seeded random
    weight per token) and whose "document" route is the masked-LM model with
    SpladePooling."""
    from sentence_transformers import SparseEncoder
    from sentence_transformers.base.modules import Router
    from sentence_transformers.sparse_encoder.modules import (
        SparseStaticEmbedding,
        SpladePooling,
        Transformer,
    )

    transformer = Transformer(backbone, transformer_task="fill-mask")
    vocab_size = len(transformer.tokenizer.get_vocab())
    weight = torch.rand(vocab_size, generator=torch.Generator().manual_seed(0))
    weight[weight < 0.2] = 0  # tokens a query route ignores
    query = SparseStaticEmbedding(transformer.tokenizer, weight=weight, frozen=True)
    router = Router.for_query_document(
        query_modules=[query], document_modules=[transformer, SpladePooling("max")]
    )
    SparseEncoder(modules=[router], prompts=prompts, device="cpu").save(path)


@pytest.mark.parametrize(
    "prompts", [None, {"query": "query: ", "document": "passage: "}]
)
def test_inference_free_sparse_encoder(prompts, random_splade: str, tmp_path):
    """A Router folder loads with no flags; `prompt_name` picks its route as
    encode_query / encode_document do (the query route runs no model), the
    default route is the folder's, and an unknown route is refused."""
    from sentence_transformers import SparseEncoder

    from vllm import LLM, EmbeddingRequestOutput, PoolingParams
    from vllm.exceptions import VLLMValidationError

    path = str(tmp_path / "router")
    save_router_encoder(path, PRETRAINED if prompts is None else random_splade, prompts)
    encoder = SparseEncoder(path, device="cpu")
    want = {
        "query": encoder.encode_query(TEXTS, convert_to_tensor=True),
        "document": encoder.encode_document(TEXTS, convert_to_tensor=True),
        None: encoder.encode(TEXTS, convert_to_tensor=True),
    }
    llm = LLM(model=path, dtype="float32", enforce_eager=True)
    try:
        got = {name: llm.embed(TEXTS, prompt_name=name) for name in want}
        with pytest.raises(VLLMValidationError, match="'passage' is not a route"):
            llm.embed(TEXTS, prompt_name="passage")
        with pytest.raises(VLLMValidationError, match="runs no model"):
            llm.embed(
                TEXTS,
                prompt_name="query",
                pooling_params=PoolingParams(use_activation=False),
            )
    finally:
        del llm
    for name, vectors in want.items():
        for output, w in zip(got[name], vectors.to_dense().float()):
            assert isinstance(output, EmbeddingRequestOutput)
            sparse = output.outputs.sparse
            assert sparse.indices == torch.nonzero(w).squeeze(1).tolist(), name
            torch.testing.assert_close(
                torch.tensor(sparse.values), w[sparse.indices], rtol=0, atol=1e-5
            )


def test_router_without_query_weights_fails_naming_them(random_splade: str, tmp_path):
    from vllm import LLM

    path = tmp_path / "router"
    save_router_encoder(str(path), random_splade)
    weights = path / "query_0_SparseStaticEmbedding" / "model.safetensors"
    weights.unlink()
    with pytest.raises(ValueError, match="model.safetensors"):
        LLM(model=str(path), dtype="float32", enforce_eager=True)


def test_prompt_name_needs_routes(random_splade: str):
    from vllm import LLM
    from vllm.exceptions import VLLMValidationError

    llm = LLM(
        model=random_splade,
        runner="pooling",
        enforce_eager=True,
        hf_overrides=OVERRIDES,
    )
    try:
        with pytest.raises(VLLMValidationError, match="needs a model with routes"):
            llm.embed(TEXTS[:1], prompt_name="query")
    finally:
        del llm
