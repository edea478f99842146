"""Reading a run directory (one profile per process of a job, written by fastprof.children)
into one merged profile that can still be told apart per process.

``read_run(DIR)`` returns a ``Run``: ``stats`` (the pstats numbers summed over the processes),
``tree`` (one root per process, named by its pid; ``--merge-threads`` sums them path by path),
``procs`` (what each process was and spent), ``problems`` (files that could not be read: a
truncated file or one of another version is named with the reason, and the rest still merges)
and ``missing`` (processes that started but wrote no profile: killed outright).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, TextIO

from .children import FORMAT

__all__ = ["Proc", "Run", "read_run", "is_run_dir", "format_processes", "main"]


@dataclass
class Proc:
    """One process of the job."""

    pid: int
    ppid: int
    argv: List[str]
    wall: Optional[float]
    rank: Optional[int]
    root: bool
    total_calls: int = 0
    tottime: float = 0.0  # the summed own time of its functions, in seconds
    top: List[Any] = field(default_factory=list)  # [(key, tottime)] of its costliest functions


@dataclass
class Run:
    stats: Any
    tree: Any
    procs: List[Proc]
    problems: List[str]
    missing: List[Proc]


def is_run_dir(path: str) -> bool:
    """Whether path is a directory holding per-process files of a run."""
    if not os.path.isdir(path):
        return False
    return any(n.endswith(".json") and n.split(".")[0].isdigit() for n in os.listdir(path))


def _read_meta(path: str) -> Dict[str, Any]:
    with open(path, "rb") as f:
        meta = json.loads(f.read().decode())
    if not isinstance(meta, dict) or "pid" not in meta:
        raise ValueError("not a fastprof process record")
    if meta.get("format") != FORMAT:
        raise ValueError(
            f"written by another version of fastprof (format {meta.get('format')!r}, "
            f"this version reads {FORMAT})"
        )
    return meta


def read_run(run_dir: str) -> Run:
    """The merged profile of run_dir.  ValueError when it holds no process record at all."""
    from .stats import Stats
    from .tree import CallTree, tree_path

    if not os.path.isdir(run_dir):
        raise ValueError(f"{run_dir}: not a directory")
    pids = sorted(
        int(n[:-5]) for n in os.listdir(run_dir) if n.endswith(".json") and n[:-5].isdigit()
    )
    if not pids:
        raise ValueError(f"{run_dir}: no process profiles (files PID.json and PID.prof) in it")
    merged = Stats()
    trees: Dict[int, Any] = {}
    procs: List[Proc] = []
    missing: List[Proc] = []
    problems: List[str] = []
    for pid in pids:
        base = os.path.join(run_dir, str(pid))
        try:
            meta = _read_meta(base + ".json")
        except (OSError, ValueError) as e:
            problems.append(f"{base}.json: {e}")
            continue
        proc = Proc(
            pid=pid,
            ppid=int(meta.get("ppid") or 0),
            argv=list(meta.get("argv") or []),
            wall=meta.get("wall"),
            rank=meta.get("rank"),
            root=bool(meta.get("root")),
        )
        if not meta.get("complete") or not os.path.exists(base + ".prof"):
            missing.append(proc)
            continue
        try:
            st = Stats(base + ".prof")
        except (OSError, ValueError, TypeError, EOFError) as e:
            problems.append(f"{base}.prof: {e}")
            continue
        merged.add(st)
        proc.total_calls = st.total_calls
        proc.tottime = st.total_tt
        proc.top = sorted(((r.key, r.tottime) for r in st.rows), key=lambda kv: -kv[1])[:3]
        procs.append(proc)
        where = tree_path(base + ".prof")
        if os.path.exists(where):
            try:
                trees[pid] = CallTree.load(where).merged_threads()
            except (OSError, ValueError) as e:
                problems.append(f"{where}: {e}")
    tree = CallTree(trees) if trees and len(trees) == len(procs) else None
    return Run(merged, tree, procs, problems, missing)


def _label(argv: Sequence[str], width: int = 60) -> str:
    from .report.escape import printable

    text = printable(" ".join(argv))
    return text if len(text) <= width else text[: width - 3] + "..."


def _fn(key: Any) -> str:
    return f"{os.path.basename(key[0])}:{key[1]}({key[2]})" if key[0] != "~" else key[2]


def format_processes(run: Run) -> str:
    """The per-process table: pid, parent, wall time, own time in functions, calls, the
    costliest function and the command line; then the missing and unreadable ones."""
    lines = [
        f"{len(run.procs)} process(es)"
        + (f", {len(run.missing)} missing" if run.missing else "")
        + (f", {len(run.problems)} unreadable file(s)" if run.problems else ""),
        f"{'pid':>8} {'parent':>8} {'rank':>5} {'wall s':>9} {'own s':>9} {'calls':>10}  "
        "top function / command line",
    ]
    for p in sorted(run.procs, key=lambda p: (not p.root, p.pid)):
        wall = f"{p.wall:9.3f}" if isinstance(p.wall, (int, float)) else f"{'?':>9}"
        rank = str(p.rank) if p.rank is not None else "-"
        top = _fn(p.top[0][0]) if p.top else "-"
        lines.append(
            f"{p.pid:>8} {p.ppid:>8} {rank:>5} {wall} {p.tottime:9.3f} {p.total_calls:>10}  {top}"
        )
        lines.append(f"{'':>55}{_label(p.argv)}")
    for p in run.missing:
        lines.append(
            f"{p.pid:>8} {p.ppid:>8}  missing: started but wrote no profile "
            f"(killed?): {_label(p.argv)}"
        )
    for msg in run.problems:
        from .report.escape import printable

        lines.append(f"  unreadable: {printable(msg)}")
    return "\n".join(lines) + "\n"


def write_merged(run: Run, outfile: str) -> None:
    """Writes the merged pstats file to outfile, and its per-process tree beside it."""
    from .report.source import save_tree

    run.stats.dump(outfile)
    save_tree(outfile, run.tree)


def main(argv: Sequence[str], stream: Optional[TextIO] = None) -> int:
    """``fastprof merge DIR -o OUT``: returns 0, or 2 with one line on stderr."""
    import argparse
    import sys

    p = argparse.ArgumentParser(
        prog="fastprof merge",
        description="Merge the per-process profiles of a run directory "
        "(fastprof run --subprocesses --run-dir DIR) into "
        "one pstats file, and print the per-process table.",
    )
    p.add_argument("dir", help="the run directory")
    p.add_argument(
        "-o",
        "--outfile",
        required=True,
        metavar="OUT",
        help="the merged profile (pstats; its call tree is written beside it)",
    )
    opts = p.parse_args(list(argv))
    out = sys.stderr if stream is None else stream
    try:
        run = read_run(opts.dir)
        write_merged(run, opts.outfile)
    except (OSError, ValueError) as e:
        from .report.escape import printable

        print(f"fastprof merge: {printable(str(e))}", file=sys.stderr)
        return 2
    out.write(format_processes(run))
    print(
        f"fastprof: merged profile of {len(run.procs)} process(es) written to {opts.outfile}",
        file=sys.stderr,
    )
    return 0
