"""`python -m fastprof compare A B`: compare two saved benchmark runs (fastprof's or
pytest-benchmark's JSON, ``--fail median:5%``) or two call profiles (pstats files written by
fastprof -o, cProfile or dump_stats) outside pytest.

Exit status: 0 when no rule is broken, 1 when a benchmark regressed, 2 on bad usage or an
unreadable or malformed file (with one line on stderr saying which file and why).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, List, Optional, Tuple

from .report.escape import printable

_DEFAULT_TOP = 40
# fastprof.bench.sample_stats.COMPARABLE, which loads NumPy: two call profiles are compared
# without it (a test checks that the two agree)
_STATS = ("median", "mean", "min")


class _Unreadable(Exception):
    """A file compare cannot take; the message is the one line to print."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fastprof compare",
        description="Compare two saved benchmark runs (JSON written by --fastprof-save or "
        "pytest-benchmark): the ratio new/old of each benchmark with its 95% "
        "bootstrap confidence interval; a --fail rule is broken only when the "
        "whole interval lies beyond its threshold. Or compare two call profiles "
        "(pstats files written by fastprof -o, cProfile -o or dump_stats): calls, "
        "own and total time of each function in A and B and the change, the "
        "largest change first.",
    )
    p.add_argument("old", metavar="A", help="the baseline: A.json or A.prof")
    p.add_argument("new", metavar="B", help="the run to judge: B.json or B.prof")
    p.add_argument(
        "--fail",
        metavar="STAT:N%",
        action="append",
        default=[],
        help="benchmark runs: exit 1 when STAT (min, mean or median) is more than "
        "N%% slower with all its confidence interval; repeatable",
    )
    p.add_argument(
        "--stat",
        choices=_STATS,
        default=None,
        help="benchmark runs: statistic shown in the table (default: that of the first "
        "--fail rule, else median, as the pytest plugin shows)",
    )
    p.add_argument(
        "--by",
        choices=("own", "total", "calls"),
        default="own",
        help="profiles: sort by the change of own time (default), total time or calls",
    )
    p.add_argument(
        "--top",
        type=int,
        default=_DEFAULT_TOP,
        metavar="N",
        help=f"profiles: show the first N functions (default {_DEFAULT_TOP})",
    )
    p.add_argument("--all", action="store_true", help="profiles: show every function")
    p.add_argument(
        "--full-paths",
        action="store_true",
        help="profiles: do not strip directories from file names",
    )
    return p


def _bench() -> Tuple[Any, Any]:
    """fastprof.bench's regression and storage modules, which comparing benchmark runs needs
    (their statistics load NumPy); _Unreadable saying so when NumPy is missing."""
    try:
        from .bench import regression, storage
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] != "numpy":
            raise
        raise _Unreadable(
            "comparing benchmark runs (JSON) needs NumPy: pip install fastprof[kernels] "
            "(two call profiles, A.prof B.prof, compare without it)"
        ) from None
    return regression, storage


def _kind(path: str) -> str:
    """ "json", "pstats" or "unknown": what path holds, from its first bytes (a JSON object
    starts with '{' then '"' or '}'; a pstats file with marshal's dict code); raises
    OSError."""
    if not os.path.isfile(path):
        return "pstats"  # its loader says why it cannot be read (and a pipe is never opened)
    with open(path, "rb") as fh:
        head = fh.read(64)
    text = head.lstrip(b" \t\r\n\xef\xbb\xbf")
    if text[:1] == b"{":
        rest = text[1:].lstrip(b" \t\r\n")
        return "json" if rest[:1] in (b'"', b"}", b"") else "pstats"
    if text[:1] == b"[":
        return "json"
    return "pstats" if head[:1] == b"\xfb" else "unknown"


def _load(path: str) -> Tuple[str, Any]:
    """(kind, contents) of one file; raises _Unreadable with the line to print."""
    from .stats import load_pstats_file

    try:
        kind = _kind(path)
        if kind == "json":
            return kind, _bench()[1].load(path)
        if kind == "pstats":
            return kind, load_pstats_file(path)
    except (OSError, ValueError) as exc:
        raise _Unreadable(str(exc)) from None
    raise _Unreadable(
        f"{path}: neither a benchmark JSON nor a pstats profile (compare takes "
        f"two benchmark runs, A.json B.json, or two profiles, A.prof B.prof)"
    )


def _compare_runs(args: argparse.Namespace, old: Dict[str, Any], new: Dict[str, Any]) -> int:
    """Prints the comparison of two benchmark runs; returns the exit status."""
    regression, storage = _bench()
    try:
        rules = [regression.parse_rule(r, "--fail") for r in args.fail]
        storage.check_baseline(old, args.old)
        comps, only_old, only_new = regression.compare_runs(old, new, rules)
    except ValueError as exc:
        raise _Unreadable(str(exc)) from None
    print(f"old: {printable(args.old)}\nnew: {printable(args.new)}")
    for line in regression.format_comparison(comps, rules, args.stat):
        print(line)
    if only_old:
        print(f"only in {printable(args.old)}: {printable(', '.join(only_old))}")
    if only_new:
        print(f"only in {printable(args.new)}: {printable(', '.join(only_new))}")
    regressed = [c for c in comps if c.regressions]
    if regressed:
        print(f"{len(regressed)} benchmark(s) regressed")
        return 1
    return 0


def _compare_profiles(args: argparse.Namespace, old: Dict[Any, Any], new: Dict[Any, Any]) -> int:
    """Prints the table of two call profiles; returns 0."""
    from .report.profile_diff import diff_profiles, format_profile_diff

    if args.fail:
        raise _Unreadable("--fail applies to benchmark runs (JSON), not to profiles")
    if args.top < 1:
        raise _Unreadable(f"--top: expected a positive integer, got {args.top}")

    def totals(d: Dict[Any, Any]) -> Tuple[int, float]:
        return sum(v[1] for v in d.values()), sum(v[2] for v in d.values())

    from .diff import by_unaddressed, match_files

    def add(a: Any, b: Any) -> Any:  # pstats' entries: the counts and times summed
        return (*(x + y for x, y in zip(a[:4], b[:4])), a[4])

    # one row per function of two runs: a C function's name without its object address
    old, new = by_unaddressed(old, add), by_unaddressed(new, add)
    files = match_files(list(old), list(new))
    if files:  # a script cProfile named as typed and fastprof by its path: one row each
        old = {(files.get(k[0], k[0]), k[1], k[2]): v for k, v in old.items()}
    changes = diff_profiles(old, new, args.by)
    sys.stdout.write(
        format_profile_diff(
            changes,
            label_a=args.old,
            label_b=args.new,
            totals=(totals(old), totals(new)),
            top=None if args.all else args.top,
            strip_dirs=not args.full_paths,
            by=args.by,
        )
    )
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    """Run the compare command with argv (sys.argv[1:] when None); return the exit status."""
    parser = _parser()
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    except SystemExit as exc:  # argparse exits on --help (0) and on bad usage (2)
        return int(exc.code or 0)
    try:
        (kind_a, old), (kind_b, new) = _load(args.old), _load(args.new)
        if kind_a != kind_b:
            names = {"json": "a benchmark run", "pstats": "a profile"}
            raise _Unreadable(
                f"{args.old} is {names[kind_a]} but {args.new} is "
                f"{names[kind_b]}: compare takes two benchmark runs (JSON) or "
                f"two profiles (pstats)"
            )
        if kind_a == "json":
            return _compare_runs(args, old, new)
        return _compare_profiles(args, old, new)
    except _Unreadable as exc:
        print(f"fastprof compare: {printable(str(exc))}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
