# SPDX-License-Identifier: Apache-2.0
"""vllm-splade as a package an operator installs beside their own vLLM:
pip keeps the vLLM that is there, every build of the series it is written
for is served, another series is refused loudly (the SPLADE architectures
fail to load with the reason, other models are untouched, the endpoint is
absent), and the sdist builds the same wheel, byte for byte, on every
Python vLLM supports."""
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STOCK = Path(os.environ.get("SPLADE_STOCK_SITE", ROOT / "build/vllm-base-site"))
UV = ROOT / "build/tools/bin/uv"
# What scripts/build-plugin.sh builds with: zip times from it, not the clock.
SOURCE_DATE_EPOCH = "315532800"


def plugin_wheel() -> Path:
    (path, ) = (ROOT / "dist").glob("vllm_splade-*.whl")
    return path


def plugin_sdist() -> Path:
    (path, ) = (ROOT / "dist").glob("vllm_splade-*.tar.gz")
    return path


def run(args, **kwargs) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(kwargs.pop("env", {}))
    proc = subprocess.run([str(a) for a in args], capture_output=True,
                          text=True, timeout=600, env=env, **kwargs)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


@pytest.mark.parametrize(("version", "series"), [
    ("0.34.0", "0.34"),
    ("0.34.1", "0.34"),
    ("0.34.0.post1", "0.34"),
    ("0.34.0rc2", "0.34"),
    ("0.34.1.dev12+g1234abcd", "0.34"),
    ("0.34.0+cpu", "0.34"),
    ("0.34.0+splade.3a611650.cpu", "0.34"),
    ("0.35.0", "0.35"),
    ("dev", None),  # vLLM's own fallback when it cannot read its version
])
def test_every_build_of_a_series_is_that_series(version, series):
    from vllm_splade import vllm_series
    assert vllm_series(version) == series


def standin_vllm(version: str, folder: Path) -> Path:
    """A wheel named vllm at `version` with nothing in it but a module."""
    name = f"vllm-{version}.dist-info"
    wheel = folder / f"vllm-{version}-py3-none-any.whl"
    files = {
        "vllm_standin.py": f"VERSION = {version!r}\n",
        f"{name}/METADATA": f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n",
        f"{name}/WHEEL": ("Wheel-Version: 1.0\nGenerator: splade-for-vllm tests\n"
                          "Root-Is-Purelib: true\nTag: py3-none-any\n"),
    }
    files[f"{name}/RECORD"] = "".join(f"{n},,\n" for n in files) + f"{name}/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as z:
        for n, text in files.items():
            z.writestr(n, text)
    return wheel


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    """A package index of stand-in vLLM releases, newest 0.36.0."""
    folder = tmp_path_factory.mktemp("index")
    for version in ["0.33.0", "0.34.0", "0.34.1", "0.34.0rc1", "0.35.0",
                    "0.36.0", "0.37.0rc1"]:
        standin_vllm(version, folder)
    return folder


@pytest.mark.parametrize("installed",
                         ["0.34.1", "0.35.0", "0.34.0rc1", "0.33.0", None])
def test_pip_keeps_the_vllm_that_is_installed(installed, index, tmp_path):
    """pip installs the plugin wheel with its dependencies resolved against
    an index that offers other vLLM releases (0.34.0, 0.36.0, a 0.37 rc),
    into a venv that has a vLLM already, or none: pip leaves vLLM as it
    was (an older series stays too: the gate refuses it at load, loudly)."""
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv])
    pip = [venv / "bin/python", "-m", "pip", "install", "--no-index",
           "--find-links", index, "--disable-pip-version-check", "--quiet"]
    if installed:
        run([*pip, f"vllm=={installed}"])
    run([*pip, plugin_wheel()])
    listed = json.loads(run([venv / "bin/python", "-m", "pip", "list",
                             "--format", "json"]).stdout)
    versions = {p["name"]: p["version"] for p in listed}
    assert versions.get("vllm") == installed
    assert versions["vllm-splade"] == plugin_wheel().name.split("-")[1]


@pytest.fixture(scope="module")
def other_series_site(tmp_path_factory) -> Path:
    """Stock vLLM reporting itself as 0.35.0 (a site whose vllm/ links to the
    stock build's files but for vllm/_version.py): another release series
    for the plugin."""
    site = tmp_path_factory.mktemp("vllm-0.35")
    (site / "vllm").mkdir()
    for entry in (STOCK / "vllm").iterdir():
        if entry.name != "_version.py":
            (site / "vllm" / entry.name).symlink_to(entry)
    (site / "vllm/_version.py").write_text(
        "__version__ = version = '0.35.0'\n"
        "__version_tuple__ = version_tuple = (0, 35, 0)\n"
        "__commit_id__ = commit_id = None\n")
    return site


REFUSED = """
import json, logging
import vllm_splade
from vllm import ModelRegistry, __version__
from vllm.model_executor.models.registry import _try_load_model_cls
vllm_splade.register()
models = ModelRegistry.models
out = {"vllm": __version__,
       "modules": {a: getattr(models.get(a), "module_name", None)
                   for a in ["BertSpladeSparseEmbeddingModel", "BertModel",
                             "DistilBertModel"]},
       "splade": repr(_try_load_model_cls("BertSpladeSparseEmbeddingModel",
                                          models["BertSpladeSparseEmbeddingModel"])),
       "bert": repr(_try_load_model_cls("BertModel", models["BertModel"]))}
from vllm_splade.embed_sparse import EmbedSparsePlugin
try:
    EmbedSparsePlugin()
    out["endpoint"] = "loaded"
except RuntimeError as error:
    out["endpoint"] = str(error)
from vllm import LLM
for key, kwargs in [  # what a user of a SPLADE model gets
        ("llm", dict(model=SPLADE_TINY, hf_overrides={
            "architectures": ["BertSpladeSparseEmbeddingModel"]})),
        ("folder", dict(model=SPARSE_ENCODER))]:  # no flags
    try:
        LLM(runner="pooling", enforce_eager=True, **kwargs)
        out[key] = "started"
    except Exception as error:
        out[key] = f"{type(error).__name__}: {error}"
print(json.dumps(out))
"""


def test_another_series_is_refused_loudly(other_series_site, splade_tiny,
                                         tmp_path):
    """On vLLM 0.35 the SPLADE architectures and SparseEncoder folders fail
    to load with the reason (what is installed, what is needed), where
    stock would serve the folder as the masked-LM model its config.json
    names; vLLM's other models are untouched, DistilBERT is not added, and
    the endpoint refuses with the same reason."""
    from tests.checkpoints import save_sparse_encoder_of
    folder = tmp_path / "sparse-encoder"
    save_sparse_encoder_of(splade_tiny, str(folder))
    code = (REFUSED.replace("SPLADE_TINY", repr(splade_tiny))
            .replace("SPARSE_ENCODER", repr(str(folder))))
    proc = run([sys.executable, "-c", code], cwd=ROOT,
               env={"PYTHONPATH": str(other_series_site), "HF_HUB_OFFLINE": "1"})
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["vllm"] == "0.35.0"
    assert got["modules"] == {
        "BertSpladeSparseEmbeddingModel": "vllm_splade.refused",
        "BertModel": "vllm.model_executor.models.bert",
        "DistilBertModel": None,
    }
    assert got["splade"] == "None"  # vLLM could not load it ...
    assert "bert.BertEmbeddingModel" in got["bert"]  # ... and the others
    reason = ("vllm-splade 0.34.0 is written for vLLM 0.34.x, but vLLM 0.35.0 "
              "is installed")
    # ... and says why: in the log at start-up and where it loads.
    log = proc.stdout + proc.stderr
    assert reason in log
    assert ("Error in loading model architecture "
            "'BertSpladeSparseEmbeddingModel'") in log
    assert "pip install 'vllm==0.34.*'" in log
    assert got["endpoint"].startswith(reason)
    # An engine of a SPLADE model does not start: vLLM names the
    # architecture, and the reason is in its log just above.
    assert ("Model architectures ['BertSpladeSparseEmbeddingModel'] failed "
            "to be inspected") in got["llm"], got["llm"]
    assert "is a sparse encoder; " + reason in got["folder"], got["folder"]
    assert log.count(reason) >= 3, log[-3000:]


PROBE = """
from vllm_splade import compat
print([compat.missing_internals(p) for p in
       ["models", "embed_sparse", "transformers_utils"]])
"""


def test_the_probe_names_the_internals_a_build_lacks(monkeypatch):
    """Stock vLLM 0.34 and the patched build have every vLLM name the
    shipped modules import; a 0.34 build that lacks one is refused, naming
    it, where those modules load."""
    proc = run([sys.executable, "-c", PROBE], cwd=ROOT,
               env={"PYTHONPATH": str(STOCK)})
    assert proc.stdout.splitlines()[-1] == "[[], [], []]"
    from vllm_splade import compat, refusal_reason
    for subpackage in ["models", "embed_sparse", "transformers_utils"]:
        assert compat.missing_internals(subpackage) == [], subpackage
    import vllm.model_executor.models.bert as bert
    monkeypatch.delattr(bert, "BertLayer")
    missing = compat.missing_internals("models")
    assert missing == ["vllm.model_executor.models.bert.BertLayer"]
    assert "lacks vllm.model_executor.models.bert.BertLayer" in (
        refusal_reason(missing))
    with pytest.raises(ImportError, match="lacks vllm.model_executor"):
        compat.check_internals("models")


def wheel_members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist()}


def test_the_wheel_is_publishable():
    files = wheel_members(plugin_wheel())
    info = next(n.split("/")[0] for n in files if n.endswith("/METADATA"))
    metadata = files[f"{info}/METADATA"].decode()
    assert "License-Expression: Apache-2.0" in metadata
    assert "Requires-Python: <3.15,>=3.11" in metadata
    assert "Requires-Dist" not in metadata  # not even vllm: pip leaves it be
    assert "Classifier: Typing :: Typed" in metadata
    assert "Project-URL: " in metadata
    assert f"{info}/licenses/LICENSE" in files
    assert b"Apache License" in files[f"{info}/licenses/LICENSE"]
    assert b"derived from vLLM" in files[f"{info}/licenses/NOTICE"]
    assert "vllm_splade/py.typed" in files
    points = files[f"{info}/entry_points.txt"].decode()
    assert "[vllm.general_plugins]\nvllm_splade = vllm_splade:register" in points
    assert ("[vllm.endpoint_plugins]\nvllm_splade_embed_sparse = "
            "vllm_splade.embed_sparse:EmbedSparsePlugin") in points
    # Built at a fixed time, not the clock's: the same inputs, the same bytes.
    with zipfile.ZipFile(plugin_wheel()) as z:
        assert {i.date_time for i in z.infolist()} == {(1980, 1, 1, 0, 0, 0)}


def interpreters() -> list[str]:
    """Python 3.11 (this one) and whichever of 3.12 and 3.13 the machine has
    that runs (pyenv's, on these machines, outside its shims); at least one
    of them must be there."""
    found = [sys.executable]
    for minor in ("3.12", "3.13"):
        candidates = [shutil.which(f"python{minor}")] + sorted(
            map(str, (Path.home() / ".pyenv/versions").glob(
                f"{minor}.*/bin/python{minor}")))
        for python in filter(None, candidates):
            if subprocess.run([python, "-c", ""], capture_output=True).returncode == 0:
                found.append(python)
                break
    assert len(found) >= 2, "no Python 3.12 or 3.13 here to build with"
    return found


def test_the_sdist_builds_the_same_wheel_on_every_python(tmp_path):
    """`make build-plugin`'s script, run with a venv of Python 3.12 and 3.13
    that has requirements/tools.txt (a 3.12+ venv has no setuptools of its
    own), makes the same wheel as the tools venv's Python 3.11, byte for
    byte; and the sdist holds everything the wheel needs (the series'
    modules included): `pip wheel` of it, offline, gives that wheel too."""
    with tarfile.open(plugin_sdist()) as sdist:
        names = sdist.getnames()
    top = names[0].split("/")[0]
    for member in ["LICENSE", "NOTICE", "pyproject.toml", "PKG-INFO",
                   "vllm_splade/models/splade.py", "vllm_splade/py.typed"]:
        assert f"{top}/{member}" in names, member
    want = plugin_wheel().read_bytes()
    for n, python in enumerate(interpreters()):
        venv = tmp_path / f"venv{n}"
        run([python, "-m", "venv", venv])
        run([UV, "pip", "install", "--quiet", "--python", venv / "bin/python",
             "-r", ROOT / "requirements/tools.txt"])
        out = tmp_path / f"dist{n}"
        run([ROOT / "scripts/build-plugin.sh"], cwd=ROOT,
            env={"TOOLS_PYTHON": str(venv / "bin/python"), "DIST": str(out)})
        (built, ) = out.glob("*.whl")
        assert built.name == plugin_wheel().name
        assert built.read_bytes() == want, python
        from_sdist = tmp_path / f"from-sdist{n}"
        run([venv / "bin/python", "-m", "pip", "wheel", "--quiet", "--no-deps",
             "--no-build-isolation", "--no-index", "-w", from_sdist,
             plugin_sdist()],
            env={"SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH})
        assert (from_sdist / built.name).read_bytes() == want, python
