# SPDX-License-Identifier: Apache-2.0
"""The vllm-splade plugin wheel (dist/, scripts/build-plugin.sh): it ships
the series' own SPLADE modules, unchanged but for their imports; on stock
vLLM (the unpatched CPU build of the pin) it registers SPLADE and reads
SparseEncoder folders, saying so once; on the patched build it steps aside;
on another vLLM release it refuses. The vectors on stock are checked against
sentence-transformers in the vLLM lane (scripts/vllm-tests.sh --plugin)."""
import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TREE = ROOT / "build/vllm"
STOCK = Path(os.environ.get("SPLADE_STOCK_SITE", ROOT / "build/vllm-base-site"))


def _vendor():
    spec = importlib.util.spec_from_file_location(
        "vendor_series", ROOT / "scripts/vendor-series.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def wheel() -> zipfile.ZipFile:
    (path, ) = (ROOT / "dist").glob("vllm_splade-*.whl")
    with zipfile.ZipFile(path) as whl:
        yield whl


def test_wheel_ships_the_series_modules(wheel):
    """One source: each shipped module is the series' file with its imports
    pointed at the plugin, so the two cannot drift."""
    vendor = _vendor()
    for module, plugin_module in vendor.VENDORED.items():
        series = (TREE / (module.replace(".", "/") + ".py")).read_text()
        shipped = wheel.read(plugin_module.replace(".", "/") + ".py").decode()
        assert shipped == vendor.vendored(module, series), (
            f"{plugin_module} in the wheel is not the series' {module}: "
            "run make build-plugin")
    # The rest of the wheel is plugin/ itself, as it is.
    for name in wheel.namelist():
        if name.endswith(".py") and name.replace("/", ".")[:-3] not in (
                vendor.VENDORED.values()):
            source = (ROOT / "plugin" / name).read_text()
            assert wheel.read(name).decode() == source, name


def test_wheel_version_is_for_the_pinned_series(wheel):
    """The plugin's version (<vLLM series>.<fix>) names the pin's series:
    `make update-pin` moves both."""
    vendor = _vendor()
    info = next(n for n in wheel.namelist() if n.endswith("/METADATA"))
    version = wheel.read(info).decode().split("\nVersion: ")[1].split()[0]
    series = ".".join(vendor.release().split(".")[:2])
    assert version.startswith(series + "."), (version, series)


def _run(code: str, site: Path | None,
         **env_vars: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **env_vars}
    env.pop("PYTHONPATH", None)
    if site is not None:
        if not (site / "vllm").is_dir():
            pytest.fail(f"{site} has no vLLM: run scripts/build-base-site.sh")
        env["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


REGISTER = """
import json, vllm_splade
from importlib.metadata import version
from vllm import ModelRegistry
from vllm.transformers_utils.config import get_config, get_config_parser
vllm_splade.register()
vllm_splade.register()  # every process may load plugins more than once
models = {a: getattr(ModelRegistry.models[a], "module_name", "")
          for a in vllm_splade.MODELS}
config = get_config(FOLDER, trust_remote_code=False)
print(json.dumps({"vllm": version("vllm"), "models": models,
                  "parser": type(get_config_parser("hf")).__module__,
                  "architectures": config.architectures,
                  "pooling": getattr(config, "splade_pooling_strategy", None)}))
"""


@pytest.fixture(scope="module")
def sparse_encoder(splade_tiny, tmp_path_factory) -> str:
    from tests.checkpoints import ensure_folder, save_sparse_encoder_of
    out = tmp_path_factory.mktemp("st") / "splade-tiny-sparse-encoder"
    return str(ensure_folder(save_sparse_encoder_of, splade_tiny, out))


def test_serves_splade_on_stock_vllm(sparse_encoder):
    proc = _run(REGISTER.replace("FOLDER", repr(sparse_encoder)), STOCK)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.splitlines()[-1])
    assert "+base." in got["vllm"]
    assert all(m.startswith("vllm_splade.models.") for m in
               got["models"].values()), got
    assert got["parser"] == "vllm_splade.config"
    assert got["architectures"] == ["BertSpladeSparseEmbeddingModel"]
    assert got["pooling"] == "max"
    # vLLM's own class is replaced, DistilBERT added, and the log says so
    # once however often vLLM loads the plugin.
    assert proc.stderr.count("vllm-splade: serving") == 1, proc.stderr
    assert ("vllm-splade: serving BertSpladeSparseEmbeddingModel with the "
            "SPLADE series' classes") in proc.stderr
    assert "adding DistilBertForMaskedLM, DistilBertModel, Distil" in proc.stderr


def test_steps_aside_on_the_series(sparse_encoder):
    proc = _run(REGISTER.replace("FOLDER", repr(sparse_encoder)), None)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.splitlines()[-1])
    assert "+splade." in got["vllm"]
    assert got["models"]["BertSpladeSparseEmbeddingModel"] == (
        "vllm.model_executor.models.splade")
    assert got["parser"] == "vllm.transformers_utils.config"
    assert got["architectures"] == ["BertSpladeSparseEmbeddingModel"]
    assert "vllm-splade: serving" not in proc.stderr


def test_wraps_another_plugins_hf_parser(sparse_encoder):
    """A parser another plugin put in place for `hf` keeps working: the
    SparseEncoder reading runs after it."""
    code = f"""
from vllm.transformers_utils.config import (HFConfigParser, get_config,
                                            register_config_parser)
@register_config_parser("hf")
class Theirs(HFConfigParser):
    def parse(self, *args, **kwargs):
        config_dict, config = super().parse(*args, **kwargs)
        config.update({{"theirs": True}})
        return config_dict, config
import vllm_splade
vllm_splade.register()
config = get_config({str(sparse_encoder)!r}, trust_remote_code=False)
print(config.architectures[0], getattr(config, "theirs", False))
"""
    proc = _run(code, STOCK)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[-2:] == ["BertSpladeSparseEmbeddingModel", "True"]


def test_the_hf_wrapper_reaches_for_a_router_only_without_a_config(
        sparse_encoder, tmp_path):
    """The `hf` parser it wraps keeps its errors: only where a folder has
    no config.json does the wrapper look for a Router in it; anything else
    is raised as the wrapped parser raised it."""
    empty = tmp_path / "empty"
    empty.mkdir()
    code = f"""
from vllm.transformers_utils.config import (HFConfigParser, get_config,
                                            register_config_parser)
import vllm_splade
def parse(folder):
    try:  # config_format hf: the parser runs whether or not there is a config
        get_config(folder, trust_remote_code=False, config_format="hf")
        print("parsed")
    except Exception as error:
        print(type(error).__name__, str(error).splitlines()[0][:70])
parse({str(empty)!r})  # vLLM's own parser on a folder with nothing
vllm_splade.register()  # wraps it
parse({str(empty)!r})  # no config.json, no Router: the same error
@register_config_parser("hf")
class Broken(HFConfigParser):
    def parse(self, *args, **kwargs):
        raise ValueError("their parser broke")
vllm_splade._registered = False
vllm_splade.register()  # wraps theirs
parse({str(sparse_encoder)!r})  # a config.json: their error, untouched
parse({str(empty)!r})  # no config.json, no Router: their error
"""
    proc = _run(code, STOCK)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()[-4:]
    assert lines[0] != "parsed", lines
    assert lines[1] == lines[0], lines
    assert lines[2:] == ["ValueError their parser broke"] * 2, lines


ROUTES = """
import sys, torch
from vllm import LLM
from vllm_splade.stock import route_pooling_params
# Stock vLLM: `auto` finds no config.json at a Router folder's root, and the
# tokenizer is the model route's.
llm = LLM(model=FOLDER, runner="pooling", config_format="hf",
          tokenizer=FOLDER + "/document_0_MLMTransformer", dtype="float32",
          max_model_len=128, enforce_eager=True)
def encode(route, **kwargs):
    outputs = llm.encode(TEXTS, pooling_task="embed",
                         pooling_params=route_pooling_params(route), **kwargs)
    return torch.stack([o.outputs.data for o in outputs])
# sentence-transformers tokenizes a static route's input without special
# tokens (the series' vLLM does so itself).
static = {"tokenization_kwargs": {"add_special_tokens": False}}
torch.save({"query": encode("query", **static), "document": encode("document"),
            None: encode(None, **static),  # the default route: query
            "architecture": llm.model_config.architecture}, OUT)
"""


@pytest.fixture(scope="module")
def router_folder(splade_tiny, tmp_path_factory) -> str:
    """splade-tiny as an inference-free SparseEncoder whose default route is
    the static one (a seeded random table)."""
    from tests.models.language.pooling.test_splade_router import (
        save_router_encoder)
    out = tmp_path_factory.mktemp("st") / "splade-tiny-query-default"
    save_router_encoder(str(out), splade_tiny, default_route="query")
    return str(out)


def test_router_folder_on_stock_vllm(router_folder, tmp_path):
    """An inference-free Router folder on stock vLLM + the plugin, offline:
    the route in `extra_kwargs` (route_pooling_params; unset: the folder's
    default, here the static route), each route's vectors as
    sentence-transformers' encode_query / encode_document / encode, and a
    warning at load that the static default route needs its tokenization
    told."""
    import torch
    from sentence_transformers import SparseEncoder
    texts = ["what causes aging fast", "The capital of France is Paris.",
             "SPLADE pools masked-LM logits"]
    out = tmp_path / "routes.pt"
    code = (ROUTES.replace("FOLDER", repr(router_folder))
            .replace("TEXTS", repr(texts)).replace("OUT", repr(str(out))))
    proc = _run(code, STOCK, VLLM_PLUGINS="vllm_splade")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "'query', is a static one" in proc.stdout + proc.stderr
    got = torch.load(out)
    assert got.pop("architecture") == "BertSpladeSparseEmbeddingModel"
    encoder = SparseEncoder(router_folder, device="cpu")
    want = {
        "query": encoder.encode_query(texts, convert_to_tensor=True),
        "document": encoder.encode_document(texts, convert_to_tensor=True),
        None: encoder.encode(texts, convert_to_tensor=True),  # its default
    }
    for route, vectors in want.items():
        vectors = vectors.to_dense().float()
        assert torch.equal(got[route] > 0, vectors > 0), route
        atol = 1e-6 if route != "document" else 1e-5
        torch.testing.assert_close(got[route], vectors, rtol=0, atol=atol)
    assert not torch.equal(got["query"], got["document"])
