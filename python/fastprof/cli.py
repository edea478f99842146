"""The command line: ``python -m fastprof`` and the ``fastprof`` console script.

    fastprof [run] [-o FILE] [-s SORT] [--top N] [--no-builtins] [--clock C]
                   [--lines] [--lines-of MODULE:FUNC] [view options] (script.py | -m module)
                   [args ...]
    fastprof view FILE.prof [-s SORT] [--top N] [--filter REGEX] [--callers F] [--callees F]
                   [view options]
    fastprof diff A.prof B.prof [--top N] [--html OUT]
    fastprof compare ...            (see fastprof.compare)

view options: --format {text,pstats,speedscope,collapsed,callgrind}, --html FILE,
--min-percent P, --expand-libs, --merge-threads, --color {auto,always,never}.  Without -s the
call tree is printed when the profile has one; with -s, cProfile's flat table as before.

``run`` accepts cProfile's options (-o, -s, -m); the script sees its own ``sys.argv`` and the
exit status it asks for is kept.
"""

from __future__ import annotations

import argparse
import builtins
import os
import runpy
import sys
import types
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .stats import SORT_KEYS

__all__ = ["main"]

_MISSING = object()
_DEFAULT_SORT = "tottime"
_DEFAULT_TOP = 40


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return n


def _sort_key(text: str) -> str:
    if text not in SORT_KEYS:
        raise argparse.ArgumentTypeError(
            f"unknown sort key {text!r}; expected one of {', '.join(SORT_KEYS)}")
    return text


def _run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fastprof run",
        description="Profile a Python script or module and print where the time goes "
                    "(or save the profile with -o).",
        usage="fastprof [run] [options] (script.py | -m module) [args ...]",
    )
    p.add_argument("-o", "--outfile", metavar="FILE",
                   help="write the profile to FILE (pstats format: pstats, snakeviz, gprof2dot, "
                        "`fastprof view` read it) instead of printing the table")
    p.add_argument("-s", "--sort", type=_sort_key, default=None, metavar="SORT",
                   help=f"sort key of the table (default {_DEFAULT_SORT}): "
                        + ", ".join(SORT_KEYS))
    p.add_argument("--top", type=_positive_int, default=None, metavar="N",
                   help=f"show the first N rows (default {_DEFAULT_TOP} in the flat table, "
                        f"15 in the call tree's table of top functions)")
    p.add_argument("--all", action="store_true", help="show every row")
    p.add_argument("--no-builtins", action="store_true",
                   help="do not account builtins and C methods separately")
    p.add_argument("--clock", choices=("wall", "cpu", "process_cpu"), default="wall",
                   help="wall time (default), this thread's CPU time, or the process's CPU time")
    p.add_argument("--lines", action="store_true",
                   help="line-by-line timing of the functions marked @profile in the script "
                        "(as kernprof -l)")
    p.add_argument("--lines-of", action="append", default=[], metavar="MODULE:FUNC",
                   help="line-by-line timing of this function (repeatable)")
    p.add_argument("-m", dest="module", metavar="MODULE",
                   help="run a library module as a script (as python -m)")
    from .report.outputs import add_view_options

    add_view_options(p)
    p.add_argument("target", nargs="?", help="the script to run")
    p.add_argument("args", nargs="*", help="its arguments")
    return p


# Options of `run` that take a value: the command line is split where the target starts.
_VALUE_OPTS = {"-o", "--outfile", "-s", "--sort", "--top", "--clock", "--lines-of",
               "--format", "--html", "--min-percent", "--color"}


def _split_run_argv(argv: Sequence[str]) -> Tuple[List[str], List[str]]:
    """Splits ``argv`` into fastprof's options and the target with its own arguments.

    The target starts at the first word that is not an option (the script) or at ``-m``'s
    value; everything after it belongs to the script.
    """
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return list(argv[:i]), list(argv[i + 1:])
        if a == "-m":
            return list(argv[: i + 2]), list(argv[i + 2:])
        if a.startswith("-m") and not a.startswith("--"):  # -mpkg.mod
            return list(argv[:i]) + ["-m", a[2:]], list(argv[i + 1:])
        if a in _VALUE_OPTS:
            i += 2
            continue
        if a.startswith("-") and a != "-":
            i += 1
            continue
        return list(argv[:i]), list(argv[i:])
    return list(argv), []


def _exit_code(code: Any) -> int:
    """The process exit status for a ``SystemExit`` code (prints a message code to stderr)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _target_code(opts: argparse.Namespace) -> Tuple[Any, Dict[str, Any]]:
    """The code object to run and its globals, with sys.argv and sys.path set as Python would.

    Raises SystemExit(2) with a message when the script or module cannot be found.
    """
    if opts.module is not None:
        sys.argv[:] = [opts.module] + opts.args
        sys.path.insert(0, os.getcwd())
        # As cProfile: runpy sets up __main__ (spec, __file__, sys.argv[0]) for the module.
        code = compile("_run_module(_modname, run_name='__main__', alter_sys=True)",
                       "<fastprof -m>", "exec")
        return code, {"_run_module": runpy.run_module, "_modname": opts.module}
    path = opts.target
    if not os.path.isfile(path):
        print(f"fastprof: can't open file {path!r}: no such file", file=sys.stderr)
        raise SystemExit(2)
    sys.argv[:] = [path] + opts.args
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    import importlib.machinery
    import io

    with io.open_code(path) as f:
        source = f.read()
    code = compile(source, path, "exec")
    spec = importlib.machinery.ModuleSpec(name="__main__", loader=None, origin=path)
    # A real module in sys.modules["__main__"] (put back after the run), so that what the
    # script defines can be pickled, as when Python runs it.
    main = types.ModuleType("__main__")
    main.__dict__.update({
        "__spec__": spec,
        "__file__": spec.origin,
        "__package__": None,
        "__cached__": None,
        "__builtins__": builtins,
    })
    sys.modules["__main__"] = main
    return code, main.__dict__


def _lines_profiler(opts: argparse.Namespace, script_code: Any) -> Any:
    """A fastprof.lines.LineProfiler set up for --lines / --lines-of, or SystemExit(2).

    A --lines-of naming the script being run (``script.py:func``) is found in script_code, its
    compiled code, since importing the script again would make a second copy of func."""
    try:
        from . import lines
    except ImportError as e:  # pragma: no cover - the package always has it
        print(f"fastprof: line timing unavailable: {e}", file=sys.stderr)
        raise SystemExit(2)
    try:
        lp = lines.LineProfiler()
    except NotImplementedError as e:
        print(f"fastprof: line timing is not available in this build: {e}", file=sys.stderr)
        raise SystemExit(2)
    script = None if opts.module is not None else os.path.abspath(opts.target)
    for spec in opts.lines_of:
        where, _, qualname = spec.rpartition(":")
        if script is not None and where and os.path.abspath(where) == script:
            if lp.add_from_code(script_code, qualname) == 0:
                print(f"fastprof: --lines-of {spec}: no function {qualname!r} in {where}",
                      file=sys.stderr)
                raise SystemExit(2)
            continue
        try:
            lp.add_function(lines.resolve_function(spec))
        except (ImportError, AttributeError, ValueError, TypeError) as e:
            print(f"fastprof: --lines-of {spec}: {e}", file=sys.stderr)
            raise SystemExit(2)
    if opts.lines:
        builtins.profile = lines.kernprof_builtin(lp)  # type: ignore[attr-defined]
    return lp


def _run(argv: Sequence[str]) -> int:
    """``fastprof run``: returns the script's exit status."""
    head, tail = _split_run_argv(argv)
    parser = _run_parser()
    opts = parser.parse_args(head)
    from .report.outputs import check_view_options

    bad = check_view_options(opts)
    if bad:
        parser.error(bad)
    # The options end where the target starts, so the target and its arguments are in tail.
    if opts.module is None:
        if not tail:
            parser.print_usage(sys.stderr)
            print("fastprof run: error: give a script to run, or -m module", file=sys.stderr)
            return 2
        opts.target, tail = tail[0], tail[1:]
    opts.args = list(tail)
    line_mode = opts.lines or bool(opts.lines_of)
    saved_argv = sys.argv[:]
    saved_path = sys.path[:]
    saved_main = sys.modules.get("__main__")
    saved_profile = builtins.__dict__.get("profile", _MISSING)
    status = 0
    out = _ReportOutput()
    try:
        code, globs = _target_code(opts)
        lp = _lines_profiler(opts, code) if line_mode else None
        if lp is not None:
            prof: Any = lp
        else:
            from .profile import Profile

            prof = Profile(builtins=not opts.no_builtins, clock=opts.clock)
        try:
            prof.enable()
            try:
                exec(code, globs)
            finally:
                prof.disable()
        except SystemExit as e:
            status = _exit_code(e.code)
        except BaseException:
            # Report what ran, then let Python print the traceback and exit with 1.
            try:
                _report(prof, opts, line_mode, out)
            except Exception as e:  # never hide the script's own error
                print(f"fastprof: could not report the profile: {e!r}", file=sys.stderr)
            raise
        _report(prof, opts, line_mode, out)
    except SystemExit as e:  # bad --lines-of, missing script
        return _exit_code(e.code)
    except BrokenPipeError:
        # The table was piped into a command that stopped reading (fastprof ... | head).
        sys.stderr.close()
    finally:
        out.close()
        sys.argv[:] = saved_argv
        sys.path[:] = saved_path
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
        if saved_profile is _MISSING:
            builtins.__dict__.pop("profile", None)
        else:
            builtins.profile = saved_profile  # type: ignore[attr-defined]
    return status


class _ReportOutput:
    """Where the table goes: the standard output fastprof started with, even when the
    script replaced sys.stdout or closed it (as ``python -m json.tool`` does)."""

    def __init__(self) -> None:
        self.orig = sys.stdout
        self._own: Optional[Any] = None
        try:
            self._fd: Optional[int] = os.dup(self.orig.fileno())
        except (AttributeError, OSError, ValueError):  # no real file behind it (tests)
            self._fd = None

    def stream(self) -> Any:
        """An open text stream for the report."""
        if self.orig is not None and not self.orig.closed:
            try:
                self.orig.flush()
            except (OSError, ValueError):
                pass
            if sys.stdout is not None and sys.stdout is not self.orig and not sys.stdout.closed:
                sys.stdout.flush()
            return self.orig
        if self._own is None and self._fd is not None:
            self._own = os.fdopen(os.dup(self._fd), "w")
        return self._own if self._own is not None else sys.stderr

    def close(self) -> None:
        if self._own is not None:
            try:
                self._own.close()
            except OSError:
                pass
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _report(prof: Any, opts: argparse.Namespace, line_mode: bool, out: _ReportOutput) -> None:
    """Writes -o (and the call tree beside it), --format and --html, or prints the default
    view: the call tree when the profiler recorded one and no -s was given, else the table."""
    from .report.outputs import emit, print_note

    if line_mode:
        if opts.html:
            from .report.html import write_html

            write_html(opts.html, None, None, prof.get_stats(),
                       title="fastprof: " + _title(opts) + " (line timings)")
            print_note(f"HTML report written to {opts.html}")
        if opts.outfile:
            prof.dump_stats(opts.outfile)
            print(f"fastprof: line timings written to {opts.outfile}", file=sys.stderr)
            return
        if opts.html:
            return
        stream = out.stream()
        from .profile import _accepts_stream

        if _accepts_stream(prof.print_stats):
            prof.print_stats(stream=stream)
        else:
            saved, sys.stdout = sys.stdout, stream
            try:
                prof.print_stats()
            finally:
                sys.stdout = saved
        return
    from .report.source import save_tree, tree_of
    from .stats import Stats

    tree = tree_of(prof)
    st = Stats(prof)
    if opts.outfile and opts.format in (None, "pstats"):
        prof.dump_stats(opts.outfile)
        save_tree(opts.outfile, tree)
        print(f"fastprof: profile written to {opts.outfile}"
              + (f" (its call tree to {opts.outfile}.tree.json)" if tree is not None else "")
              + f" (see it with: python -m fastprof view {opts.outfile})", file=sys.stderr)
        if opts.html:
            from .report.html import write_html

            write_html(opts.html, st, tree, title="fastprof: " + _title(opts))
            print_note(f"HTML report written to {opts.html}")
        return
    try:
        note = emit(st, tree, opts, out.stream(), title="fastprof: " + _title(opts),
                    outfile=opts.outfile, top=_rows(opts, tree))
    except (OSError, ValueError) as e:  # the profile ran: say why it could not be written
        print(f"fastprof: {e}", file=sys.stderr)
        return
    print_note(note)


def _rows(opts: argparse.Namespace, tree: Any) -> Optional[int]:
    """How many rows a table shows: all with --all, else --top, else the default of the view
    (the flat table's, or the shorter table under the call tree)."""
    if opts.all:
        return None
    if opts.top is not None:
        return int(opts.top)
    if tree is not None:
        from .report.tree_text import DEFAULT_TOP

        return DEFAULT_TOP
    return _DEFAULT_TOP


def _title(opts: argparse.Namespace) -> str:
    what = f"-m {opts.module}" if opts.module else opts.target
    return f"{what} ({opts.clock} clock)"


def _view(argv: Sequence[str]) -> int:
    """``fastprof view FILE``: prints the call tree (when FILE.tree.json is beside FILE and no
    -s is given) or the table of a saved profile, or writes an export; returns 0, or 2 on
    error."""
    from .report.outputs import add_view_options, check_view_options, emit, print_note

    p = argparse.ArgumentParser(prog="fastprof view",
                                description="Print the call tree or the table of a saved "
                                            "profile (written by fastprof -o, cProfile or "
                                            "dump_stats), or export it.")
    p.add_argument("file", help="the profile file")
    p.add_argument("-s", "--sort", type=_sort_key, default=None, metavar="SORT",
                   help=f"print the flat table sorted by SORT (default {_DEFAULT_SORT} when "
                        f"there is no call tree): " + ", ".join(SORT_KEYS))
    p.add_argument("--top", type=_positive_int, default=None, metavar="N",
                   help=f"show the first N rows (default {_DEFAULT_TOP})")
    p.add_argument("--all", action="store_true", help="show every row")
    p.add_argument("--filter", metavar="REGEX",
                   help="flat table of the functions whose file:line(name) matches this "
                        "regular expression")
    p.add_argument("--full-paths", action="store_true", help="do not strip directories")
    p.add_argument("--callgrind", metavar="OUT",
                   help="write a callgrind file (for KCachegrind) to OUT instead of printing")
    p.add_argument("--callers", metavar="F",
                   help="the callers of the functions whose file:line(name) matches the "
                        "regular expression F")
    p.add_argument("--callees", metavar="F",
                   help="the functions called by those matching F")
    p.add_argument("-o", "--outfile", metavar="OUT", help="where --format writes")
    add_view_options(p)
    opts = p.parse_args(argv)
    bad = check_view_options(opts)
    if bad:
        p.error(bad)
    from .report.source import load_profile

    try:
        st, tree = load_profile(opts.file)
        if opts.filter:
            st = st.filter(opts.filter)
    except (OSError, ValueError) as e:
        print(f"fastprof view: {e}", file=sys.stderr)
        return 2
    try:
        if opts.callers or opts.callees:
            from .report.callers_text import format_callers

            for pattern, which in ((opts.callers, "callers"), (opts.callees, "callees")):
                if pattern:
                    sys.stdout.write(format_callers(st, pattern, which,
                                                    strip_dirs=not opts.full_paths))
            return 0
        if opts.callgrind:
            st.to_callgrind(opts.callgrind)
            print(f"fastprof: callgrind file written to {opts.callgrind}", file=sys.stderr)
            return 0
        note = emit(st, tree, opts, sys.stdout, title=f"fastprof: {opts.file}",
                    outfile=opts.outfile, top=_rows(opts, tree), strip_dirs=not opts.full_paths)
        print_note(note)
    except BrokenPipeError:
        sys.stderr.close()
    except (OSError, ValueError) as e:
        print(f"fastprof view: {e}", file=sys.stderr)
        return 2
    return 0


def _diff(argv: Sequence[str]) -> int:
    """``fastprof diff A B``: handed to fastprof.diff.main."""
    from . import diff

    return diff.main(list(argv))


def _compare(argv: Sequence[str]) -> int:
    """``fastprof compare``: handed to fastprof.compare.main."""
    try:
        from . import compare  # type: ignore[attr-defined]
    except ImportError:
        print("fastprof compare: not available in this version", file=sys.stderr)
        return 2
    result = compare.main(list(argv))
    return 0 if result is None else int(result)


_TOP_HELP = """\
usage: fastprof [run] [options] (script.py | -m module) [args ...]
       fastprof view FILE [-s SORT] [--top N] [--filter REGEX] [--callers F] [--callees F]
       fastprof diff A.prof B.prof [--html OUT]
       fastprof compare ...

Exact, low-overhead profiling of Python programs.

commands:
  run       profile a script or module and print where the time goes (the default command;
            cProfile's options -o, -s, -m are accepted)
  view      print the call tree or the table of a saved profile, or export it
  diff      what changed between two saved profiles, per function and per call path
  compare   compare saved benchmark or profile results

`fastprof COMMAND -h` describes each command's options; `fastprof --version` prints the
version.
"""


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the command line on ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        out = sys.stdout if args else sys.stderr
        out.write(_TOP_HELP)
        return 0 if args else 2
    cmd = args[0]
    if cmd == "--version":
        from . import __version__

        print(f"fastprof {__version__}")
        return 0
    if cmd == "view":
        return _view(args[1:])
    if cmd == "compare":
        return _compare(args[1:])
    if cmd == "diff":
        return _diff(args[1:])
    if cmd == "run":
        args = args[1:]
    return _run(args)
