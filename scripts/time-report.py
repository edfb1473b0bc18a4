"""time-report.py RUN: where a `make test` run's time went, from
build/timings.tsv (RUN, NAME, SECONDS[, ENGINES]: scripts/timed.sh and the
test lanes write it) and the lanes' closing pytest lines
(build/test-summary.txt). Its last line sums the lanes' tests as
"tests: N passed, N failed, N skipped"."""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def minutes(seconds: int) -> str:
    return f"{seconds // 60} min {seconds % 60:02d} s"


def main(run: str) -> None:
    rows = []
    timings = ROOT / "build/timings.tsv"
    if timings.is_file():
        for line in timings.read_text().splitlines():
            fields = line.split("\t")
            if fields[0] == run:
                rows.append(fields[1:])
    setup = [(name, int(s)) for name, s, *_ in rows if not name.startswith("lane")]
    lanes = [(name[5:], int(s), int(e[0]) if e else 0)
             for name, s, *e in rows if name.startswith("lane ")]
    # The lanes run at once: their wall time is the run's, not their sum.
    at_once = [int(s) for name, s, *_ in rows if name == "lanes, at once"]
    print(f"== where the time went (run {run})")
    for name, seconds in setup:
        print(f"  set-up  {name:<52} {minutes(seconds)}")
    for name, seconds, engines in lanes:
        print(f"  lane    {name:<52} {minutes(seconds)}  {engines} engine starts")
    total_setup = sum(s for _, s in setup)
    total_lanes = at_once[-1] if at_once else sum(s for _, s, _ in lanes)
    print(f"  total   set-up {minutes(total_setup)}, lanes {minutes(total_lanes)}"
          f"{' at once' if at_once else ''}"
          f" ({sum(e for *_, e in lanes)} engine starts), "
          f"all {minutes(total_setup + total_lanes)}")
    counts = {"passed": 0, "failed": 0, "skipped": 0, "error": 0}
    summary = ROOT / "build/test-summary.txt"
    if summary.is_file():
        for n, kind in re.findall(r"(\d+) (passed|failed|skipped|errors?)\b",
                                  summary.read_text()):
            counts["error" if kind.startswith("error") else kind] += int(n)
    failed = counts["failed"] + counts["error"]
    print(f"tests: {counts['passed']} passed, {failed} failed, "
          f"{counts['skipped']} skipped")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "manual")
