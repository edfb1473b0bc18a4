"""debian-archive.py SUITE [APT_DIR]: print the base address of the Debian
archive this machine's apt uses, for dists/SUITE/main/... files.

apt's sources are read as apt reads them: APT_DIR/sources.list (one-line
`deb URI SUITE COMPONENT...` entries), then APT_DIR/sources.list.d/*.list
and *.sources (deb822 stanzas: Types, URIs, Suites, Components, Enabled) in
name order. The first `deb` entry with the `main` component that lists
SUITE wins; if none lists it, the first `deb` entry with `main` (an archive
holds every suite under dists/). Exit status 1, naming what was read, when
there is none. APT_DIR defaults to /etc/apt."""
import re
import sys
from pathlib import Path


def one_line_entries(text: str):
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        # Options in brackets: `deb [arch=amd64 signed-by=...] URI ...`.
        line = re.sub(r"\[[^\]]*\]", " ", line)
        fields = line.split()
        if len(fields) >= 4:
            yield fields[0], [fields[1]], [fields[2]], fields[3:]


def deb822_entries(text: str):
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = None
        for line in stanza.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            if line[0].isspace() and key:  # a continuation line
                fields[key] += " " + line.strip()
                continue
            key, _, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
        if fields.get("enabled", "yes").lower() == "no":
            continue
        for kind in fields.get("types", "").split():
            yield (kind, fields.get("uris", "").split(),
                   fields.get("suites", "").split(),
                   fields.get("components", "").split())


def entries(apt_dir: Path):
    """(type, uris, suites, components) of every source, in apt's order."""
    files = [apt_dir / "sources.list"]
    files += sorted(p for p in (apt_dir / "sources.list.d").glob("*")
                    if p.suffix in (".list", ".sources"))
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        yield from (deb822_entries(text) if path.suffix == ".sources" else
                    one_line_entries(text))


def archive_base(suite: str, apt_dir: Path) -> str | None:
    main = [(uris, suites) for kind, uris, suites, components in
            entries(apt_dir) if kind == "deb" and "main" in components]
    for uris, suites in main:
        if suite in suites and uris:
            return uris[0].rstrip("/")
    for uris, _ in main:
        if uris:
            return uris[0].rstrip("/")
    return None


def main() -> int:
    suite = sys.argv[1]
    apt_dir = Path(sys.argv[2] if len(sys.argv) > 2 else "/etc/apt")
    base = archive_base(suite, apt_dir)
    if base is None:
        print(f"debian-archive: no `deb` source with the `main` component in "
              f"{apt_dir}/sources.list or {apt_dir}/sources.list.d/*.list, "
              "*.sources; set DEBIAN_MIRROR to a Debian archive's base "
              "address", file=sys.stderr)
        return 1
    print(base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
