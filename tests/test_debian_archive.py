# SPDX-License-Identifier: Apache-2.0
"""scripts/debian-archive.py: the Debian archive the eval's corpus comes
from is the one the machine's apt uses, in both source formats; a machine
with none gets a clear error. Temporary apt directories, no network."""
import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts/debian-archive.py"


def _module():
    spec = importlib.util.spec_from_file_location("debian_archive", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _apt(tmp_path: Path, files: dict[str, str]) -> Path:
    apt = tmp_path / "apt"
    (apt / "sources.list.d").mkdir(parents=True)
    for name, text in files.items():
        (apt / name).write_text(text)
    return apt


DEB822 = """\
Types: deb
# a mirror of the security archive first: wrong suite for the corpus
URIs: http://mirror.internal/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src deb
URIs: http://mirror.internal/debian/
Suites: bookworm bookworm-updates
Components: main contrib
"""


def test_deb822_sources(tmp_path):
    apt = _apt(tmp_path, {"sources.list.d/debian.sources": DEB822})
    assert _module().archive_base("bookworm", apt) == (
        "http://mirror.internal/debian")


def test_one_line_sources(tmp_path):
    apt = _apt(tmp_path, {
        "sources.list": (
            "# deb http://commented.out/debian bookworm main\n"
            "deb-src http://src.only/debian bookworm main\n"
            "deb [arch=amd64 signed-by=/k.gpg] http://corp.example/debian "
            "bookworm main non-free\n"),
    })
    assert _module().archive_base("bookworm", apt) == (
        "http://corp.example/debian")


def test_sources_list_first_then_files_in_name_order(tmp_path):
    apt = _apt(tmp_path, {
        "sources.list": "deb http://first.example/debian bookworm main\n",
        "sources.list.d/a.list": "deb http://second.example/debian bookworm main\n",
        "sources.list.d/z.sources.disabled": DEB822,
    })
    assert _module().archive_base("bookworm", apt) == (
        "http://first.example/debian")


def test_disabled_and_other_components_are_skipped(tmp_path):
    apt = _apt(tmp_path, {
        "sources.list.d/a.sources": (
            "Enabled: no\nTypes: deb\nURIs: http://off.example/debian\n"
            "Suites: bookworm\nComponents: main\n\n"
            "Types: deb\nURIs: http://contrib.example/debian\n"
            "Suites: bookworm\nComponents: contrib\n\n"
            "Types: deb\nURIs: http://trixie.example/debian\n"
            "Suites: trixie\nComponents: main\n"),
    })
    # No source lists the suite: the first main archive holds it too.
    assert _module().archive_base("bookworm", apt) == (
        "http://trixie.example/debian")


def test_no_sources_is_a_clear_error(tmp_path):
    apt = _apt(tmp_path, {})
    proc = subprocess.run([sys.executable, str(SCRIPT), "bookworm", str(apt)],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and not proc.stdout
    assert f"no `deb` source with the `main` component in {apt}" in proc.stderr
    assert "DEBIAN_MIRROR" in proc.stderr


def test_eval_inputs_name_no_host():
    """eval-inputs.txt pins the path, release and sha256; the host is the
    machine's (apt's sources, or DEBIAN_MIRROR in fetch-corpus.sh)."""
    assert "://" not in (ROOT / "eval-inputs.txt").read_text()
    text = (ROOT / "scripts/fetch-corpus.sh").read_text()
    assert "${DEBIAN_MIRROR:-$(python3 scripts/debian-archive.py" in text
