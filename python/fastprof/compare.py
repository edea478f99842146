"""`python -m fastprof compare A.json B.json [--fail median:5%]`: compare two saved benchmark
runs (fastprof's or pytest-benchmark's JSON) outside pytest.

Exit status: 0 when no rule is broken, 1 when a benchmark regressed, 2 on bad usage or an
unreadable file.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from .bench import compare, storage
from .bench.stats import COMPARABLE


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m fastprof compare",
        description="Compare two saved benchmark runs: the ratio new/old of each benchmark with "
                    "its 95%% bootstrap confidence interval. A --fail rule is broken only when "
                    "the whole interval lies beyond its threshold.",
    )
    p.add_argument("old", metavar="A.json", help="the baseline run")
    p.add_argument("new", metavar="B.json", help="the run to judge")
    p.add_argument("--fail", metavar="STAT:N%", action="append", default=[],
                   help="exit 1 when STAT (min, mean or median) is more than N%% slower with all "
                        "its confidence interval; repeatable")
    p.add_argument("--stat", choices=COMPARABLE, default="median",
                   help="statistic shown in the table (default: median)")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    """Run the compare command with argv (sys.argv[1:] when None); return the exit status."""
    parser = _parser()
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    except SystemExit as exc:  # argparse exits on --help (0) and on bad usage (2)
        return int(exc.code or 0)
    try:
        rules = [compare.parse_rule(r, "--fail") for r in args.fail]
        old, new = storage.load(args.old), storage.load(args.new)
    except (OSError, ValueError) as exc:
        print(f"fastprof compare: {exc}", file=sys.stderr)
        return 2
    comps, only_old, only_new = compare.compare_runs(old, new, rules)
    print(f"old: {args.old}\nnew: {args.new}")
    for line in compare.format_comparison(comps, rules, args.stat):
        print(line)
    if only_old:
        print(f"only in {args.old}: {', '.join(only_old)}")
    if only_new:
        print(f"only in {args.new}: {', '.join(only_new)}")
    regressed = [c for c in comps if c.regressions]
    if regressed:
        print(f"{len(regressed)} benchmark(s) regressed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
