# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Inference-free sparse encoders (a sentence-transformers Router: a query
route of one weight per token, a document route of SPLADE on a masked-LM
model) against sentence-transformers' encode_query / encode_document, on
seeded random checkpoints written here, saved as sentence-transformers
saves them, rewritten with the module names 5.x wrote before, and laid out
as OpenSearch and naver publish theirs (a route's model at the root).
Engines start with warm-up on, as `vllm serve` does."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from .test_splade import (
    TEXTS,
    assert_same_sparse_vectors,
    engine_start_error,
    save_random_splade,
    splade_runner,
)

pytestmark = [pytest.mark.core_model, pytest.mark.cpu_model]

# Each query token's weight is the table's, exactly; only the float32
# products of sentence-transformers' presence * weight may round apart.
QUERY_ATOL = 1e-6

_NAMES_5X = {
    "sentence_transformers.base.modules.router.Router": (
        "sentence_transformers.models.Router"
    ),
    "sentence_transformers.sparse_encoder.modules.sparse_static_embedding."
    "SparseStaticEmbedding": (
        "sentence_transformers.sparse_encoder.models.SparseStaticEmbedding"
    ),
    "sentence_transformers.sparse_encoder.modules.mlm_transformer.MLMTransformer": (
        "sentence_transformers.sparse_encoder.models.MLMTransformer"
    ),
    "sentence_transformers.sparse_encoder.modules.splade_pooling.SpladePooling": (
        "sentence_transformers.sparse_encoder.models.SpladePooling"
    ),
}


def save_router_encoder(
    path: str,
    backbone: str,
    pooling: str = "max",
    activation: str = "relu",
    table_size: int | None = None,
    prompts: dict[str, str] | None = None,
    **router_kwargs,
) -> None:
    """An inference-free SparseEncoder, as sentence-transformers saves it: a
    Router whose "query" route is a SparseStaticEmbedding (a seeded random
    weight per vocabulary token, a fifth of them zero) and whose "document"
    route is `backbone`'s masked-LM model with SpladePooling."""
    from sentence_transformers import SparseEncoder
    from sentence_transformers.base.modules import Router
    from sentence_transformers.sparse_encoder.modules import (
        MLMTransformer,
        SparseStaticEmbedding,
        SpladePooling,
    )

    document = MLMTransformer(backbone)
    # One weight per token of the tokenizer, as sentence-transformers loads it.
    vocab_size = table_size or len(document.tokenizer.get_vocab())
    weight = torch.rand(vocab_size, generator=torch.Generator().manual_seed(0))
    weight[weight < 0.2] = 0
    query = SparseStaticEmbedding(document.tokenizer, weight=weight, frozen=True)
    splade = SpladePooling(pooling_strategy=pooling, activation_function=activation)
    router = Router.for_query_document(
        query_modules=[query], document_modules=[document, splade], **router_kwargs
    )
    SparseEncoder(modules=[router], prompts=prompts, device="cpu").save(path)


def rewrite_as_5x(path: str) -> None:
    """The module names sentence-transformers 5.x (before 5.6) wrote."""
    for name, key in (("modules.json", None), ("router_config.json", "types")):
        file = os.path.join(path, name)
        with open(file) as f:
            config = json.load(f)
        modules = config if key is None else config[key]
        for module in modules if key is None else [modules]:
            if key is None:
                module["type"] = _NAMES_5X[module["type"]]
            else:
                for folder, kind in module.items():
                    module[folder] = _NAMES_5X[kind]
        with open(file, "w") as f:
            json.dump(config, f)


def move_route_model_to_root(path: str, route: str = "document") -> None:
    """The layout OpenSearch's and naver's Router folders have: `route`'s
    model at the folder's root (module key ""), its own folder gone."""
    file = os.path.join(path, "router_config.json")
    with open(file) as f:
        config = json.load(f)
    folder = config["structure"][route][0]
    for name in os.listdir(os.path.join(path, folder)):
        shutil.move(os.path.join(path, folder, name), os.path.join(path, name))
    os.rmdir(os.path.join(path, folder))
    config["types"] = {
        ("" if k == folder else k): v for k, v in config["types"].items()
    }
    config["structure"][route][0] = ""
    with open(file, "w") as f:
        json.dump(config, f)


def router_runner(vllm_runner, path: str, **kwargs):
    """A Router folder with no flags, started as `vllm serve` starts it:
    compiled, kernel warm-up on (vllm_runner turns it off by default)."""
    return splade_runner(
        vllm_runner,
        path,
        hf_overrides=None,
        kernel_config={"enable_jit_warmup": True},
        **kwargs,
    )


def reference_vectors(path: str, texts: list[str]) -> dict[str | None, torch.Tensor]:
    """sentence-transformers' vectors of each route, and of its default."""
    from sentence_transformers import SparseEncoder

    encoder = SparseEncoder(path, device="cpu")
    vectors = {
        "query": encoder.encode_query(texts, convert_to_tensor=True),
        "document": encoder.encode_document(texts, convert_to_tensor=True),
        None: encoder.encode(texts, convert_to_tensor=True),
    }
    # A tokenizer smaller than the model's vocabulary gives query vectors of
    # its size; vLLM's have the model's, the ids past the tokenizer's zero.
    size = max(v.shape[1] for v in vectors.values())
    return {
        k: torch.nn.functional.pad(v.to_dense().float(), (0, size - v.shape[1]))
        for k, v in vectors.items()
    }


def assert_route_vectors(route: str | None, got: torch.Tensor, want: torch.Tensor):
    if route == "query":
        assert torch.equal(got > 0, want > 0)
        torch.testing.assert_close(got, want, rtol=0, atol=QUERY_ATOL)
    else:
        assert_same_sparse_vectors(got, want)


@pytest.fixture(scope="module")
def random_backbones(tmp_path_factory) -> dict[str, str]:
    paths = {}
    for family in (
        "BertForMaskedLM",
        "DistilBertForMaskedLM",
        "XLMRobertaForMaskedLM",
        "ModernBertForMaskedLM",
    ):
        paths[family] = str(tmp_path_factory.mktemp(family))
        save_random_splade(paths[family], family)
    return paths


@pytest.mark.parametrize(
    ("backbone", "layout", "architecture"),
    [
        ("BertForMaskedLM", "6.x", "BertSpladeSparseEmbeddingModel"),
        ("DistilBertForMaskedLM", "root", "DistilBertSpladeSparseEmbeddingModel"),
        ("XLMRobertaForMaskedLM", "6.x", "RobertaSpladeSparseEmbeddingModel"),
        ("ModernBertForMaskedLM", "6.x", "ModernBertSpladeSparseEmbeddingModel"),
    ],
)
def test_routes_match_sentence_transformers(
    backbone: str,
    layout: str,
    architecture: str,
    vllm_runner,
    random_backbones,
    tmp_path,
):
    """A Router folder loads with no flags, in sentence-transformers' layout
    or OpenSearch's ("root": the document model at the root, 5.x names, as
    doc-v3-distill publishes it). Each route gives
    sentence-transformers' encode_query / encode_document vectors, unset its
    default route's (encode), in one step or mixed with the other route."""
    from vllm import PoolingParams
    from vllm.exceptions import VLLMValidationError

    path = str(tmp_path / "router")
    save_router_encoder(path, random_backbones[backbone], activation="log1p_relu")
    if layout == "root":
        rewrite_as_5x(path)
        move_route_model_to_root(path)
    want = reference_vectors(path, TEXTS)

    with router_runner(vllm_runner, path) as vllm_model:
        llm = vllm_model.llm
        assert llm.model_config.architecture == architecture
        got = {
            route: torch.tensor(
                [
                    o.outputs.embedding
                    for o in llm.embed(TEXTS, pooling_params=PoolingParams(route=route))
                ]
            )
            for route in want
        }
        encoded = llm.encode(
            TEXTS, pooling_task="embed", pooling_params=PoolingParams(route="query")
        )
        # Both routes in one step, interleaved.
        routes = ["query", "document"] * len(TEXTS)
        mixed = llm.embed(
            [t for t in TEXTS for _ in range(2)],
            pooling_params=[PoolingParams(route=r) for r in routes],
        )
        with pytest.raises(VLLMValidationError, match=r"no route 'passage'.*query"):
            llm.embed(TEXTS[:1], pooling_params=PoolingParams(route="passage"))

    for route, vectors in got.items():
        assert_route_vectors(route, vectors, want[route])
    torch.testing.assert_close(
        torch.stack([o.outputs.data for o in encoded]), got["query"], rtol=0, atol=0
    )
    for output, route, text_index in zip(
        mixed, routes, [i for i in range(len(TEXTS)) for _ in range(2)]
    ):
        assert_route_vectors(
            route, torch.tensor(output.outputs.embedding), want[route][text_index]
        )


def save_two_model_router(
    path: str, backbones: dict[str, str], root: bool = True
) -> None:
    """The layout of naver's efficient-splade pairs: a BERT query encoder
    and a DistilBERT document encoder, each with SpladePooling, the
    document model at the root (`root`; else in its route's folder)."""
    from sentence_transformers import SparseEncoder
    from sentence_transformers.base.modules import Router
    from sentence_transformers.sparse_encoder.modules import (
        MLMTransformer,
        SpladePooling,
    )

    router = Router.for_query_document(
        query_modules=[
            MLMTransformer(backbones["BertForMaskedLM"]),
            SpladePooling("max", activation_function="log1p_relu"),
        ],
        document_modules=[
            MLMTransformer(backbones["DistilBertForMaskedLM"]),
            SpladePooling("max", activation_function="log1p_relu"),
        ],
    )
    SparseEncoder(modules=[router], device="cpu").save(path)
    if root:
        move_route_model_to_root(path)


def test_router_of_two_models_serves_the_root_s_route(
    vllm_runner, random_backbones, tmp_path
):
    """A Router whose routes run two models serves one, the root's: its
    route gives sentence-transformers' vectors, the other is refused naming
    the folder that runs it. That folder, served as SPLADE with its route's
    pooling (the second server of docs/usage.md), gives the other route's."""
    from vllm import PoolingParams
    from vllm.exceptions import VLLMValidationError

    path = str(tmp_path / "two-models")
    save_two_model_router(path, random_backbones)
    want = reference_vectors(path, TEXTS)
    with router_runner(vllm_runner, path) as vllm_model:
        llm = vllm_model.llm
        config = llm.model_config.hf_config
        assert config.architectures == ["DistilBertSpladeSparseEmbeddingModel"]
        assert config.sparse_router["other_routes"] == {
            "query": {
                "path": "query_0_MLMTransformer",
                "splade_pooling_strategy": "max",
                "splade_activation_function": "log1p_relu",
            }
        }
        document = llm.embed(TEXTS, pooling_params=PoolingParams(route="document"))
        default = llm.embed(TEXTS)  # the default route: "document"
        with pytest.raises(VLLMValidationError, match="query_0_MLMTransformer"):
            llm.embed(TEXTS[:1], pooling_params=PoolingParams(route="query"))
    for outputs in (document, default):
        got = torch.tensor([o.outputs.embedding for o in outputs])
        assert_same_sparse_vectors(got, want["document"])

    overrides = {
        "architectures": ["BertSpladeSparseEmbeddingModel"],
        "splade_activation_function": "log1p_relu",
    }
    query_folder = os.path.join(path, "query_0_MLMTransformer")
    with splade_runner(vllm_runner, query_folder, hf_overrides=overrides) as model:
        got = torch.tensor([o.outputs.embedding for o in model.llm.embed(TEXTS)])
    assert_same_sparse_vectors(got, want["query"])


def test_router_sharing_one_model_serves_both_routes(
    vllm_runner, random_backbones, tmp_path
):
    """sentence-transformers >= 6.2 saves a module that several routes share
    once, named by each route: both routes run that model."""
    from sentence_transformers import SparseEncoder
    from sentence_transformers.base.modules import Router
    from sentence_transformers.sparse_encoder.modules import (
        MLMTransformer,
        SpladePooling,
    )

    from vllm import PoolingParams

    path = str(tmp_path / "shared")
    backbone = random_backbones["BertForMaskedLM"]
    router = Router.for_query_document(
        query_modules=[MLMTransformer(backbone), SpladePooling("max")],
        document_modules=[MLMTransformer(backbone), SpladePooling("max")],
    )
    SparseEncoder(modules=[router], device="cpu").save(path)
    # As 6.2 saves one model on both routes: the query route's modules, once
    # (earlier releases save a copy per route).
    file = os.path.join(path, "router_config.json")
    with open(file) as f:
        config = json.load(f)
    for name in config["structure"]["document"]:
        shutil.rmtree(os.path.join(path, name))
        del config["types"][name]
    config["structure"]["document"] = config["structure"]["query"]
    with open(file, "w") as f:
        json.dump(config, f)
    want = reference_vectors(path, TEXTS)
    with router_runner(vllm_runner, path) as vllm_model:
        got = {
            route: torch.tensor(
                [
                    o.outputs.embedding
                    for o in vllm_model.llm.embed(
                        TEXTS, pooling_params=PoolingParams(route=route)
                    )
                ]
            )
            for route in ("query", "document")
        }
    for route, vectors in got.items():
        assert_same_sparse_vectors(vectors, want[route])


def save_hub_cache(cache: Path, repo_id: str, folder: str) -> None:
    """`folder` as the hub cache holds a downloaded snapshot of `repo_id`."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    revision = "0123456789abcdef0123456789abcdef01234567"
    shutil.copytree(folder, repo / "snapshots" / revision)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)


@pytest.mark.parametrize("layout", ["6.x", "root"])
def test_router_by_hub_id_from_the_hub_cache(layout: str, random_backbones, tmp_path):
    """A hub id resolves the Router, its model route's config, tokenizer and
    weights (in their folder or at the root), and the query table through
    the hub cache, offline, as any model's files; ModelConfig.model is not
    rewritten to the route's."""
    path = str(tmp_path / "router")
    save_router_encoder(path, random_backbones["BertForMaskedLM"])
    if layout == "root":
        move_route_model_to_root(path)
    want = reference_vectors(path, TEXTS)
    cache = tmp_path / "hub"
    save_hub_cache(cache, "test-org/inference-free-splade", path)
    code = (
        "import json\n"
        "from vllm import LLM, PoolingParams\n"
        "llm = LLM(model='test-org/inference-free-splade', dtype='float32')\n"
        "assert 'MLMTransformer' not in llm.model_config.model\n"
        "out = {r: [o.outputs.embedding for o in llm.embed("
        f"{TEXTS!r}, pooling_params=PoolingParams(route=r))]"
        " for r in ('query', 'document')}\n"
        "print('VECTORS=' + json.dumps(out))\n"
    )
    env = dict(
        os.environ,
        HF_HUB_CACHE=str(cache),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_ENABLE_V1_MULTIPROCESSING="0",
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(x for x in result.stdout.splitlines() if x.startswith("VECTORS="))
    got = json.loads(line.removeprefix("VECTORS="))
    for route in ("query", "document"):
        assert_route_vectors(route, torch.tensor(got[route]), want[route])


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (
            "table size",
            (
                "The table in query_0_SparseStaticEmbedding/ holds (99,) "
                "weights, but the tokenizer has 100 tokens"
            ),
        ),
        (
            "no table",
            "Cannot find any model weights with",
        ),
        ("no model route", "document_0_MLMTransformer"),
    ],
)
def test_broken_router_fails_at_load_naming_it(
    breakage: str, message: str, random_backbones, tmp_path
):
    path = tmp_path / "router"
    backbone = random_backbones["BertForMaskedLM"]
    save_router_encoder(
        str(path), backbone, table_size=99 if breakage == "table size" else None
    )
    if breakage == "no table":
        (path / "query_0_SparseStaticEmbedding" / "model.safetensors").unlink()
        message += f" `{path}` in its subfolder `query_0_SparseStaticEmbedding`"
    elif breakage == "no model route":
        shutil.rmtree(path / "document_0_MLMTransformer")
    error = engine_start_error(str(path), hf_overrides=None)
    assert message in error, error[-3000:]


def test_routers_vllm_cannot_serve_are_refused(random_backbones, tmp_path):
    """Route mappings, another module beside the Router, and routes of other
    modules fail at load, naming what vLLM cannot serve."""
    from vllm.transformers_utils.config import get_config
    from vllm.transformers_utils.sparse_encoder import (
        UnsupportedSparseRouterError,
        get_sparse_router_config,
    )

    backbone = random_backbones["BertForMaskedLM"]
    cases = {
        "route_mappings": lambda p: _map_routes(p, backbone),
        "modules.json also has": lambda p: _add_module(p, backbone),
        "'document' has modules": lambda p: _drop_splade_pooling(p, backbone),
        "has another vocabulary": lambda p: _other_query_tokenizer(p, backbone),
    }
    for message, make in cases.items():
        path = str(tmp_path / message.replace(" ", "-").replace("'", ""))
        make(path)
        with pytest.raises(ValueError, match=message):
            get_sparse_router_config(path, None)
        # get_config says why, not that the folder has no config.json.
        with pytest.raises(UnsupportedSparseRouterError, match=message):
            get_config(path, trust_remote_code=False)
    # A Router of other modules (a dense asymmetric encoder) is not a sparse
    # encoder: left to the rest of vLLM, as before.
    path = _map_routes(str(tmp_path / "dense"), backbone)
    file = os.path.join(path, "router_config.json")
    with open(file) as f:
        config = json.load(f)
    config["types"] = {
        k: "sentence_transformers.models.Pooling" for k in config["types"]
    }
    with open(file, "w") as f:
        json.dump(config, f)
    assert get_sparse_router_config(path, None) is None


def test_only_router_folders_are_probed(random_backbones, tmp_path, monkeypatch):
    """get_config reads a Router's config only where the folder has one: a
    folder without config.json, or a masked-LM model whose modules.json
    (read once, as vLLM reads it anyway) names a Router. Every other model
    loads without it."""
    from vllm.transformers_utils import config, sparse_encoder

    probed: list[str] = []
    read = sparse_encoder.get_sparse_router_config

    def probe(model: str, revision: str | None):
        probed.append(model)
        return read(model, revision)

    monkeypatch.setattr(sparse_encoder, "get_sparse_router_config", probe)
    backbone = random_backbones["BertForMaskedLM"]
    hf_config = config.get_config(backbone, trust_remote_code=False)
    assert hf_config.architectures == ["BertForMaskedLM"]
    assert probed == []
    router = str(tmp_path / "router")
    save_router_encoder(router, backbone)
    hf_config = config.get_config(router, trust_remote_code=False)
    assert hf_config.sparse_router["model_route"] == "document"
    assert probed == [router]
    root = str(tmp_path / "root")
    save_router_encoder(root, backbone)
    move_route_model_to_root(root)
    hf_config = config.get_config(root, trust_remote_code=False)
    assert hf_config.sparse_router["model_path"] == ""
    assert hf_config.architectures == ["BertSpladeSparseEmbeddingModel"]
    assert probed == [router, root]


def test_which_model_of_a_router_is_served(random_backbones, tmp_path):
    """Without an engine: a Router of two models in subfolders serves the
    default route's; routes of the root's model pooled otherwise are
    refused; a default route that is no route, and a root config.json
    beside a Router whose model is in a subfolder, fail at load."""
    from vllm.transformers_utils.config import get_config
    from vllm.transformers_utils.sparse_encoder import (
        UnsupportedSparseRouterError,
        get_sparse_router_config,
    )

    def rewrite(path: str, change) -> None:
        file = os.path.join(path, "router_config.json")
        with open(file) as f:
            config = json.load(f)
        change(config)
        with open(file, "w") as f:
            json.dump(config, f)

    backbones = {"BertForMaskedLM": random_backbones["BertForMaskedLM"]}
    backbones["DistilBertForMaskedLM"] = random_backbones["DistilBertForMaskedLM"]
    # Two models, both in subfolders: the default route's ("document").
    two = str(tmp_path / "two")
    save_two_model_router(two, backbones, root=False)
    router = get_sparse_router_config(two, None)
    assert router is not None
    assert router["model_route"] == "document"
    assert router["model_path"] == "document_0_MLMTransformer"
    assert set(router["other_routes"]) == {"query"}
    # The root's model on both routes, pooled differently: one is refused.
    pooled = str(tmp_path / "pooled")
    save_two_model_router(
        pooled, dict.fromkeys(backbones, backbones["BertForMaskedLM"])
    )
    shutil.rmtree(os.path.join(pooled, "query_0_MLMTransformer"))

    def share_the_root(config):
        del config["types"]["query_0_MLMTransformer"]
        config["structure"]["query"][0] = ""

    rewrite(pooled, share_the_root)
    with open(os.path.join(pooled, "query_1_SpladePooling", "config.json"), "w") as f:
        json.dump({"pooling_strategy": "sum", "activation_function": "relu"}, f)
    router = get_sparse_router_config(pooled, None)
    assert router is not None
    assert router["model_route"] == "document" and router["model_path"] == ""
    assert router["other_routes"]["query"]["splade_pooling_strategy"] == "sum"
    # A default route that is no route.
    bad = str(tmp_path / "bad-default")
    save_router_encoder(bad, backbones["BertForMaskedLM"])
    rewrite(bad, lambda config: config["parameters"].update(default_route="passage"))
    with pytest.raises(UnsupportedSparseRouterError, match="'passage' is none"):
        get_sparse_router_config(bad, None)
    # A root config.json beside a Router whose model is in a subfolder.
    beside = str(tmp_path / "beside")
    save_router_encoder(beside, backbones["BertForMaskedLM"])
    shutil.copy(
        os.path.join(beside, "document_0_MLMTransformer", "config.json"), beside
    )
    with pytest.raises(UnsupportedSparseRouterError, match="config.json too"):
        get_config(beside, trust_remote_code=False)


def _map_routes(path: str, backbone: str) -> str:
    """route_mappings as sentence-transformers saves them (str of the key)."""
    save_router_encoder(path, backbone)
    file = os.path.join(path, "router_config.json")
    with open(file) as f:
        config = json.load(f)
    config["parameters"]["route_mappings"] = {str(("query", None)): "document"}
    with open(file, "w") as f:
        json.dump(config, f)
    return path


def _add_module(path: str, backbone: str) -> None:
    save_router_encoder(path, backbone)
    modules_file = os.path.join(path, "modules.json")
    with open(modules_file) as f:
        modules = json.load(f)
    modules.append({"idx": 1, "name": "1", "path": "1_Normalize", "type": "Normalize"})
    with open(modules_file, "w") as f:
        json.dump(modules, f)


def _drop_splade_pooling(path: str, backbone: str) -> None:
    save_router_encoder(path, backbone)
    file = os.path.join(path, "router_config.json")
    with open(file) as f:
        config = json.load(f)
    config["structure"]["document"] = config["structure"]["document"][:1]
    with open(file, "w") as f:
        json.dump(config, f)


def _other_query_tokenizer(path: str, backbone: str) -> None:
    save_router_encoder(path, backbone)
    file = os.path.join(path, "query_0_SparseStaticEmbedding", "tokenizer.json")
    with open(file) as f:
        tokenizer = json.load(f)
    vocab = tokenizer["model"]["vocab"]
    vocab["zebra"] = vocab.pop("splade")
    with open(file, "w") as f:
        json.dump(tokenizer, f)


def test_route_is_resolved_as_sentence_transformers_does():
    """Unset: the model's default route; without one, refused listing the
    routes, as sentence-transformers refuses a Router call without a task.
    On a model without routes, `route` is refused."""
    from types import SimpleNamespace

    from vllm import PoolingParams
    from vllm.exceptions import VLLMValidationError

    def model(default_route):
        router = {"routes": ["query", "document"], "default_route": default_route}
        return SimpleNamespace(
            hf_config=SimpleNamespace(sparse_router=router),
            served_model_name="m",
        )

    params = PoolingParams(task="embed")
    params._verify_route(model("document"))
    assert params.route == "document"
    with pytest.raises(VLLMValidationError, match=r"no default route.*'query'"):
        PoolingParams(task="embed")._verify_route(model(None))
    plain = SimpleNamespace(hf_config=SimpleNamespace(), served_model_name="m")
    with pytest.raises(VLLMValidationError, match="has no routes"):
        PoolingParams(task="embed", route="query")._verify_route(plain)
    with pytest.raises(VLLMValidationError, match=r"does not support \['route'\]"):
        PoolingParams(task="token_embed", route="query")._verify_valid_parameters()


@pytest.mark.parametrize(
    "router_kwargs",
    [{"default_route": "query"}, {"default_route": None, "allow_empty_key": False}],
    ids=["static-default-route", "no-default-route"],
)
def test_start_up_profiles_the_model_route(
    router_kwargs: dict, vllm_runner, random_backbones, tmp_path
):
    """Start-up's dummy pooler run (memory profiling and warm-up) pools
    through the model and its head whatever the folder's default route: a
    static default pools no hidden states, and a folder without one would
    refuse the dummy request's missing route."""
    from vllm import PoolingParams
    from vllm.model_executor.models.splade import SPLADESparsePooler as pooler_cls

    path = str(tmp_path / "router")
    save_router_encoder(path, random_backbones["BertForMaskedLM"], **router_kwargs)
    pool_model = pooler_cls._pool_model
    pooled = []

    def recording_pool_model(self, hidden_states, lens):
        pooled.append(hidden_states.shape[0])
        return pool_model(self, hidden_states, lens)

    with pytest.MonkeyPatch.context() as m:
        # The engine core in this process, so that it runs the recording pooler.
        m.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        m.setattr(pooler_cls, "_pool_model", recording_pool_model)
        with router_runner(vllm_runner, path) as vllm_model:
            at_start = list(pooled)
            outputs = vllm_model.llm.embed(
                TEXTS[:1], pooling_params=PoolingParams(route="document")
            )
    assert at_start and max(at_start) > 0, "start-up pooled no hidden states"
    assert len(outputs) == 1 and len(pooled) > len(at_start)
