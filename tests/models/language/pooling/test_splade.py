# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""SPLADE sparse embeddings against sentence-transformers' SparseEncoder.

Runs on a seeded random BertForMaskedLM written here (no network needed:
gelu_new, a LayerNorm eps of its own, tied embeddings saved without a
decoder weight, as transformers 5 saves them, [CLS]/[SEP] ids in its
config, which must not drop those tokens) and on a pretrained SPLADE
checkpoint, by default naver/splade-cocondenser-ensembledistil; set
VLLM_TEST_SPLADE_MODEL to a local folder to run offline.
"""

import os
import subprocess
import sys
from functools import partial

import pytest
import torch

pytestmark = [pytest.mark.core_model, pytest.mark.cpu_model]

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

# vLLM and sentence-transformers compute the same fp32 logits in another
# order (batching, kernels): up to ~2e-6 apart here, bounded by 1e-5. A term
# whose weight is that close to zero may be active in one and not in the
# other, so the active terms are compared above it.
ATOL = 1e-5


def assert_same_sparse_vectors(
    got: torch.Tensor, want: torch.Tensor, rtol: float = 0
) -> None:
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=rtol, atol=ATOL)
    differ = (got > 0) != (want > 0)
    assert (torch.maximum(got, want)[differ] <= ATOL).all()


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
    sizes = dict(
        vocab_size=len(vocab) + 3,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        max_position_embeddings=130,
        pad_token_id=0,
        cls_token_id=2,
        sep_token_id=3,
    )
    if architecture.startswith("DistilBert"):
        # DistilBERT's own names; its LayerNorm eps is fixed at 1e-12.
        config = model_class.config_class(**sizes, hidden_dim=64, activation="gelu_new")
    elif architecture.startswith("ModernBert"):
        # Sliding-window attention over 16 tokens in two of three layers.
        config = model_class.config_class(
            **sizes,
            intermediate_size=64,
            classifier_activation="gelu_new",
            local_attention=16,
            bos_token_id=2,
            eos_token_id=3,
        )
    else:
        config = model_class.config_class(
            **sizes, intermediate_size=64, hidden_act="gelu_new", layer_norm_eps=1e-6
        )
    model = model_class(config)
    if architecture.startswith("DistilBert"):
        head = [model.vocab_transform, model.vocab_layer_norm, model.vocab_projector]
    elif architecture.startswith("ModernBert"):
        head = [model.head, model.decoder]
    else:
        head = [model.lm_head if hasattr(model, "lm_head") else model.cls]
    for p in torch.nn.ModuleList(head).parameters():
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


def splade_runner(vllm_runner, model: str, **kwargs):
    # Compiled, the path production takes.
    kwargs.setdefault("hf_overrides", OVERRIDES)
    return vllm_runner(
        model,
        runner="pooling",
        enforce_eager=False,
        dtype="float32",
        max_model_len=None,
        **kwargs,
    )


@pytest.fixture(scope="module")
def random_splade_model(vllm_runner, random_splade):
    # Module-scoped: one engine serves every test of the random checkpoint.
    # Weight updates (test_partial_weight_updates) pickle a function to it.
    with pytest.MonkeyPatch.context() as m:
        m.setenv("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
        with splade_runner(vllm_runner, random_splade) as model:
            yield model


@pytest.mark.parametrize("model", ["random", "pretrained"])
def test_model_matches_sentence_transformers(
    model: str, request, vllm_runner, random_splade
):
    if model == "random":
        got = request.getfixturevalue("random_splade_model").embed(TEXTS)
        want = sentence_transformers_vectors(random_splade, TEXTS)
    else:
        with splade_runner(vllm_runner, PRETRAINED) as vllm_model:
            got = vllm_model.embed(TEXTS)
        want = sentence_transformers_vectors(PRETRAINED, TEXTS)
    assert_same_sparse_vectors(torch.tensor(got), want)


def engine_start_error(model: str, **kwargs) -> str:
    """Start an engine in a process of its own, which must fail: return what
    it printed. (A failed start must not touch this process's engines.)"""
    code = (
        "import sys\nfrom vllm import LLM\n"
        f"LLM(model={model!r}, runner='pooling', enforce_eager=True, **{kwargs!r})"
    )
    env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0")
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True
    )
    assert result.returncode != 0, "the engine started"
    return result.stderr


def test_checkpoint_without_head_fails_naming_it(random_splade: str, tmp_path):
    """A checkpoint with no masked-LM head is no SPLADE model: loading fails
    and names the missing head weights, rather than serving noise."""
    import shutil

    from safetensors.torch import load_file, save_file

    path = tmp_path / "no-head"
    shutil.copytree(random_splade, path)
    weights = load_file(path / "model.safetensors")
    save_file(
        {k: v for k, v in weights.items() if not k.startswith("cls.")},
        path / "model.safetensors",
    )
    error = engine_start_error(str(path), hf_overrides=OVERRIDES)
    assert "mlm_head.dense.weight" in error


def load_weights(model: torch.nn.Module, weights: list[tuple[str, torch.Tensor]]):
    # Module level, so that it pickles by name for the worker processes.
    return model.load_weights(weights)


def test_partial_weight_updates(random_splade: str, random_splade_model):
    """load_weights with one tensor at a time (as RLHF weight sync does)
    loads just that tensor: no error for the rest of the head."""
    from safetensors.torch import load_file

    name = "cls.predictions.transform.dense.weight"
    weight = load_file(os.path.join(random_splade, "model.safetensors"))[name]
    llm = random_splade_model.llm
    vectors = [torch.tensor(random_splade_model.embed(TEXTS))]
    (loaded,) = llm.apply_model(partial(load_weights, weights=[(name, weight * 0)]))
    vectors.append(torch.tensor(random_splade_model.embed(TEXTS)))
    llm.apply_model(partial(load_weights, weights=[(name, weight)]))
    vectors.append(torch.tensor(random_splade_model.embed(TEXTS)))
    assert loaded == {"mlm_head.dense.weight"}
    assert not torch.equal(vectors[1], vectors[0])
    torch.testing.assert_close(vectors[2], vectors[0], rtol=0, atol=1e-6)


def save_sparse_encoder(
    path: str,
    backbone: str,
    pooling: str,
    activation: str,
    layout: str = "6.x",
) -> None:
    """A sentence-transformers SparseEncoder folder of `backbone`, pooling with
    SpladePooling(pooling, activation), as sentence-transformers saves it
    (the module names of 6.x, also written since 5.6), or rewritten with the
    names 5.x wrote before."""
    import json

    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import (
        MLMTransformer,
        SpladePooling,
    )

    splade = SpladePooling(pooling_strategy=pooling, activation_function=activation)
    SparseEncoder(modules=[MLMTransformer(backbone), splade], device="cpu").save(path)
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
    [("sum", "relu", "6.x"), ("max", "log1p_relu", "5.x")],
)
def test_splade_pooling_of_sparse_encoder(
    pooling: str, activation: str, layout: str, vllm_runner, random_splade, tmp_path
):
    """A SparseEncoder folder is served as SPLADE with no flags, pooled as its
    SpladePooling module says."""
    path = str(tmp_path / "sparse-encoder")
    save_sparse_encoder(path, random_splade, pooling, activation, layout)
    with splade_runner(vllm_runner, path, hf_overrides=None) as vllm_model:
        assert vllm_model.llm.model_config.architecture == OVERRIDES["architectures"][0]
        got = torch.tensor(vllm_model.embed(TEXTS))
    # A sum adds up to max_model_len token weights, each within ATOL.
    want = sentence_transformers_vectors(path, TEXTS)
    assert_same_sparse_vectors(got, want, rtol=1e-5 if pooling == "sum" else 0)


def test_max_active_dims_of_sparse_encoder(vllm_runner, random_splade, tmp_path):
    """A SparseEncoder saved with `max_active_dims` (in
    config_sentence_transformers.json, as sentence-transformers 6 saves it)
    keeps that many largest weights of each vector, as its encode() does."""
    import json

    from sentence_transformers import SparseEncoder

    path = str(tmp_path / "sparse-encoder")
    save_sparse_encoder(path, random_splade, "max", "relu")
    st_config = os.path.join(path, "config_sentence_transformers.json")
    with open(st_config) as f:
        saved = json.load(f)
    with open(st_config, "w") as f:
        json.dump({**saved, "max_active_dims": 5}, f)
    with splade_runner(vllm_runner, path, hf_overrides=None) as vllm_model:
        got = torch.tensor(vllm_model.embed(TEXTS))
    encoder = SparseEncoder(path, device="cpu")
    want = encoder.encode(TEXTS, convert_to_tensor=True, max_active_dims=5)
    want = want.to_dense().float()
    assert ((want > 0).sum(dim=1) == 5).all()
    assert_same_sparse_vectors(got, want)


@pytest.mark.parametrize("kind", ["BertModel", "BertForMaskedLM", "SparseEncoder"])
def test_modules_json_is_read_once(kind: str, random_splade, tmp_path, monkeypatch):
    """Config resolution looks a model's modules.json up once, whoever reads
    it: a model without one costs the one lookup vLLM's sentence-transformers
    pooling config makes anyway, and a SparseEncoder's is read once."""
    import json
    import shutil

    from vllm.config import ModelConfig
    from vllm.transformers_utils import config

    path = str(tmp_path / kind)
    if kind == "SparseEncoder":
        save_sparse_encoder(path, random_splade, "max", "relu")
    else:
        shutil.copytree(random_splade, path)
        with open(os.path.join(path, "config.json")) as f:
            hf_config = json.load(f)
        hf_config["architectures"] = [kind]
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(hf_config, f)
    lookups: list[str] = []
    reads: list[str] = []
    exists, read = config.file_or_path_exists, config.get_hf_file_to_dict

    def looked_up(model, config_name, revision):
        lookups.append(config_name)
        return exists(model, config_name, revision)

    def read_file(file_name, model, revision="main"):
        reads.append(file_name)
        return read(file_name, model, revision)

    monkeypatch.setattr(config, "file_or_path_exists", looked_up)
    monkeypatch.setattr(config, "get_hf_file_to_dict", read_file)
    ModelConfig(model=path, runner="pooling")
    assert lookups.count("modules.json") == 1
    assert reads.count("modules.json") == (kind == "SparseEncoder")


def test_sequence_pooling_type_is_refused(random_splade: str):
    error = engine_start_error(
        random_splade,
        hf_overrides=OVERRIDES,
        pooler_config={"seq_pooling_type": "MEAN"},
    )
    assert "not with a sequence pooling type; got 'MEAN'" in error


def test_plain_masked_lm_keeps_its_meaning(vllm_runner, random_splade, tmp_path):
    """A BertForMaskedLM folder without SpladePooling stays per-token
    masked-LM logits: SPLADE is opted into, never guessed. An explicit
    --hf-overrides architecture wins over a SparseEncoder folder too."""
    folder = str(tmp_path / "sparse-encoder")
    save_sparse_encoder(folder, random_splade, "max", "relu")
    mlm = {"architectures": ["BertForMaskedLM"]}
    for path, overrides in ((random_splade, None), (folder, mlm)):
        # Which model is served, not its compiled vectors: eager starts in
        # a third of the time.
        with vllm_runner(
            path,
            runner="pooling",
            max_model_len=None,
            hf_overrides=overrides,
            enforce_eager=True,
        ) as vllm_model:
            assert vllm_model.llm.model_config.architecture == "BertForMaskedLM"
            with pytest.raises(ValueError, match="Embedding API is not supported"):
                vllm_model.embed(TEXTS[:1])


def test_sparse_encoder_on_another_backbone_says_so(
    caplog_vllm, random_splade, tmp_path
):
    """A SparseEncoder on a masked-LM backbone vLLM has no SPLADE model for
    keeps its architecture, and the log says it is not served as SPLADE."""
    import json

    from vllm.transformers_utils.config import get_config

    path = tmp_path / "sparse-encoder"
    save_sparse_encoder(str(path), random_splade, "max", "relu")
    config_file = path / "config.json"
    config = json.loads(config_file.read_text())
    config_file.write_text(
        json.dumps({**config, "architectures": ["ElectraForMaskedLM"]})
    )
    config = get_config(str(path), trust_remote_code=False)
    assert config.architectures == ["ElectraForMaskedLM"]
    assert "for which vLLM has no SPLADE model" in caplog_vllm.text
    assert "not as sparse embeddings" in caplog_vllm.text


@pytest.mark.parametrize(
    ("architecture", "overrides"),
    [
        (
            "RobertaForMaskedLM",
            {"architectures": ["RobertaSpladeSparseEmbeddingModel"]},
        ),
        ("XLMRobertaForMaskedLM", None),  # a SparseEncoder folder: no flags
        ("CamembertForMaskedLM", None),
    ],
)
def test_roberta_family_matches_sentence_transformers(
    architecture: str, overrides: dict | None, vllm_runner, tmp_path
):
    """RoBERTa, XLM-R and CamemBERT SPLADE models, through --hf-overrides
    and as a SparseEncoder folder with no flags."""
    path = backbone = str(tmp_path / "masked-lm")
    save_random_splade(backbone, architecture)
    if overrides is None:
        path = str(tmp_path / "sparse-encoder")
        save_sparse_encoder(path, backbone, "max", "relu")
    with splade_runner(vllm_runner, path, hf_overrides=overrides) as vllm_model:
        assert vllm_model.llm.model_config.architecture == (
            "RobertaSpladeSparseEmbeddingModel"
        )
        got = torch.tensor(vllm_model.embed(TEXTS))
    assert_same_sparse_vectors(got, sentence_transformers_vectors(path, TEXTS))


def check_sparse_encoder_folder(
    vllm_runner, backbone: str, path: str, architecture: str, layout: str = "6.x"
) -> None:
    """A SparseEncoder folder of `backbone` is served as `architecture` with no
    flags and matches sentence-transformers."""
    save_sparse_encoder(path, backbone, "max", "relu", layout)
    with splade_runner(vllm_runner, path, hf_overrides=None) as vllm_model:
        assert vllm_model.llm.model_config.architecture == architecture
        got = torch.tensor(vllm_model.embed(TEXTS))
    assert_same_sparse_vectors(got, sentence_transformers_vectors(path, TEXTS))


def check_masked_lm_distributions(vllm_runner, path: str, architecture: str) -> None:
    """A plain masked-LM folder keeps its meaning: per-token vocabulary
    distributions, transformers' softmax(logits), as BertForMaskedLM."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    with vllm_runner(
        path, runner="pooling", dtype="float32", max_model_len=None
    ) as vllm_model:
        assert vllm_model.llm.model_config.architecture == architecture
        got = vllm_model.token_classify(TEXTS)

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForMaskedLM.from_pretrained(path).eval()
    for text, g in zip(TEXTS, got):
        with torch.inference_mode():
            inputs = tokenizer([text], return_tensors="pt", return_token_type_ids=False)
            logits = model(**inputs).logits[0]
        torch.testing.assert_close(g.float(), logits.softmax(-1), rtol=0, atol=ATOL)
