"""Reading a run directory (one profile per process of a job, written by fastprof.children)
into one merged profile that can still be told apart per process.

``read_run(DIR)`` returns a ``Run``: ``stats`` (the pstats numbers summed over the processes),
``tree`` (one root per process, named by its pid; ``--merge-threads`` sums them path by path),
``lines`` (the line timings summed over the processes that wrote some, or None),
``procs`` (what each process was and spent), ``problems`` (files that could not be read: a
truncated file or one of another version is named with the reason, and the rest still merges)
and ``missing`` (processes that started but wrote no profile: killed outright).
"""

from __future__ import annotations

import json
import marshal
import os
import stat
import struct
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, TextIO, Tuple

from ._proc_tree import ProcTree, to_call_tree, tree_json
from .children import READS, TREE_SUFFIX, record_names

__all__ = [
    "Proc",
    "Run",
    "read_run",
    "is_run_dir",
    "format_processes",
    "format_ranks",
    "format_line_processes",
    "lines_path",
    "main",
]


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
    own: Dict[Any, float] = field(default_factory=dict)  # {key: tottime} of each function
    # {function key: (hits, seconds)} of the functions whose lines it timed
    lines: Dict[Any, Tuple[int, float]] = field(default_factory=dict)


@dataclass
class Run:
    stats: Any
    procs: List[Proc]
    problems: List[str]
    missing: List[Proc]
    missing_ranks: List[int] = field(default_factory=list)  # ranks that left no record at all
    lines: Any = None  # the line timings summed over the processes (a LineStats), or None
    # each process's tree (summed over its threads) under its root's ident, or None when no
    # process left one that could be read
    proc_trees: Optional[List[Tuple[int, ProcTree]]] = None
    # the pids of the processes in procs whose tree is not in proc_trees (no tree file, or
    # one that could not be read: problems names it)
    tree_left_out: List[int] = field(default_factory=list)
    _tree: Any = field(default=None, repr=False, compare=False)

    @property
    def tree(self) -> Any:
        """The call tree with one root per process (named by its pid), or None; built when
        first asked for (writing the merged files does not need it)."""
        if self._tree is None and self.proc_trees is not None:
            self._tree = to_call_tree(self.proc_trees)
        return self._tree


def is_run_dir(path: str) -> bool:
    """Whether path is a directory holding per-process files of a run."""
    if not os.path.isdir(path):
        return False
    return bool(_record_names(path))


def _read_meta(path: str) -> Dict[str, Any]:
    with open(path, "rb") as f:
        meta = json.loads(f.read().decode())
    if not isinstance(meta, dict) or "pid" not in meta:
        raise ValueError("not a fastprof process record")
    if meta.get("format") not in READS:
        raise ValueError(
            f"written by another version of fastprof (format {meta.get('format')!r}, "
            f"this version reads {' and '.join(map(str, READS))})"
        )
    return meta


def is_private_dir(path: str) -> bool:
    """Whether only this user (and root) can put files in the directory path: it is owned by
    this process's effective user and neither its group nor others may write to it (as
    tempfile.mkdtemp makes it)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (
        stat.S_ISDIR(st.st_mode)
        and st.st_uid == os.geteuid()
        and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


def read_run(run_dir: str, *, trusted: bool = False) -> Run:
    """The merged profile of run_dir.  ValueError when it holds no process record at all.

    Every file is read with fastprof's safe reader of marshal's format and checked field by
    field, unless trusted is true (the runner reading the run directory of its own job) and
    run_dir is private to this user (is_private_dir): then the processes' files, which only
    this user's processes could have written, are read with marshal itself and checked for
    their layout only."""
    from .stats import Stats

    if not os.path.isdir(run_dir):
        raise ValueError(f"{run_dir}: not a directory")
    names = sorted(_record_names(run_dir), key=_order)
    if not names:
        raise ValueError(f"{run_dir}: no process profiles (files PID.json and PID.prof) in it")
    own_files = trusted and is_private_dir(run_dir)
    summed: Dict[Any, List[Any]] = {}
    trees: Dict[int, ProcTree] = {}
    procs: List[Proc] = []
    missing: List[Proc] = []
    problems: List[str] = []
    left_out: List[int] = []
    sizes: List[int] = []
    line_stats: List[Any] = []
    for name in names:
        pid = int(name.rpartition("-")[2])
        base = os.path.join(run_dir, name)
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
        if isinstance(meta.get("world_size"), int):
            sizes.append(meta["world_size"])
        if not meta.get("complete") or not os.path.exists(base + ".prof"):
            missing.append(proc)
            continue
        try:
            data = _read_pstats(base + ".prof", own_files)
        except (OSError, ValueError, TypeError, EOFError) as e:
            msg = str(e)  # the reader's message names the file already
            problems.append(msg if msg.startswith(base + ".prof") else f"{base}.prof: {msg}")
            continue
        _sum_into(summed, data)
        proc.total_calls = sum(v[1] for v in data.values())
        proc.own = {k: v[2] for k, v in data.items()}
        proc.tottime = sum(proc.own.values())
        proc.top = sorted(proc.own.items(), key=lambda kv: -kv[1])[:3]
        procs.append(proc)
        try:
            one = _read_tree(base, own_files)
        except (OSError, ValueError) as e:
            problems.append(str(e))
            one = None
        if one is None:
            if data:  # a process that recorded nothing (SIGTERM at its start) lacks nothing
                left_out.append(pid)
        else:
            # one root per process, named by its pid (pids of ranks on other nodes can
            # repeat: those get a negative number of their own)
            ident = pid if pid not in trees else -len(trees) - 1
            trees[ident] = one
        if os.path.exists(base + ".lprof"):
            try:
                from .lines import load_stats

                ls = load_stats(base + ".lprof")
            except (OSError, ValueError) as e:
                problems.append(str(e))
            else:
                line_stats.append(ls)
                proc.lines = {
                    key: (sum(r[1] for r in rows), sum(r[2] for r in rows) * ls.unit)
                    for key, rows in ls.timings.items()
                }
    merged = Stats({k: (v[0], v[1], v[2], v[3], v[4]) for k, v in summed.items()})
    run = Run(merged, procs, problems, missing, tree_left_out=left_out)
    if trees:  # the processes that left none are named by format_processes
        run.proc_trees = list(trees.items())
    if line_stats:
        from .lines import LineStats

        run.lines = LineStats.from_stats_objects(*line_stats)
    if sizes:
        have = {p.rank for p in procs}  # a rank whose processes all wrote nothing is missing
        run.missing_ranks = [r for r in range(max(sizes)) if r not in have]
    return run


def _sum_into(acc: Dict[Any, List[Any]], data: Dict[Any, Any]) -> None:
    """Adds the pstats dictionary data (checked: see _read_pstats) to acc, {key: [cc, nc, tt,
    ct, callers]}, summing functions and their callers' entries."""
    from .stats import _add_edge

    for key, (cc, nc, tt, ct, callers) in data.items():
        cur = acc.get(key)
        if cur is None:
            acc[key] = [cc, nc, tt, ct, dict(callers)]
            continue
        cur[0] += cc
        cur[1] += nc
        cur[2] += tt
        cur[3] += ct
        mine = cur[4]
        for ck, cv in callers.items():
            prev = mine.get(ck)
            if prev is None:
                mine[ck] = cv
            elif type(prev) is tuple and type(cv) is tuple and len(prev) == len(cv) == 4:
                mine[ck] = (prev[0] + cv[0], prev[1] + cv[1], prev[2] + cv[2], prev[3] + cv[3])
            else:  # profile.py's bare call counts
                mine[ck] = _add_edge(prev, cv)


def _read_pstats(path: str, own_file: bool) -> Dict[Any, Any]:
    """The pstats dictionary of path: read with marshal when own_file (a file of this
    user's own job, in a folder only this user can write to), else with the safe reader
    and checked entry by entry.  OSError, ValueError, TypeError or EOFError otherwise."""
    if not own_file:
        from .stats import load_pstats_file

        return load_pstats_file(path)
    from ._files import read_regular_file

    data = marshal.loads(read_regular_file(path))
    if not isinstance(data, dict):
        raise ValueError(f"not a profile (it holds a {type(data).__name__}, expected a dict)")
    for value in data.values():  # the layout _sum_into relies on
        if type(value) is not tuple or len(value) != 5 or type(value[4]) is not dict:
            raise ValueError("not a profile (an entry is not (cc, nc, tt, ct, callers))")
    return data


def _read_tree(base: str, own_file: bool = False) -> Optional[ProcTree]:
    """The call tree a process wrote beside base.prof, summed over its threads: its records
    (base + TREE_SUFFIX, what fastprof.children writes; the core's raw records in files of
    earlier versions) or a saved tree (base.prof.tree.json); None when there is neither.
    OSError, or ValueError naming the file when it is malformed.  own_file: as for
    _read_pstats."""
    from . import _proc_tree

    raw = base + TREE_SUFFIX
    if os.path.exists(raw):
        from . import _marshal_reader
        from ._files import read_regular_file

        try:
            blob = read_regular_file(raw)
            if own_file:
                data = marshal.loads(blob)
            else:
                data = _marshal_reader.loads(blob, allow_bytes=True)
            if isinstance(data, tuple) and data[:1] == (_proc_tree.TAG,):
                return _proc_tree.decode(data, check=not own_file)
            return _proc_tree.from_root(_raw_tree(data).merged_threads())
        except (ValueError, TypeError, IndexError, KeyError, EOFError) as e:
            raise ValueError(f"{raw}: not a fastprof call tree ({e})") from None
    from .tree import CallTree, tree_path

    where = tree_path(base + ".prof")
    if os.path.exists(where):
        return _proc_tree.from_root(CallTree.load(where).merged_threads())
    return None


def _raw_tree(data: Any) -> Any:
    """The CallTree of the core's raw records as earlier versions wrote them: (seconds per
    tick, keys, nodes as little-endian int64 bytes, threads, merged, node cap)."""
    from .tree import CallTree

    tspt, keys, blob, threads, merged, cap = data
    keys = [tuple(k) for k in keys]
    if not all(len(k) == 3 for k in keys) or not isinstance(tspt, float):
        raise ValueError("malformed function keys")
    if not isinstance(blob, bytes) or len(blob) % 48:
        raise ValueError("malformed node records")
    nodes: List[Any] = list(struct.iter_unpack("<6q", blob))
    tree = CallTree.from_raw(tspt, keys, nodes, threads, merged, cap)
    if any(not 0 <= n.func < len(keys) for n in tree.nodes()):
        raise ValueError("a node names no known function")
    return tree


def lines_path(outfile: str) -> str:
    """Where merge writes the line timings beside the merged profile outfile: its name with
    ``.lprof`` in place of ``.prof`` (or added)."""
    stem = outfile[:-5] if outfile.endswith(".prof") else outfile
    return stem + ".lprof"


def format_line_processes(run: Run) -> str:
    """One note per function whose lines were timed: in how many processes it ran, and each
    process's hits and seconds (the busiest first, up to 8)."""
    if run.lines is None:
        return ""
    out = ["line timings summed over the processes:"]
    for key in sorted(run.lines.timings):
        ran = [(p, p.lines[key]) for p in run.procs if key in p.lines and p.lines[key][0]]
        ran.sort(key=lambda pr: (-pr[1][1], pr[0].pid))
        shown = ", ".join(f"{p.pid} ({h} hits, {t:.6f} s)" for p, (h, t) in ran[:8])
        more = f", and {len(ran) - 8} more" if len(ran) > 8 else ""
        name = _fn((key[0], key[1], key[2]))
        out.append(f"  {name}: ran in {len(ran)} process(es){': ' if ran else ''}{shown}{more}")
    return "\n".join(out) + "\n"


_record_names = record_names  # the process records' names (fastprof.children)


def _order(name: str) -> Any:
    rank, _, pid = name.rpartition("-")
    return (int(rank[4:]) if rank else -1, int(pid))


def _rank_done(run_dir: str, rank: int) -> bool:
    """Whether rank's runner has written its complete record into run_dir."""
    for name in _record_names(run_dir):
        if not name.startswith(f"rank{rank}-"):
            continue
        try:
            meta = _read_meta(os.path.join(run_dir, name + ".json"))
        except (OSError, ValueError):
            continue
        if meta.get("root") and meta.get("complete"):
            return True
    return False


def wait_for_ranks(
    run_dir: str, size: int, timeout: float, stop: Optional[Callable[[], bool]] = None
) -> List[int]:
    """Waits (up to timeout seconds, or until stop() is true: a SIGTERM came) until ranks
    0..size-1 have each written their runner's profile into run_dir; returns the ranks still
    without one."""
    import time

    deadline = time.monotonic() + timeout
    pending = list(range(size))
    while True:
        pending = [r for r in pending if not _rank_done(run_dir, r)]
        if not pending or time.monotonic() >= deadline or (stop is not None and stop()):
            return pending
        time.sleep(0.05)


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
        rank = str(p.rank) if p.rank is not None else "-"
        lines.append(
            f"{p.pid:>8} {p.ppid:>8} {rank:>5}  missing: started but wrote no profile "
            f"(killed, or still running?): {_label(p.argv)}"
        )
    for msg in run.problems:
        from .report.escape import printable

        lines.append(f"  unreadable: {printable(msg)}")
    if run.tree_left_out:
        lines.append(f"  {'' if run.proc_trees else 'no call tree: '}{tree_note(run)}")
    text = "\n".join(lines) + "\n"
    if any(p.rank is not None for p in run.procs + run.missing) or run.missing_ranks:
        text += "\n" + format_ranks(run)
    return text


def _spread(values: Sequence[float]) -> str:
    """min, max, max/mean of values (the load imbalance: 1.00 is even)."""
    mean = sum(values) / len(values)
    ratio = f"{max(values) / mean:8.2f}" if mean > 0 else f"{'-':>8}"
    return f"{min(values):9.3f} {max(values):9.3f} {ratio}"


def format_ranks(run: Run, top: int = 10, columns: int = 8) -> str:
    """The per-rank table of a job under a launcher: each rank's processes, wall time and own
    time, then the top functions' own time per rank (each rank's column up to ``columns``
    ranks) with min, max and max/mean, the load imbalance."""
    by_rank: Dict[int, List[Proc]] = {}
    for p in run.procs:
        if p.rank is not None:
            by_rank.setdefault(int(p.rank), []).append(p)
    ranks = sorted(by_rank)
    lines = [f"per rank: {len(ranks)} rank(s) with profiles"]
    if run.missing_ranks:
        lines[0] += f"; no profile from rank(s) {', '.join(map(str, run.missing_ranks))}"
    if not ranks:
        return "\n".join(lines) + "\n"
    lines.append(f"{'rank':>6} {'procs':>6} {'wall s':>9} {'own s':>9}")
    walls, owns = [], []
    for r in ranks:
        procs = by_rank[r]
        wall = max((p.wall or 0.0) for p in procs)
        own = sum(p.tottime for p in procs)
        walls.append(wall)
        owns.append(own)
        lines.append(f"{r:>6} {len(procs):>6} {wall:9.3f} {own:9.3f}")
    lines.append(f"{'':>6} {'':>6} {'min':>9} {'max':>9} {'max/mean':>8}")
    lines.append(f"{'wall':>13} {_spread(walls)}")
    lines.append(f"{'own':>13} {_spread(owns)}")
    per_rank: Dict[Any, Dict[int, float]] = {}
    for r in ranks:
        for p in by_rank[r]:
            for key, tt in p.own.items():
                cell = per_rank.setdefault(key, {})
                cell[r] = cell.get(r, 0.0) + tt
    keys = sorted(per_rank, key=lambda k: -sum(per_rank[k].values()))[:top]
    shown = ranks[:columns]
    head = "".join(f" {'rank ' + str(r):>9}" for r in shown)
    lines.append("")
    first = f" (the first {columns} ranks shown)" if len(ranks) > columns else ""
    lines.append(f"top functions, own time per rank in seconds{first}:")
    lines.append(f"{'function':<40}{head} {'min':>9} {'max':>9} {'max/mean':>8} {'slowest':>8}")
    for key in keys:
        cells = [per_rank[key].get(r, 0.0) for r in ranks]
        slowest = ranks[max(range(len(ranks)), key=lambda i: cells[i])]
        name = _fn(key)
        name = name if len(name) <= 40 else "..." + name[-37:]
        row = "".join(f" {per_rank[key].get(r, 0.0):9.3f}" for r in shown)
        lines.append(f"{name:<40}{row} {_spread(cells)} {slowest:>8}")
    return "\n".join(lines) + "\n"


def tree_note(run: Run) -> str:
    """What the run's call tree lacks, in a line: the processes it leaves out (empty when it
    has every process's tree)."""
    if not run.tree_left_out:
        return ""
    pids = ", ".join(str(p) for p in run.tree_left_out)
    if run.proc_trees is None:
        return f"no process left a readable PID{TREE_SUFFIX}"
    return (
        f"the call tree leaves out process(es) {pids} (no readable PID{TREE_SUFFIX}); the "
        f"flat table has them"
    )


def write_merged(run: Run, outfile: str) -> Optional[str]:
    """Writes the merged pstats file to outfile, its per-process tree beside it (only when it
    has every process's tree: a tree of fewer would not be the profile's, and view would not
    use it), and the merged line timings (when the processes timed lines) to
    lines_path(outfile); returns where those went, or None."""
    from .tree import tree_path

    run.stats.dump(outfile)
    where_tree = tree_path(outfile)
    if run.proc_trees is None or run.tree_left_out:
        try:
            os.unlink(where_tree)  # a stale tree of another profile must not pass for this one's
        except OSError:
            pass
    else:
        # joined from the processes' records, without building the tree (run.tree)
        with open(where_tree, "w", encoding="utf-8") as f:
            f.write(tree_json(run.proc_trees))
    if run.lines is None:
        return None
    where = lines_path(outfile)
    run.lines.to_file(where)
    return where


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
        help="the merged profile (pstats; its call tree is written beside it, and the "
        "processes' line timings summed to OUT's name with .lprof for .prof)",
    )
    opts = p.parse_args(list(argv))
    out = sys.stderr if stream is None else stream
    try:
        run = read_run(opts.dir)
        lines_out = write_merged(run, opts.outfile)
    except (OSError, ValueError) as e:
        from .report.escape import printable

        print(f"fastprof merge: {printable(str(e))}", file=sys.stderr)
        return 2
    out.write(format_line_processes(run) + format_processes(run))
    print(
        f"fastprof: merged profile of {len(run.procs)} process(es) written to {opts.outfile}"
        + (f" (line timings to {lines_out})" if lines_out else "")
        + (
            ", without its call tree (the processes' trees are not all there)"
            if run.tree_left_out
            else ""
        ),
        file=sys.stderr,
    )
    return 0
