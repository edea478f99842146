"""``fastprof run``'s command line, read without argparse.

A profiled script's own imports must show in its profile as they would without fastprof:
argparse (with the shutil, bz2 and lzma it loads for its help) is among the most common
imports of a script, so the runner must not have loaded it first.  ``read`` reads the
options from one table (RUN_OPTIONS here, with report.options.VIEW_OPTIONS); cli builds its
argparse parser from the same table, for ``--help`` and for every command line ``read`` does
not take with certainty (it returns None: an abbreviation, a value that starts with ``-``, a
value its type refuses), so that argparse reads or refuses those in its own words.
"""

from __future__ import annotations

import types
from typing import Dict, List, Optional, Sequence, Tuple

from .report.options import VIEW_OPTIONS, Option, nonnegative_float, positive_int
from .stats import SORT_KEYS

__all__ = ["RUN_OPTIONS", "DEFAULT_SORT", "DEFAULT_TOP", "TOP_ROWS_HELP", "read", "split"]

DEFAULT_SORT = "tottime"
DEFAULT_TOP = 40

# --top's help, for run and view alike (15: report.tree_text.DEFAULT_TOP)
TOP_ROWS_HELP = (
    f"show the first N rows (default {DEFAULT_TOP} in the flat table, 15 in the call "
    f"tree's table of top functions)"
)

#: ``run``'s own options; the view options follow them (the order of ``--help``)
_OWN_OPTIONS = (
    Option(
        ("-o", "--outfile"),
        "outfile",
        "store",
        "write the profile to FILE (pstats format: pstats, snakeviz, gprof2dot, "
        "`fastprof view` read it) instead of printing the table",
        metavar="FILE",
    ),
    Option(
        ("-s", "--sort"),
        "sort",
        "store",
        f"sort key of the table (default {DEFAULT_SORT}): " + ", ".join(SORT_KEYS),
        metavar="SORT",
    ),
    Option(("--top",), "top", "store", TOP_ROWS_HELP, type=positive_int, metavar="N"),
    Option(("--all",), "all", "store_true", "show every row"),
    Option(
        ("--no-builtins",),
        "no_builtins",
        "store_true",
        "do not account builtins and C methods separately",
    ),
    Option(
        ("--clock",),
        "clock",
        "store",
        "wall time (default), this thread's CPU time, or the process's CPU time",
        default="wall",
        choices=("wall", "cpu", "process_cpu"),
    ),
    Option(
        ("--lines",),
        "lines",
        "store_true",
        "line-by-line timing of the functions marked @profile in the script (as kernprof -l)",
    ),
    Option(
        ("--lines-of",),
        "lines_of",
        "append",
        "line-by-line timing of this function (repeatable)",
        default=(),
        metavar="MODULE:FUNC",
    ),
    Option(
        ("-m",),
        "module",
        "store",
        "run a library module as a script (as python -m)",
        metavar="MODULE",
    ),
    Option(
        ("--subprocesses",),
        "subprocesses",
        "store_true",
        "profile the Python child processes too (fork, multiprocessing, "
        "ProcessPoolExecutor, subprocess running this Python) and report the "
        "profile merged over all processes, with a per-process table",
    ),
    Option(
        ("--no-worker-startup",),
        "no_worker_startup",
        "store_true",
        "with --subprocesses: a spawn worker's profile starts when its process starts "
        "running (Process.run: a pool's worker loop, your target), leaving out its start-up "
        "(multiprocessing's bootstrap, unpickling, and the re-import of the main script as "
        "__mp_main__ with its imports); cheaper, and exact from there on",
    ),
    Option(
        ("--run-dir",),
        "run_dir",
        "store",
        "keep each process's profile in DIR (read it again with `fastprof "
        "view DIR` or `fastprof merge DIR -o FILE`); under mpirun, torchrun or "
        "srun: the shared folder where each rank writes its profile named by "
        "its rank, and rank 0 reports the job",
        metavar="DIR",
    ),
    Option(
        ("--timeline",),
        "timeline",
        "store",
        "also write the timeline of every call, per thread, to OUT.json (Chrome's trace "
        "format: Perfetto and chrome://tracing open it)",
        metavar="OUT.json",
    ),
    Option(
        ("--timeline-buffer",),
        "timeline_buffer",
        "store",
        "keep the last N calls in the timeline (default 1000000; older ones are dropped "
        "and counted)",
        type=positive_int,
        metavar="N",
    ),
    Option(
        ("--timeline-min-us",),
        "timeline_min_us",
        "store",
        "leave calls shorter than F microseconds out of the timeline (counted)",
        type=nonnegative_float,
        metavar="F",
    ),
)

RUN_OPTIONS: Tuple[Option, ...] = _OWN_OPTIONS + tuple(VIEW_OPTIONS)

_BY_FLAG: Dict[str, Option] = {flag: o for o in RUN_OPTIONS for flag in o.flags}
# the long options argparse knows, its own --help among them (for abbreviations)
_LONG_FLAGS = sorted([f for f in _BY_FLAG if f.startswith("--")] + ["--help"])


def _takes_value(arg: str) -> bool:
    """Whether arg is an option of ``run`` that takes the next word as its value: one of the
    table's, or a long option abbreviated to a prefix only one option has, as argparse reads
    ``--out`` for ``--outfile``."""
    option = _BY_FLAG.get(arg)
    if option is not None:
        return option.action != "store_true"
    if not arg.startswith("--") or "=" in arg or len(arg) < 3:
        return False
    matches = [f for f in _LONG_FLAGS if f.startswith(arg)]
    return len(matches) == 1 and matches[0] in _BY_FLAG and _takes_value(matches[0])


def split(argv: Sequence[str]) -> Tuple[List[str], List[str]]:
    """Splits ``argv`` into fastprof's options and the target with its own arguments.

    The target starts at the first word that is not an option (the script) or at ``-m``'s
    value; everything after it belongs to the script.
    """
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return list(argv[:i]), list(argv[i + 1 :])
        if a == "-m":
            return list(argv[: i + 2]), list(argv[i + 2 :])
        if a.startswith("-m") and not a.startswith("--"):  # -mpkg.mod
            return list(argv[:i]) + ["-m", a[2:]], list(argv[i + 1 :])
        if _takes_value(a):
            i += 2
            continue
        if a.startswith("-") and a != "-":
            i += 1
            continue
        return list(argv[:i]), list(argv[i:])
    return list(argv), []


def _default(option: Option) -> object:
    """The value argparse gives ``option`` when the command line leaves it out."""
    if option.action == "store_true":
        return False
    if option.action == "append":
        return list(option.default)
    return option.default


def read(head: Sequence[str]) -> Optional[types.SimpleNamespace]:
    """The options in ``head`` (the first part of ``split``) as argparse's parser built from
    RUN_OPTIONS would read them, with ``target`` None and ``args`` empty; None where argparse
    must read them (a word not in the table exactly, a value that starts with ``-``, a value
    its type or choices refuse, ``--help``)."""
    values = {o.dest: _default(o) for o in RUN_OPTIONS}
    i = 0
    while i < len(head):
        word = head[i]
        value: Optional[str] = None
        if word in _BY_FLAG:
            option = _BY_FLAG[word]
        elif word.startswith("--") and "=" in word:
            name, value = word.split("=", 1)
            if name not in _BY_FLAG:
                return None
            option = _BY_FLAG[name]
        elif len(word) > 2 and word[0] == "-" and word[:2] in _BY_FLAG and "=" not in word:
            option, value = _BY_FLAG[word[:2]], word[2:]  # -oFILE
        else:
            return None
        i += 1
        if option.action == "store_true":
            if value is not None:
                return None
            values[option.dest] = True
            continue
        if value is None:
            if i >= len(head):
                return None
            value = head[i]
            i += 1
        if value.startswith("-"):
            return None
        try:
            converted = value if option.type is None else option.type(value)
        except Exception:
            return None
        if option.choices is not None and converted not in option.choices:
            return None
        if option.action == "append":
            values[option.dest].append(converted)  # type: ignore[attr-defined]
        else:
            values[option.dest] = converted
    values["target"] = None
    values["args"] = []
    return types.SimpleNamespace(**values)
