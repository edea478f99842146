"""What ``python -m fastprof run`` costs end to end against ``python -m cProfile`` on a program
with a large call tree (many distinct call paths): the run, then the report.  A call profile
of such a program is cheap to record; what the runner does after the script (the call tree
built, walked, saved) can cost more than the run.

The program is generated: N functions, each calling three later ones, to a depth of 8, run
from 40 starting points three times (about 110,000 distinct call paths, 340,000 calls, 40 ms
bare).  Each round runs every command once, in a shuffled order (interleaved), each a new
process; the table gives each command's median wall time, its ratio to cProfile's command of
the same kind (``run --html``, which writes the profile to a file too, is put beside
``cProfile -o``), and, with ``--old PATH`` (the ``python`` folder of another fastprof:
``git archive REV python | tar -x -C /tmp/old`` makes ``/tmp/old/python``, to which the
compiled cores ``python/fastprof/_fastprof*.so`` of this checkout are copied, so that both
run the same core), that version's figures beside.

    python benchmarks/cli_report.py [--rounds 9] [--functions 400] [--old /tmp/old/python]
        [--site-packages]

With ``--site-packages`` the generated functions are a library in a ``site-packages`` folder
(``widelib``) that a two-line script imports and calls: the call tree view folds their frames
into the library's row, which reads every path below it.

With ``--view FILE`` (a pstats file) it times the report of a saved profile instead, all on
that file and interleaved, each round in a shuffled order: ``python -m fastprof view FILE``
and ``pstats.Stats(FILE)`` (each a new process; ``old``'s view too with ``--old``), and, in
this process on the file's bytes, fastprof's compiled reader (``_marshal_reader.loads``), its
Python reference (``_marshal_reader.reference_loads``) and ``marshal.loads``.

    python benchmarks/cli_report.py --view FILE [--rounds 9] [--old /tmp/old/python]

``--view wide`` makes the file first: a program importing 100 generated modules of 1,000
functions each and calling every function once, run under ``python -m cProfile -o`` (a
profile of 100,203 functions, 9.2 MB).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(os.path.dirname(HERE), "python")


def program(functions: int) -> str:
    """The generated program's text (the same for a given number of functions)."""
    rng = random.Random(1)
    out = []
    for i in range(functions):
        kids = rng.sample(range(i + 1, functions), k=min(3, functions - i - 1))
        body = "".join(f"    f{k}(d + 1)\n" for k in kids)
        out.append(f"def f{i}(d):\n    if d > 7:\n        return\n{body}")
    out.append("for r in range(3):\n    for i in range(40):\n        globals()['f%d' % i](0)\n")
    return "\n".join(out)


def commands(script: str, out: str) -> Dict[str, Tuple[List[str], str]]:
    """{name: (argv after python, kind)}: kind pairs each fastprof command with cProfile's."""
    return {
        "cProfile -o": (["-m", "cProfile", "-o", out + ".c", script], "-o"),
        "fastprof run -o": (["-m", "fastprof", "run", "-o", out + ".f", script], "-o"),
        # the HTML report: the profile in a file too, put beside cProfile's -o
        "fastprof run --html": (["-m", "fastprof", "run", "--html", out + ".html", script], "-o"),
        "cProfile -s tottime": (["-m", "cProfile", "-s", "tottime", script], "-s"),
        "fastprof run -s tottime": (["-m", "fastprof", "run", "-s", "tottime", script], "-s"),
        "fastprof run (call tree)": (["-m", "fastprof", "run", script], "-s"),
        "python (no profiler)": ([script], "bare"),
    }


def timed(argv: List[str], package: str, extra: str = "") -> float:
    """Wall seconds of one ``python ARGV`` with package first on PYTHONPATH (then extra)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (package, extra) if p))
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, *argv],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - t0


def view_commands(path: str) -> Dict[str, List[str]]:
    """{name: argv after python} of the processes --view times."""
    return {
        "fastprof view": ["-m", "fastprof", "view", path],
        "pstats.Stats(FILE)": ["-c", "import pstats, sys; pstats.Stats(sys.argv[1])", path],
        # what the view shows, made by pstats: the 40 rows of most own time
        "pstats: load, sort, print 40": [
            "-c",
            "import pstats, sys; pstats.Stats(sys.argv[1]).sort_stats('tottime').print_stats(40)",
            path,
        ],
        "python (start-up)": ["-c", "pass"],
    }


def view_readers(data: bytes) -> Dict[str, Callable[[], object]]:
    """{name: a call reading data} of the readers --view times in this process."""
    import marshal

    sys.path.insert(0, PACKAGE)
    from fastprof import _marshal_reader

    return {
        "reader, compiled (loads)": lambda: _marshal_reader.loads(data),
        "reader, Python (reference)": lambda: _marshal_reader.reference_loads(data),
        "marshal.loads": lambda: marshal.loads(data),
    }


def make_wide_profile(folder: str, modules: int = 100, per: int = 1000) -> str:
    """Writes the wide program (``modules`` generated modules of ``per`` functions, each
    called once) in folder, profiles it with ``python -m cProfile -o``; returns the file."""
    pkg = os.path.join(folder, "widemods")
    os.makedirs(pkg, exist_ok=True)
    open(os.path.join(pkg, "__init__.py"), "w").close()
    for m in range(modules):
        with open(os.path.join(pkg, f"mod{m:04d}.py"), "w") as f:
            f.write("".join(f"def func_{m}_{i}(x):\n    return x + {i}\n" for i in range(per)))
    with open(os.path.join(folder, "wide.py"), "w") as f:
        f.write(
            "import importlib\n"
            f"mods = [importlib.import_module(f'widemods.mod{{m:04d}}') for m in range({modules})]\n"
            "def main():\n"
            "    s = 0\n"
            "    for m, mod in enumerate(mods):\n"
            f"        for i in range({per}):\n"
            "            s += getattr(mod, f'func_{m}_{i}')(i)\n"
            "    return s\n"
            "main()\n"
        )
    out = os.path.join(folder, "wide.prof")
    subprocess.run([sys.executable, "-m", "cProfile", "-o", out, "wide.py"], cwd=folder, check=True)
    return out


def view_report(path: str, rounds: int, old: Optional[str]) -> None:
    """Prints the medians of fastprof view, pstats and the readers on the pstats file path."""
    with open(path, "rb") as f:
        data = f.read()
    cmds = view_commands(path)
    readers = view_readers(data)
    runs: List[Tuple[str, str]] = [(name, PACKAGE) for name in cmds] + [
        (name, "") for name in readers
    ]
    if old:
        runs.append(("fastprof view", old))
    times: Dict[Tuple[str, str], List[float]] = {r: [] for r in runs}
    rng = random.Random(7)
    for _ in range(rounds):
        order = list(runs)
        rng.shuffle(order)
        for name, package in order:
            if name in readers:
                t0 = time.perf_counter()
                readers[name]()
                times[(name, package)].append(time.perf_counter() - t0)
            else:
                times[(name, package)].append(timed(cmds[name], package))
    med = {r: statistics.median(v) for r, v in times.items()}
    print(
        f"# {platform.python_implementation()} {platform.python_version()}, "
        f"{platform.machine()}, {os.cpu_count()} cores; {os.path.basename(path)}, "
        f"{len(data)} bytes; medians of {rounds} interleaved rounds"
    )
    print(f"{'':<28} {'seconds':>9} {'ratio':>7}")
    pstats_s = med[("pstats.Stats(FILE)", PACKAGE)]
    for name in cmds:
        this = med[(name, PACKAGE)]
        print(f"{name:<28} {this:9.3f} {this / pstats_s:7.2f}  (/pstats.Stats)")
    if old:
        this = med[("fastprof view", old)]
        print(f"{'fastprof view (old)':<28} {this:9.3f} {this / pstats_s:7.2f}  (/pstats.Stats)")
    marshal_s = med[("marshal.loads", "")]
    for name in readers:
        this = med[(name, "")]
        print(f"{name:<28} {this:9.3f} {this / marshal_s:7.2f}  (/marshal.loads)")


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--functions", type=int, default=400)
    ap.add_argument("--old", help="the python folder of another fastprof, for its figures")
    ap.add_argument("--view", metavar="FILE", help="time the report of this pstats file")
    ap.add_argument(
        "--site-packages",
        action="store_true",
        help="run the program as a library in a site-packages folder, behind a two-line script",
    )
    opts = ap.parse_args(argv)
    if opts.view:
        if opts.view == "wide":
            with tempfile.TemporaryDirectory() as folder:
                view_report(make_wide_profile(folder), opts.rounds, opts.old)
        else:
            view_report(opts.view, opts.rounds, opts.old)
        return
    with tempfile.TemporaryDirectory(prefix="cli-report-") as work:
        run_report(opts, work)


def run_report(opts: argparse.Namespace, work: str) -> None:
    """Times the commands on the generated program, written into the folder work, and prints
    the table."""
    script = os.path.join(work, "paths.py")
    extra = ""
    if opts.site_packages:
        # the program as a library in site-packages (its frames folded by the call tree
        # view), called by a two-line script
        extra = os.path.join(work, "lib", "site-packages")
        os.makedirs(os.path.join(extra, "widelib"))
        body, loop = program(opts.functions).rsplit("\nfor r in", 1)
        with open(os.path.join(extra, "widelib", "__init__.py"), "w") as f:
            f.write(body + "\ndef main():\n    for r in" + loop.replace("\n", "\n    "))
        with open(script, "w") as f:
            f.write("import widelib\nwidelib.main()\n")
    else:
        with open(script, "w") as f:
            f.write(program(opts.functions))
    cmds = commands(script, os.path.join(work, "p.prof"))
    runs = [(name, PACKAGE) for name in cmds]
    if opts.old:
        runs += [(name, opts.old) for name in cmds if name.startswith("fastprof")]
    times: Dict[Tuple[str, str], List[float]] = {r: [] for r in runs}
    rng = random.Random(7)
    for _ in range(opts.rounds):
        order = list(runs)
        rng.shuffle(order)
        for name, package in order:
            times[(name, package)].append(timed(cmds[name][0], package, extra))
    med = {r: statistics.median(v) for r, v in times.items()}
    base = {cmds[n][1]: med[(n, PACKAGE)] for n in cmds if n.startswith("cProfile")}
    print(
        f"# {platform.python_implementation()} {platform.python_version()}, "
        f"{platform.machine()}, {os.cpu_count()} cores; {opts.functions} functions"
        f"{' in site-packages' if opts.site_packages else ''}; "
        f"medians of {opts.rounds} interleaved rounds"
    )
    head = f"{'command':<26} {'this':>9} {'/cProfile':>10}"
    if opts.old:
        head += f" {'old':>9} {'/cProfile':>10}"
    print(head)
    for name, (_, kind) in cmds.items():
        this = med[(name, PACKAGE)]
        row = f"{name:<26} {this:9.3f}"
        row += f" {this / base[kind]:10.2f}" if kind in base else f" {'':>10}"
        if opts.old and (name, opts.old) in med:
            old = med[(name, opts.old)]
            row += f" {old:9.3f} {old / base[kind]:10.2f}"
        print(row)


if __name__ == "__main__":
    main()
