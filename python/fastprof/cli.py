"""The command line: ``python -m fastprof`` and the ``fastprof`` console script.

    fastprof [run] [-o FILE] [-s SORT] [--top N] [--no-builtins] [--clock C]
                   [--lines] [--lines-of MODULE:FUNC] [--timeline OUT.json
                   [--timeline-buffer N] [--timeline-min-us F]] [view options]
                   (script.py | -m module) [args ...]
    fastprof view FILE.prof [-s SORT] [--top N] [--filter REGEX] [--callers F] [--callees F]
                   [view options]
    fastprof view FILE.lprof [--unit SECONDS]
    fastprof diff A.prof B.prof [--top N] [--html OUT]
    fastprof compare A.prof B.prof | A.json B.json   (see fastprof.compare)

view options: --format {text,pstats,speedscope,collapsed,callgrind}, --html FILE,
--min-percent P, --expand-libs, --merge-threads, --threads, --color {auto,always,never}.
Without -s the call tree is printed when the profile has one; with -s, the flat table with
pstats' columns; with --threads, each thread's table and then the merged one.

``run`` accepts cProfile's options (-o, -s, -m); the script sees its own ``sys.argv`` and the
exit status it asks for is kept.
"""

from __future__ import annotations

import builtins
import functools
import os
import stat
import sys
import time
import types
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    List,
    NamedTuple,
    NoReturn,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    cast,
)

from . import _run_args
from ._runstats import own_stats as _own_stats
from ._runstats import own_tree as _own_tree
from .report.options import check_view_options
from .report.options import positive_int as _positive_int
from .stats import SORT_KEYS

if TYPE_CHECKING:
    import argparse  # loaded where a parser is built: a profiled script's own import shows

__all__ = ["main"]

_MISSING = object()
_wall_clock = time.perf_counter  # the run's wall time (tests put a fake clock here)
_DEFAULT_SORT = _run_args.DEFAULT_SORT
_DEFAULT_TOP = _run_args.DEFAULT_TOP
_TOP_ROWS_HELP = _run_args.TOP_ROWS_HELP


def _shown(text: str) -> str:
    """``text`` (a path, an error) as the views print names: a byte of a path that is not
    UTF-8, or a control character, as its escape, so that no stderr encoding fails on it."""
    from .report.escape import printable

    return printable(str(text))


def _sort_key(text: str) -> str:
    """An argparse type: ``text`` when it is a sort key, else an ArgumentTypeError."""
    import argparse

    if text not in SORT_KEYS:
        raise argparse.ArgumentTypeError(
            f"unknown sort key {text!r}; expected one of {', '.join(SORT_KEYS)}"
        )
    return text


def _run_parser() -> argparse.ArgumentParser:
    """``run``'s argparse parser, built from the table fastprof._run_args reads: for
    ``--help`` and for the command lines that reader leaves to argparse."""
    import argparse

    from .report.options import add_option

    p = argparse.ArgumentParser(
        prog="fastprof run",
        description="Profile a Python script or module and print where the time goes "
        "(or save the profile with -o).",
        usage="fastprof [run] [options] (script.py | -m module) [args ...]",
    )
    for option in _run_args.RUN_OPTIONS:
        add_option(p, option)
    p.add_argument("target", nargs="?", help="the script to run")
    p.add_argument("args", nargs="*", help="its arguments")
    return p


def _usage_error(message: str) -> NoReturn:
    """Prints ``run``'s usage and ``message`` as argparse does, and exits with status 2."""
    _run_parser().error(message)


# sys.path as it was before the script's folder went first, less the current folder that
# `python -m` put first (set while `run` runs a script): the report's own imports (json, html,
# sysconfig) must not find a script's json.py.
_PATH_BEFORE_SCRIPT: Optional[List[str]] = None

_F = TypeVar("_F", bound="Callable[..., Any]")


def _fastprofs_path(fn: _F) -> _F:
    """fn, run with sys.path as it was before the script's folder went first (the script's
    comes back afterwards)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        saved = _PATH_BEFORE_SCRIPT
        if saved is None:
            return fn(*args, **kwargs)
        current = sys.path[:]
        sys.path[:] = saved
        try:
            return fn(*args, **kwargs)
        finally:
            sys.path[:] = current

    return cast(_F, wrapper)


def _exit_code(code: Any) -> int:
    """The process exit status for a ``SystemExit`` code (prints a message code to stderr)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


class _ScriptError(Exception):
    """The script cannot be compiled: Python's own message for it (no traceback of fastprof's
    frames), exit status 1, as ``python script.py`` prints and exits."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


class _UsageError(Exception):
    """A problem with the command line, found before the script runs: one line for stderr,
    exit status 2."""


class _Target(NamedTuple):
    """What ``run`` executes, and the interpreter state it runs under (as ``python`` sets it)."""

    code: types.CodeType
    main: types.ModuleType  # the fresh ``__main__`` the code runs in
    argv0: str
    path0: str
    title: str


def _main_module(**attrs: Any) -> types.ModuleType:
    """A fresh module named ``__main__`` with ``attrs``, the builtins and, below 3.14, an
    empty ``__annotations__`` (the interpreter's own ``__main__`` has one, so a script's
    top-level ``print(__annotations__)`` works)."""
    main = types.ModuleType("__main__")
    if sys.version_info < (3, 14):
        main.__dict__["__annotations__"] = {}
    main.__dict__.update(attrs)
    main.__dict__["__builtins__"] = builtins
    return main


def _script_target(path: str) -> _Target:
    """The target for ``run script.py``, set up as ``python script.py`` sets up ``__main__``:
    ``__spec__`` None (so multiprocessing's spawn and forkserver workers run the script again
    as ``__mp_main__`` and find what it defines), ``__file__`` absolute, ``sys.path[0]`` the
    script's folder.  Raises _UsageError when the file cannot be read or compiled."""
    import importlib.machinery
    import io

    if not os.path.isfile(path):
        raise _UsageError(f"can't open file {path!r}: no such file")
    full = os.path.abspath(path)
    try:
        with io.open_code(full) as f:
            source = f.read()
    except OSError as e:
        raise _UsageError(f"can't open file {path!r}: {e.strerror or e}") from None
    try:
        code = compile(source, full, "exec", dont_inherit=True)  # no __future__ flag of ours
    except (SyntaxError, ValueError) as e:  # ValueError: a NUL byte in the source
        raise _ScriptError(e) from None
    main = _main_module(
        __name__="__main__",
        __file__=full,
        __cached__=None,
        __doc__=None,
        __package__=None,
        __spec__=None,
        __loader__=importlib.machinery.SourceFileLoader("__main__", full),
    )
    # sys.path[0]: the folder of the file a symlink leads to, as python resolves it
    return _Target(code, main, path, os.path.dirname(os.path.realpath(full)), path)


def _set_path0(path0: str) -> None:
    """Puts path0 in place of sys.path[0] (fastprof's own entry), as ``python script.py`` and
    ``python -m name`` put the script's folder or the current one first; under ``-P`` /
    PYTHONSAFEPATH (3.11+) and ``-I`` (which implies ``-P`` from 3.11, and before it left the
    script's folder out as well) they put nothing there, and sys.path stays as it is."""
    if not (getattr(sys.flags, "safe_path", False) or sys.flags.isolated):
        sys.path[:1] = [path0]


def _module_target(name: str) -> _Target:
    """The target for ``run -m name``, set up as ``python -m name`` does (runpy's
    ``_run_module_as_main``): ``__spec__`` the module's spec, ``sys.argv[0]`` its file,
    ``sys.path[0]`` the current folder.  The packages that hold the module are imported here,
    before profiling starts, as Python imports them before running the module.  Raises
    _UsageError when the module cannot be found or has no code."""
    import importlib.util

    _set_path0(os.getcwd())
    where = f"-m {name}"
    package = name.rpartition(".")[0]
    if package:
        try:
            __import__(package)
        except ImportError as e:
            # as runpy: an import the package itself makes fails with Python's traceback; a
            # package that is not there is the usage error below
            if e.name is None or (e.name != package and not package.startswith(e.name + ".")):
                raise
    try:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations is not None:
            if name == "__main__" or name.endswith(".__main__"):
                raise _UsageError(f"{where}: cannot run a package's __main__ as a package")
            spec = importlib.util.find_spec(name + ".__main__")  # python -m package
            if spec is None:
                raise _UsageError(
                    f"{where}: {name!r} is a package and cannot be directly "
                    f"executed (it has no __main__ module)"
                )
        if spec is None:
            raise _UsageError(f"{where}: No module named {name!r}")
        if spec.loader is None or not hasattr(spec.loader, "get_code"):
            raise _UsageError(f"{where}: no code to run for {name!r}")
        code = spec.loader.get_code(spec.name)
    except (ImportError, ValueError) as e:
        raise _UsageError(f"{where}: {e}") from None
    if code is None:
        raise _UsageError(f"{where}: no code to run for {name!r}")
    main = _main_module(
        __name__="__main__",
        __file__=spec.origin,
        __cached__=spec.cached,
        __doc__=None,
        __loader__=spec.loader,
        __package__=spec.parent,
        __spec__=spec,
    )
    return _Target(code, main, spec.origin or name, os.getcwd(), where)


def _outfile(path: Optional[str], option: str = "-o", what: str = "the profile") -> Optional[str]:
    """The absolute path -o (or option) names (so a script that changes directory does not
    move it), once checked to be writable.  Raises _UsageError with the reason when it is not;
    creates nothing."""
    if path is None:
        return None
    if not path:
        raise _UsageError(f"{option}: expected a file name for {what}, got an empty one")
    full = os.path.abspath(path)
    where = f"{option} {path}: cannot write {what}"
    folder = os.path.dirname(full)
    if os.path.isdir(full):
        raise _UsageError(f"{where}: it is a directory")
    if not os.path.isdir(folder):
        if os.path.exists(folder):
            raise _UsageError(f"{where}: {folder!r} is not a directory")
        raise _UsageError(f"{where}: no such directory {folder!r}")
    try:
        st: Optional[os.stat_result] = os.stat(full)  # through links
    except FileNotFoundError:
        st = None
        if os.path.islink(full):  # a link to a file not made yet: where it points
            folder = os.path.dirname(os.path.realpath(full))
            if not os.path.isdir(folder):
                raise _UsageError(f"{where}: it links into no such directory {folder!r}") from None
    except OSError as e:  # a loop of links, a name too long
        raise _UsageError(f"{where}: {e.strerror or e}") from None
    if st is not None and stat.S_ISREG(st.st_mode):
        # opened as the write will open it (/proc and /sys refuse there): that changes no
        # folder's time stamp
        try:
            with open(full, "ab"):
                pass
        except OSError as e:
            raise _UsageError(f"{where}: {e.strerror or e}") from None
        return full
    # A new file is asked of the system, not made: a file made and removed here would change
    # the folder's time stamp, and the script's first import would then read the folder again
    # (a call that `python -m cProfile` does not show).
    effective = os.access in os.supports_effective_ids
    if st is not None:  # a device, a pipe
        writable = os.access(full, os.W_OK, effective_ids=effective)
    else:
        writable = os.access(folder, os.W_OK | os.X_OK, effective_ids=effective)
    if not writable:
        read_only = hasattr(os, "statvfs") and os.statvfs(folder).f_flag & os.ST_RDONLY
        raise _UsageError(
            f"{where}: {'Read-only file system' if read_only else 'Permission denied'}"
        )
    return full


def _file_identity(path: str) -> Any:
    """What tells path's file from another's: (device, inode) of an existing regular file,
    the real path of one not made yet, or None for a device or a pipe (two outputs may share
    /dev/null)."""
    try:
        st = os.stat(path)
    except OSError:
        return os.path.realpath(path)
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


def _distinct_outputs(opts: argparse.Namespace) -> None:
    """Raises _UsageError when two of -o, --timeline and --html name one file (the later
    write would replace the earlier one, both reported as written).  Returns None."""
    seen: Dict[Any, str] = {}
    for option, path in (
        ("-o", opts.outfile),
        ("--timeline", opts.timeline),
        ("--html", opts.html),
    ):
        if not path:
            continue
        key = _file_identity(path)
        if key is None:
            continue
        if key in seen:
            raise _UsageError(
                f"{option} {path}: the same file as {seen[key]}: give each output its own file"
            )
        seen[key] = f"{option} {path}"


def _is_running_target(where: str, opts: argparse.Namespace) -> bool:
    """Whether a --lines-of location names the script or module being run: ``__main__``, the
    script's path, or the module given to -m."""
    if where == "__main__":
        return True
    if opts.module is not None:
        return where == opts.module
    return os.path.abspath(where) == os.path.abspath(opts.target)


def _lines_profiler(opts: argparse.Namespace, script_code: Any) -> Any:
    """A fastprof.lines.LineProfiler set up for --lines / --lines-of, or _UsageError.

    A --lines-of naming what is being run (``script.py:func``, ``__main__:func``, or the -m
    module's name) is found in script_code, its compiled code, since importing it again would
    run its top level a second time and make a second copy of func."""
    try:
        from . import lines
    except ImportError as e:  # pragma: no cover - the package always has it
        raise _UsageError(f"line timing unavailable: {e}") from None
    try:
        lp = lines.LineProfiler()
    except NotImplementedError as e:
        raise _UsageError(f"line timing is not available in this build: {e}") from None
    for spec in opts.lines_of:
        where, _, qualname = spec.rpartition(":")
        if where and qualname and _is_running_target(where, opts):
            if lp.add_from_code(script_code, qualname) == 0:
                raise _UsageError(f"--lines-of {spec}: no function {qualname!r} in {where}")
            continue
        try:
            lp.add_function(lines.resolve_function(spec))
        except (ImportError, AttributeError, ValueError, TypeError) as e:
            raise _UsageError(f"--lines-of {spec}: {e}") from None
    if opts.lines:
        from ._kernprof_global import redirect

        builtins.profile = lines.kernprof_builtin(lp)  # type: ignore[attr-defined]
        # and line_profiler's own profile (from line_profiler import profile), as kernprof -l
        opts.kernprof_undo = redirect(builtins.profile)  # type: ignore[attr-defined]
    return lp


class _KernprofRun:
    """The run's line profiler under ``--lines`` alone (no ``--lines-of``): it times nothing
    of its own, so its enable and disable do nothing, and the program runs without a hook
    but while ``@profile`` code runs (``builtins.profile``'s own profiler switches its hooks
    on then, as kernprof's does: a program that sets its own trace function, or a debugger,
    loses no later call).  Everything else is the line profiler's (its report holds what
    ``builtins.profile`` recorded)."""

    def __init__(self, lp: Any) -> None:
        self._lp = lp

    def enable(self) -> None:
        """Does nothing (see the class).  Returns None."""

    def disable(self) -> None:
        """Does nothing (see the class).  Returns None."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lp, name)


#: the most spans --timeline-buffer takes: the core's 2**40, less the runner's own slot
_MAX_TIMELINE_BUFFER = 2**40 - 1


def _timeline_profile(opts: argparse.Namespace) -> Tuple[Any, Any]:
    """The Profile and the fastprof.timeline.Timeline over it that --timeline asks for."""
    from .timeline import DEFAULT_BUFFER_SIZE, Timeline

    min_us = opts.timeline_min_us
    size = opts.timeline_buffer or DEFAULT_BUFFER_SIZE
    if size > _MAX_TIMELINE_BUFFER:
        raise _UsageError(
            f"--timeline-buffer: expected at most {_MAX_TIMELINE_BUFFER} spans "
            f"(2**40 - 1), got {size}"
        )
    try:
        tl = Timeline._of_run(
            size, 0.0 if min_us is None else min_us / 1e6, builtins=not opts.no_builtins
        )
    except MemoryError:
        raise _UsageError(
            f"--timeline-buffer {size}: not enough memory for a ring of that many spans"
        ) from None
    return tl.profiler, tl


@_fastprofs_path
def _write_timeline(timeline: Any, opts: argparse.Namespace) -> None:
    """Writes --timeline's file from the finished run; says on stderr what it left out.  A
    process the script forked (os.fork) that runs on to the script's end writes nothing: the
    file is the run's process's, which the child would overwrite (multiprocessing's children
    are left out alike)."""
    if os.getpid() != getattr(opts, "runner_pid", os.getpid()):
        return
    timeline._finish()
    timeline.export_chrome_trace(opts.timeline)
    lost = []
    if timeline.dropped:
        lost.append(f"{_calls(timeline.dropped)} dropped, the oldest: see --timeline-buffer")
    if timeline.too_short:
        lost.append(f"{_calls(timeline.too_short)} shorter than --timeline-min-us")
    note = f"; {', '.join(lost)}" if lost else ""
    print(
        f"fastprof: timeline of {_calls(timeline._span_count())} written to "
        f"{_shown(opts.timeline)}{note}",
        file=sys.stderr,
    )


def _calls(n: int) -> str:
    """``n`` calls, in words: "1 call", "2 calls"."""
    return f"{n} call" if n == 1 else f"{n} calls"


def _execute(
    prof: Any,
    code: types.CodeType,
    globs: Dict[str, Any],
    opts: Any,
    lines: Any = None,
    at_os_exit: Optional[Callable[[], None]] = None,
) -> None:
    """Runs code in globs with prof (and the line profiler lines, when given) on.  The
    profile holds what cProfile's run holds: ``exec`` and what it runs (the call of
    ``disable`` is taken out in _own_stats).  While it runs, a call of os._exit stops prof,
    then runs at_os_exit (when given) before the process ends (see fastprof._exit_gate).
    Sets ``opts.started`` and ``opts.wall``, the run's start and wall time in seconds (read
    with _wall_clock)."""
    from . import _exit_gate

    start = opts.started = _wall_clock()
    if lines is not None:
        lines.enable()
    try:
        if at_os_exit is not None:
            _exit_gate.install(prof.disable, at_os_exit)
        prof.enable()
        try:
            exec(code, globs)
        finally:
            try:
                prof.disable()
            except RuntimeError as e:
                # a hook met an error (memory ran out in it, say): the profile stopped where
                # it did and its numbers do not add up; the script's own ending stands
                opts.profile_error = e
    finally:
        if at_os_exit is not None:
            _exit_gate.restore()
        if lines is not None:
            lines.disable()
        opts.wall = _wall_clock() - start


def _job_line_specs(opts: argparse.Namespace) -> List[str]:
    """The --lines-of specs as the job's other processes read them: the script or module
    being run named ``__main__``, a file by its absolute path."""
    out = []
    for spec in opts.lines_of:
        where, _, qualname = spec.rpartition(":")
        if where and _is_running_target(where, opts):
            out.append(f"__main__:{qualname}")
        elif where.endswith(".py") or os.sep in where or "/" in where:
            out.append(f"{os.path.abspath(where)}:{qualname}")
        else:
            out.append(spec)
    return out


def _run(argv: Sequence[str], restore: bool = True) -> int:
    """``fastprof run``: returns the script's exit status (2 for a usage error).  With
    restore, sys.argv, sys.path, ``__main__`` and the ``profile`` builtin are put back after
    the run (a caller in the same program goes on); without (the command line itself), the
    script's stay for its atexit handlers and its threads still running, as without
    fastprof."""
    head, tail = _run_args.split(argv)
    opts: Any = _run_args.read(head)
    if opts is None:  # an abbreviation, --help, a bad value: argparse's reading and words
        opts = _run_parser().parse_args(head)
    opts.as_program = not restore  # the command line itself, not a caller in a program
    if opts.sort is not None and opts.sort not in SORT_KEYS:
        # cProfile's words, which scripts and CPython's own tests look for.
        _usage_error(
            f"option -s: invalid choice: {opts.sort!r} "
            f"(choose from {', '.join(map(repr, SORT_KEYS))})"
        )
    if opts.outfile:
        # As cProfile: relative to where fastprof started, whatever the script does to its cwd.
        opts.outfile = os.path.abspath(opts.outfile)
    bad = check_view_options(opts)
    if bad:
        _usage_error(bad)
    # The options end where the target starts, so the target and its arguments are in tail.
    if opts.module is None:
        if not tail:
            _run_parser().print_usage(sys.stderr)
            print("fastprof run: error: give a script to run, or -m module", file=sys.stderr)
            return 2
        opts.target, tail = tail[0], tail[1:]
    opts.args = list(tail)
    line_mode = opts.lines or bool(opts.lines_of)
    if opts.threads and (line_mode or opts.subprocesses or opts.run_dir is not None):
        _usage_error(
            "--threads shows one process's call profile: it does not combine with "
            "--lines, --lines-of, --subprocesses or --run-dir"
        )
    if opts.no_worker_startup and not opts.subprocesses:
        _usage_error("--no-worker-startup needs --subprocesses")
    if opts.timeline is None and (
        opts.timeline_buffer is not None or opts.timeline_min_us is not None
    ):
        _usage_error("--timeline-buffer and --timeline-min-us need --timeline OUT.json")
    if opts.timeline is not None:
        if line_mode or opts.subprocesses or opts.run_dir is not None:
            _usage_error(
                "--timeline does not yet combine with --lines, --lines-of, --subprocesses "
                "or --run-dir"
            )
        if opts.clock != "wall":
            _usage_error("--timeline needs the wall clock (leave --clock out)")
    saved_argv = sys.argv[:]
    saved_path = sys.path[:]
    global _PATH_BEFORE_SCRIPT
    try:
        here = os.getcwd()  # python -m puts it first: a script's folder is often it
        _PATH_BEFORE_SCRIPT = [p for p in saved_path if os.path.abspath(p or os.curdir) != here]
    except OSError:  # the current folder was deleted: python runs a script by its path all the same
        _PATH_BEFORE_SCRIPT = [p for p in saved_path if p not in ("", os.curdir)]
    saved_main = sys.modules.get("__main__")
    saved_profile = builtins.__dict__.get("profile", _MISSING)
    status = 0
    out = _ReportOutput()
    job: Optional[_Job] = None
    timeline: Any = None
    late: Any = None  # the SIGTERM handler while reporting (fastprof._runner_term)
    script_raised = False
    try:
        opts.outfile = _outfile(opts.outfile)
        if opts.timeline is not None:
            opts.timeline = _outfile(opts.timeline, "--timeline", "the timeline")
        if opts.html is not None:
            opts.html = _outfile(opts.html, "--html", "the HTML report")
        _distinct_outputs(opts)
        if opts.module is not None:
            target = _module_target(opts.module)
        else:
            target = _script_target(opts.target)
        sys.argv[:] = [target.argv0] + opts.args
        _set_path0(target.path0)
        sys.modules["__main__"] = target.main
        lp = _lines_profiler(opts, target.code) if line_mode else None
        in_job = opts.subprocesses or opts.run_dir is not None
        if lp is not None and not in_job:
            prof: Any = lp if opts.lines_of else _KernprofRun(lp)
        elif opts.timeline is not None:
            prof, timeline = _timeline_profile(opts)
            opts.runner_pid = os.getpid()
        else:
            from .profile import Profile

            # a job's every process writes its call profile, and its line timings beside
            prof = Profile(builtins=not opts.no_builtins, clock=opts.clock)
        opts.title = target.title
        if in_job:
            job = _Job(opts, prof, lp)
        at_exit = _ReportAtOsExit(prof, opts, line_mode, out, job, timeline, lp if in_job else None)
        from . import _runner_term

        term = None
        if opts.as_program:  # the command line: a caller in a program keeps its signals
            term = _runner_term.catch(prof.disable, _TermReport(at_exit, opts, job))
        try:
            try:
                # the job's line profiler is on for the run when it names functions (as in
                # the job's other processes: children._enable_lines)
                lines = lp if in_job and opts.lines_of else None
                _execute(prof, target.code, target.main.__dict__, opts, lines, at_exit)
            finally:
                if job is None or not job.in_child():
                    late = _runner_term.hand_over(term, lambda: _hurry(job))
        except SystemExit as e:
            status = _exit_code(e.code)
        except BaseException:
            if job is not None and job.in_child():
                raise  # a fork child of the script: its own profile is written at its exit
            script_raised = True  # its BrokenPipeError too: not the report's, below
            # Report what ran, then let Python print the traceback and exit with 1.
            try:
                if timeline is not None:
                    _write_timeline(timeline, opts)
                _report(prof, opts, line_mode, out, job)
            except Exception as e:  # never hide the script's own error
                print(f"fastprof: could not report the profile: {e!r}", file=sys.stderr)
            raise
        if job is None or not job.in_child():
            status = _report_after_run(status, prof, opts, line_mode, out, job, timeline)
    except _UsageError as e:
        print(f"fastprof run: error: {_shown(str(e))}", file=sys.stderr)
        return 2
    except _ScriptError as e:
        import traceback

        sys.stderr.write("".join(traceback.format_exception_only(type(e.error), e.error)))
        return 1
    except BrokenPipeError:
        if script_raised:
            raise  # the script's own error: its traceback and exit status 1, as in python
        # The table was piped into a command that stopped reading (fastprof ... | head).
        sys.stderr.close()
    finally:
        if job is not None:
            job.close()
        out.close()
        if late is not None:  # a SIGTERM during the report ends the process now
            _runner_term.finish(late)
        if restore:
            _PATH_BEFORE_SCRIPT = None
            sys.argv[:] = saved_argv
            sys.path[:] = saved_path
            if saved_main is not None:
                sys.modules["__main__"] = saved_main
            undo = getattr(opts, "kernprof_undo", None)
            if undo is not None:
                undo()
            if saved_profile is _MISSING:
                builtins.__dict__.pop("profile", None)
            else:
                builtins.profile = saved_profile  # type: ignore[attr-defined]
    return status


@_fastprofs_path
def _report_after_run(
    status: int,
    prof: Any,
    opts: argparse.Namespace,
    line_mode: bool,
    out: "_ReportOutput",
    job: Optional["_Job"],
    timeline: Any,
) -> int:
    """Writes --timeline's file and the report of a run that ended normally; returns the exit
    status: the script's, or 2 (when the script's is 0) with one line on stderr when the
    report could not be written (a folder removed while the script ran, a full disk, an
    export that needs the call tree the profile does not have)."""
    try:
        if timeline is not None:
            _write_timeline(timeline, opts)
        _report(prof, opts, line_mode, out, job)
    except BrokenPipeError:
        raise  # fastprof ... | head: not an error of the report
    except (OSError, ValueError) as e:  # the profile ran: say why it could not be written
        where = ""
        if isinstance(e, OSError) and e.filename is None:  # a failed write names no file
            given = [
                f"{option} {_shown(path)}"
                for option, path in (
                    ("--timeline", opts.timeline),
                    ("--html", opts.html),
                    ("-o", opts.outfile),
                )
                if path
            ]
            where = f" ({' or '.join(given)})" if given else ""
        print(f"fastprof: could not write the report{where}: {_shown(str(e))}", file=sys.stderr)
        return status or 2
    return status


class _ReportAtOsExit:
    """What ``fastprof run`` does when the script ends through os._exit (which runs no
    finally block and no atexit callback): the report a normal end gives, then the standard
    streams flushed, before the process ends with the script's status.  Nothing in a fork
    child of the script (its own profile, if followed, is written by fastprof.children)."""

    def __init__(
        self,
        prof: Any,
        opts: argparse.Namespace,
        line_mode: bool,
        out: "_ReportOutput",
        job: Optional["_Job"],
        timeline: Any,
        lines: Any,
    ) -> None:
        self.args = (prof, opts, line_mode, out, job)
        self.timeline = timeline
        self.lines = lines
        self.pid = os.getpid()
        self.ran = False  # once: os._exit's report and SIGTERM's (_TermReport) never both

    def __call__(self) -> None:
        if os.getpid() != self.pid or self.ran:
            return
        self.ran = True
        prof, opts, line_mode, out, job = self.args
        opts.wall = _wall_clock() - opts.started
        try:
            if self.lines is not None:
                self.lines.disable()
            if self.timeline is not None:
                _write_timeline(self.timeline, opts)
            _report(prof, opts, line_mode, out, job)
        except Exception as e:
            print(f"fastprof: could not report the profile: {e!r}", file=sys.stderr)
        finally:
            if job is not None:
                job.close()
            out.close()
            for stream in (sys.stdout, sys.stderr):
                try:
                    if stream is not None:
                        stream.flush()
                except (OSError, ValueError):
                    pass


def _temp_dir(prefix: str) -> str:
    """A new temporary folder for a job, by its absolute path (a script that changes folder
    still finds it under a relative TMPDIR), made where tempfile.mkdtemp makes it (the first
    of TMPDIR, TEMP, TMP, /tmp, /var/tmp, /usr/tmp and the current folder it can write to;
    mode 0o700) without loading tempfile (with its shutil and random) before the script.
    _UsageError (one line, exit 2) when none can be made."""
    places = [os.environ.get(name) for name in ("TMPDIR", "TEMP", "TMP")]
    places += ["/tmp", "/var/tmp", "/usr/tmp", os.curdir]
    error: Optional[OSError] = None
    for place in places:
        if not place:
            continue
        for _ in range(20):  # a name taken: another
            path = os.path.abspath(os.path.join(place, prefix + os.urandom(6).hex()))
            try:
                os.mkdir(path, 0o700)
                return path
            except FileExistsError:
                continue
            except OSError as e:
                error = e
                break
    raise _UsageError(
        f"--subprocesses needs a temporary folder and none could be made ({error}); "
        f"set TMPDIR to a writable folder"
    )


def _hurry(job: Any) -> None:
    """A SIGTERM came while the runner reports: rank 0 stops waiting for the other ranks."""
    if job is not None:
        job.hurry = True


class _TermReport:
    """The report when SIGTERM ends the program (fastprof._runner_term): as at os._exit, but
    with Python's end skipped (SIGTERM joins no thread and runs no atexit callback) and, under
    a launcher, no wait for the other ranks (a scheduler's SIGKILL follows soon)."""

    def __init__(self, at_exit: _ReportAtOsExit, opts: argparse.Namespace, job: Any) -> None:
        self.at_exit = at_exit
        self.opts = opts
        self.job = job

    def __call__(self) -> None:
        self.opts.abrupt = True
        if self.job is not None:
            self.job.hurry = True
        self.at_exit()


class _ReportOutput:
    """Where the table goes: the standard output fastprof started with, even when the
    script replaced sys.stdout or closed it (as ``python -m json.tool`` does)."""

    def __init__(self) -> None:
        self.orig = sys.stdout
        self._own: Optional[Any] = None
        self._ident: Any = None
        try:
            self._fd: Optional[int] = os.dup(self.orig.fileno())
            self._ident = self._file_of(self._fd)
        except (AttributeError, OSError, ValueError):  # no real file behind it (tests)
            self._fd = None

    @staticmethod
    def _file_of(fd: int) -> Any:
        """What descriptor fd refers to now (its device and inode), or None when it is
        closed."""
        try:
            st = os.fstat(fd)
        except OSError:
            return None
        return (st.st_dev, st.st_ino)

    def _still_ours(self) -> bool:
        """Whether the duplicate made at the start is still open on the same file: a program
        that closes every descriptor it does not know (as daemons do) may have closed it, and
        the number may have been given to a file of the program's since."""
        if self._fd is not None and self._file_of(self._fd) != self._ident:
            self._fd = None
        return self._fd is not None

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
        if self._own is None and self._still_ours():
            assert self._fd is not None
            self._own = os.fdopen(os.dup(self._fd), "w")
        return self._own if self._own is not None else sys.stderr

    def close(self) -> None:
        if self._own is not None:
            try:
                self._own.close()
            except OSError:
                pass
        if self._still_ours():
            assert self._fd is not None
            os.close(self._fd)
            self._fd = None


class _Job:
    """run --subprocesses or --run-dir: the run directory the processes write to, and (with
    --subprocesses) the environment that makes the Python children profile themselves (put
    back by close).  Under a launcher (MPI, torchrun, Slurm) each rank's runner is one."""

    def __init__(self, opts: argparse.Namespace, prof: Any, lines: Any = None) -> None:
        from . import children

        self.rank = children.process_rank()
        self.size = children.world_size()
        self.keep = opts.run_dir is not None
        if self.keep:
            self.run_dir = os.path.abspath(opts.run_dir)
            try:
                os.makedirs(self.run_dir, exist_ok=True)
            except OSError as e:
                raise _UsageError(f"--run-dir {opts.run_dir}: {e.strerror or e}") from None
            mine = f"rank{self.rank}-" if self.rank is not None else ""
            stale = [n for n in children.record_names(self.run_dir) if n.startswith(mine)]
            if stale:
                raise _UsageError(
                    f"--run-dir {opts.run_dir}: it holds the profiles of an earlier run "
                    f"({stale[0]}.json, ...): give an empty or new folder"
                )
        else:
            self.run_dir = _temp_dir("fastprof-run-")
        self.pid = os.getpid()
        self.hurry = False  # SIGTERM ends the job: rank 0 takes the ranks' profiles as they are
        self.lines = lines  # the runner's line profiler (run --lines / --lines-of), or None
        self.boot_dir: Optional[str] = None
        self.saved_env: Dict[str, Optional[str]] = {}
        if opts.subprocesses:
            self.boot_dir = _temp_dir("fastprof-boot-")
            self.saved_env = {k: os.environ.get(k) for k in children.ENV_NAMES}
            try:
                self.session = children.follow(
                    self.run_dir,
                    prof,
                    self.boot_dir,
                    clock=opts.clock,
                    builtins=not opts.no_builtins,
                    lines=lines,
                    lines_of=_job_line_specs(opts),
                    kernprof=opts.lines,
                    worker_startup=not opts.no_worker_startup,
                )
            except ValueError as e:
                import shutil

                shutil.rmtree(self.boot_dir, ignore_errors=True)
                if not self.keep:
                    shutil.rmtree(self.run_dir, ignore_errors=True)
                raise _UsageError(f"--lines-of: {e}") from None
        else:
            self.session = children.runner_session(self.run_dir, prof, lines)
        from . import _reaper

        # the temporary folders are removed even when the runner is killed (fastprof._reaper)
        temporary = [d for d in (None if self.keep else self.run_dir, self.boot_dir) if d]
        _reaper.watch(temporary)

    def in_child(self) -> bool:
        """Whether this is a fork child of the script, still in the runner's code."""
        return os.getpid() != self.pid

    def write_own(self) -> None:
        """Writes the runner's process profile into the run directory."""
        from . import children

        children.write_now(self.session)

    def reports(self) -> bool:
        """Whether this runner prints or writes the merged report: under a launcher with a
        shared --run-dir only rank 0's does, once the other ranks' runners have written
        theirs (or a wait ran out); without one each rank's runner reports its own."""
        if self.rank is None or not self.keep:
            return True  # no shared --run-dir: each rank reports its own processes
        if self.rank != 0:
            return False
        if self.size:
            from .merge import wait_for_ranks

            wait_for_ranks(
                self.run_dir, self.size, 0.0 if self.hurry else _rank_wait(), lambda: self.hurry
            )
        return True

    def close(self) -> None:
        import shutil

        from . import children

        if self.in_child():
            return
        if self.boot_dir is not None:
            children.stop_following(self.saved_env)
            shutil.rmtree(self.boot_dir, ignore_errors=True)
        if not self.keep:
            shutil.rmtree(self.run_dir, ignore_errors=True)


def _rank_wait() -> float:
    """How long rank 0 waits for the other ranks' profiles: FASTPROF_RANK_WAIT seconds
    (default 300)."""
    try:
        return max(0.0, float(os.environ.get("FASTPROF_RANK_WAIT", "300")))
    except ValueError:
        return 300.0


def _end_like_python() -> None:
    """What Python does once the main module has run, before it exits, done before a job's
    report: joins the threads still running (threading's exit callbacks shut the executors
    down: concurrent.futures', joblib's loky), then runs the atexit handlers (multiprocessing's
    ends the pools it still holds, joining or terminating their workers), so that the
    processes the script left running have ended and written their profiles when the report
    reads them.  Python does neither again at exit (both run once)."""
    import atexit

    threading = sys.modules.get("threading")
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()


def _report_job(opts: argparse.Namespace, job: _Job, out: _ReportOutput) -> None:
    """The report of run --subprocesses: the profile merged over the processes (-o, --format,
    --html or the printed view, one tree summed over processes by default), then the
    per-process table."""
    from .merge import format_processes, read_run, tree_note, write_merged
    from .report.outputs import emit, print_note

    if getattr(opts, "as_program", False) and not getattr(opts, "abrupt", False):
        _end_like_python()  # (a caller in the same program goes on; SIGTERM ends it as it is)
    job.write_own()
    if not job.reports():
        print(
            f"fastprof: rank {job.rank}'s profile written to {_shown(job.run_dir)} (rank 0 reports "
            f"the job; see it with: python -m fastprof view {_shown(job.run_dir)})",
            file=sys.stderr,
        )
        return
    run = read_run(job.run_dir, trusted=True)  # its own job's files
    n = len(run.procs)
    title = (
        f"fastprof: {opts.title} ({opts.clock} clock, {n} process{'es' if n != 1 else ''}"
        f"{_left_out(run)})"
    )
    if not opts.merge_threads and opts.format in (None, "text"):
        opts.merge_threads = True  # the job's tree: every process summed by path
    table = format_processes(run)
    if job.lines is not None:
        _report_job_lines(opts, job, run, table, out)
        return
    if opts.outfile and opts.format in (None, "pstats"):
        write_merged(run, opts.outfile)
        sys.stderr.write(table)
        print(
            f"fastprof: merged profile of {n} process(es) written to {_shown(opts.outfile)}"
            + (f" (each process's in {_shown(job.run_dir)})" if job.keep else ""),
            file=sys.stderr,
        )
        if opts.html:
            from .report.html import write_html

            write_html(opts.html, run.stats, run.tree, title=title)
            print_note(f"HTML report written to {opts.html}")
        return
    stream = out.stream()
    note = emit(
        run.stats,
        run.tree,
        opts,
        stream,
        title=title,
        outfile=opts.outfile,
        top=_rows(opts, run.tree),
        no_tree=tree_note(run) or "no process left one",
    )
    printed = not note
    (stream if printed else sys.stderr).write("\n" + table)
    print_note(note)


def _left_out(run: Any) -> str:
    """For a report's title: the processes the run's call tree leaves out, or empty."""
    if not run.tree_left_out or run.proc_trees is None:
        return ""
    return "; the call tree leaves out " + ", ".join(str(p) for p in run.tree_left_out)


def _report_job_lines(
    opts: argparse.Namespace, job: _Job, run: Any, table: str, out: _ReportOutput
) -> None:
    """The report of run --subprocesses --lines / --lines-of: the line timings summed over
    the processes (-o writes them as a .lprof file, --html as a page, else kernprof's table
    is printed), a note per function saying which processes ran it, then the per-process
    table."""
    from .lines import LineStats, code_key
    from .merge import format_line_processes
    from .report.outputs import print_note

    stats = run.lines if run.lines is not None else LineStats({}, 1e-9)
    for f in job.lines.functions:  # functions that never ran still get their (empty) block
        c = f.__code__
        stats.timings.setdefault(code_key(c), [])
    n = len(run.procs)
    notes = format_line_processes(run)
    if opts.html:
        from .report.html import write_html

        title = f"fastprof: {opts.title} ({opts.clock} clock, line timings, {n} process(es))"
        write_html(opts.html, None, None, stats, title=title)
        print_note(f"HTML report written to {opts.html}")
    if opts.outfile:
        stats.to_file(opts.outfile)
        sys.stderr.write(notes + table)
        print(
            f"fastprof: line timings of {n} process(es) written to {_shown(opts.outfile)}"
            + (f" (each process's in {_shown(job.run_dir)})" if job.keep else ""),
            file=sys.stderr,
        )
        return
    if opts.html:
        sys.stderr.write(notes + table)
        return
    stream = out.stream()
    stats.print(stream, 1e-6)
    stream.write(("\n" + notes if notes else "") + "\n" + table)


@_fastprofs_path
def _report(
    prof: Any,
    opts: argparse.Namespace,
    line_mode: bool,
    out: _ReportOutput,
    job: Optional[_Job] = None,
) -> None:
    """Writes -o (and the call tree beside it), --format and --html, or prints the default
    view: the call tree when the profiler recorded one and no -s was given, else the table.
    With job (run --subprocesses), the profile merged over the job's processes."""
    from .report.outputs import emit, print_note

    error = getattr(opts, "profile_error", None)
    if error is not None:
        cause = error.__cause__ if error.__cause__ is not None else error
        print(
            f"fastprof: no report: the profile stopped recording when one of its hooks met "
            f"an error ({type(cause).__name__}: {_shown(str(cause))})",
            file=sys.stderr,
        )
        return
    if job is not None:
        _report_job(opts, job, out)
        return

    if line_mode:
        if opts.html:
            from .report.html import write_html

            write_html(
                opts.html,
                None,
                None,
                prof.get_stats(),
                title=f"fastprof: {opts.title} ({opts.clock} clock, line timings)",
            )
            print_note(f"HTML report written to {opts.html}")
        if opts.outfile:
            prof.dump_stats(opts.outfile)
            print(f"fastprof: line timings written to {_shown(opts.outfile)}", file=sys.stderr)
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
    from .stats import Stats
    from .tree import save_tree

    stats = _own_stats(prof)
    st = Stats(stats)
    title = f"fastprof: {opts.title} ({opts.clock} clock)"
    if opts.outfile and opts.format in (None, "pstats"):
        import marshal

        from ._tree_file import tree_text

        with open(opts.outfile, "wb") as f:
            marshal.dump(stats, f)
        # the tree file from the core's records: no tree is built for it
        wall = getattr(opts, "wall", None)  # saved with it: view --threads shows it
        import warnings

        with warnings.catch_warnings(record=True) as warned:  # a note, whatever -W says
            warnings.simplefilter("always")
            where = save_tree(opts.outfile, tree_text(prof, wall=wall, drop_disable=True))
        for w in warned:
            print(f"fastprof: {_shown(str(w.message))}", file=sys.stderr)
        print(
            f"fastprof: profile written to {_shown(opts.outfile)}"
            + (f" (its call tree to {_shown(where)})" if where is not None else "")
            + f" (see it with: python -m fastprof view {_shown(opts.outfile)})",
            file=sys.stderr,
        )
        if opts.html:
            from .report.html import write_html

            write_html(opts.html, st, _run_tree(prof, opts), title=title)
            print_note(f"HTML report written to {opts.html}")
        return
    tree = _run_tree(prof, opts) if _shows_tree(opts) else None
    note = emit(
        st, tree, opts, out.stream(), title=title, outfile=opts.outfile, top=_rows(opts, tree)
    )
    print_note(note)


def _run_tree(prof: Any, opts: argparse.Namespace) -> Any:
    """The run's call tree (without the runner's own disable, with the run's wall time), or
    None when the profiler keeps none."""
    from .report.source import tree_of

    tree = _own_tree(tree_of(prof))
    if tree is not None:
        tree.wall = getattr(opts, "wall", None)
    return tree


def _shows_tree(opts: argparse.Namespace) -> bool:
    """Whether what opts asks for reads the call tree: the default view (no -s, no --filter),
    --threads, --html and the tree's exports.  The flat table (-s), callgrind and pstats do not:
    building a large tree costs seconds, and cProfile's users asking for its table pay none."""
    if opts.format in ("speedscope", "collapsed") or opts.html or getattr(opts, "threads", False):
        return True
    return opts.format in (None, "text") and opts.sort is None and not getattr(opts, "filter", None)


def _rows(opts: argparse.Namespace, tree: Any) -> Optional[int]:
    """How many rows a table shows: all with --all, else --top, else the default of the view
    (the flat table's, or the shorter table under the call tree, which is shown when there
    is one and neither -s nor --filter was given)."""
    if opts.all:
        return None
    if opts.top is not None:
        return int(opts.top)
    tree_view = getattr(opts, "sort", None) is None and not getattr(opts, "filter", None)
    if tree is not None and tree_view and not getattr(opts, "threads", False):
        from .report.tree_text import DEFAULT_TOP

        return DEFAULT_TOP
    return _DEFAULT_TOP


def _fail(command: str, message: object) -> int:
    """Prints one line ``fastprof COMMAND: message`` to stderr (control characters escaped);
    returns 2, the exit status of an unreadable or malformed input."""
    print(f"fastprof {command}: {_shown(str(message))}", file=sys.stderr)
    return 2


def _is_line_stats_file(path: str) -> bool:
    """True when path names line timings (.lprof, or a pickle) rather than a pstats file."""
    if path.endswith(".lprof"):
        return True
    if not os.path.isfile(path):  # the loader says why (and a pipe is never opened)
        return False
    try:
        with open(path, "rb") as f:
            return f.read(1) == b"\x80"  # a pickle (protocol 2+); pstats files start with '{'
    except OSError:
        return False  # the loader says why


def _view_lines(opts: argparse.Namespace) -> int:
    """``fastprof view FILE.lprof``: prints kernprof's table of saved line timings."""
    from .lines import load_stats
    from .report.lines_text import show_text

    if opts.callgrind:
        return _fail("view", f"{opts.file}: --callgrind needs a call profile, not line timings")
    try:
        stats = load_stats(opts.file)
    except (OSError, ValueError) as e:
        return _fail("view", e)
    try:
        show_text(stats.timings, stats.unit, opts.unit, sys.stdout, opts.stripzeros, opts.summarize)
    except BrokenPipeError:
        sys.stderr.close()
    return 0


def _positive_float(text: str) -> float:
    """An argparse type: the finite number > 0 ``text`` names, else an ArgumentTypeError."""
    import argparse

    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not 0 < x < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return x


def _view(argv: Sequence[str]) -> int:
    """``fastprof view FILE``: prints the call tree (when FILE.tree.json is beside FILE and no
    -s is given) or the table of a saved profile, or writes an export (or the line timings of
    a .lprof file); returns 0, or 2 with one line on stderr when the file is unreadable or
    malformed."""
    import argparse

    from .report.outputs import add_view_options, check_view_options, emit, print_note

    p = argparse.ArgumentParser(
        prog="fastprof view",
        description="Print the call tree or the table of a saved "
        "profile (written by fastprof -o, cProfile or "
        "dump_stats), or export it; or the line timings "
        "of a .lprof file.",
    )
    p.add_argument(
        "file",
        help="the profile file (pstats), line timings (.lprof), or the run "
        "directory of run --subprocesses (merged, with the per-process "
        "table)",
    )
    p.add_argument(
        "-s",
        "--sort",
        type=_sort_key,
        default=None,
        metavar="SORT",
        help=f"print the flat table sorted by SORT (default {_DEFAULT_SORT} when "
        f"there is no call tree): " + ", ".join(SORT_KEYS),
    )
    p.add_argument(
        "--top",
        type=_positive_int,
        default=None,
        metavar="N",
        help=_TOP_ROWS_HELP,
    )
    p.add_argument("--all", action="store_true", help="show every row")
    p.add_argument(
        "--filter",
        metavar="REGEX",
        help="flat table of the functions whose file:line(name) matches this regular expression",
    )
    p.add_argument("--full-paths", action="store_true", help="do not strip directories")
    p.add_argument(
        "--callgrind",
        metavar="OUT",
        help="write a callgrind file (for KCachegrind) to OUT instead of printing",
    )
    p.add_argument(
        "--callers",
        metavar="F",
        help="the callers of the functions whose file:line(name) matches the regular expression F",
    )
    p.add_argument("--callees", metavar="F", help="the functions called by those matching F")
    p.add_argument("-o", "--outfile", metavar="OUT", help="where --format writes")
    add_view_options(p)
    p.add_argument(
        "--unit",
        type=_positive_float,
        default=1e-6,
        metavar="SECONDS",
        help="line timings: the unit of the Time columns (default 1e-6)",
    )
    p.add_argument(
        "--stripzeros", action="store_true", help="line timings: leave out functions that never ran"
    )
    p.add_argument(
        "--summarize",
        action="store_true",
        help="line timings: end with one line of total time per function",
    )
    opts = p.parse_args(argv)
    bad = check_view_options(opts)
    if bad:
        p.error(bad)
    if _is_line_stats_file(opts.file):
        return _view_lines(opts)
    from .report.source import load_profile

    table = ""
    title = f"fastprof: {opts.file}"
    no_tree = "a pstats file without FILE.tree.json beside it"
    try:
        if os.path.isdir(opts.file):  # a run directory of run --subprocesses
            from .merge import format_line_processes, format_processes, read_run, tree_note

            if opts.threads:
                raise ValueError(f"{opts.file}: --threads reads one process's profile file")

            run = read_run(opts.file)
            st, tree, table = run.stats, run.tree, format_processes(run)
            no_tree = tree_note(run) or no_tree
            if run.lines is not None:  # the line timings summed over the processes
                import io

                text = io.StringIO()
                run.lines.print(text, opts.unit, opts.stripzeros, summarize=opts.summarize)
                table = text.getvalue() + format_line_processes(run) + "\n" + table
            opts.merge_threads = True  # one tree summed over the processes, as run reports it
            title += f" ({len(run.procs)} processes{_left_out(run)})"
        else:
            st, tree = load_profile(opts.file)
            if opts.threads and tree is not None and tree.processes:
                from .report.outputs import MERGED_THREADS

                raise ValueError(f"{opts.file}: {MERGED_THREADS}")
        if opts.filter:
            st = st.filter(opts.filter)
    except (OSError, ValueError) as e:
        return _fail("view", e)
    try:
        if opts.callers or opts.callees:
            from .report.callers_text import format_callers

            for pattern, which in ((opts.callers, "callers"), (opts.callees, "callees")):
                if pattern:
                    sys.stdout.write(
                        format_callers(st, pattern, which, strip_dirs=not opts.full_paths)
                    )
            return 0
        if opts.callgrind:
            st.to_callgrind(opts.callgrind)
            print(f"fastprof: callgrind file written to {_shown(opts.callgrind)}", file=sys.stderr)
            return 0
        note = emit(
            st,
            tree,
            opts,
            sys.stdout,
            title=title,
            outfile=opts.outfile,
            top=_rows(opts, tree),
            strip_dirs=not opts.full_paths,
            no_tree=no_tree,
        )
        if table:
            (sys.stderr if note else sys.stdout).write("\n" + table)
        print_note(note)
    except BrokenPipeError:
        sys.stderr.close()
    except (OSError, ValueError) as e:
        print(f"fastprof view: {_shown(str(e))}", file=sys.stderr)
        return 2
    return 0


def _diff(argv: Sequence[str]) -> int:
    """``fastprof diff A B``: handed to fastprof.diff.main."""
    from . import diff

    return diff.main(list(argv))


def _compare(argv: Sequence[str]) -> int:
    """``fastprof compare``: handed to fastprof.compare.main."""
    from . import compare

    result = compare.main(list(argv))
    return 0 if result is None else int(result)


_TOP_HELP = """\
usage: fastprof [run] [options] (script.py | -m module) [args ...]
       fastprof view FILE [-s SORT] [--top N] [--filter REGEX] [--callers F] [--callees F]
       fastprof diff A.prof B.prof [--html OUT]
       fastprof merge RUN_DIR -o OUT.prof
       fastprof compare A.prof B.prof | A.json B.json
       fastprof demo [--size N] [--top N]

Exact, low-overhead profiling of Python programs.

commands:
  run       profile a script or module and print where the time goes (the default command;
            cProfile's options -o, -s, -m are accepted)
  view      print the call tree or the table of a saved profile (pstats), or export it;
            or saved line timings (.lprof)
  diff      what changed between two saved profiles, per function and per call path
  merge     one pstats file from the per-process profiles of run --subprocesses --run-dir DIR
  compare   compare two saved profiles (pstats) or two saved benchmark runs (JSON)
  demo      profile a small image pipeline, find its bottleneck and time the fixes
            (needs NumPy)

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
    if cmd == "merge":
        from . import merge

        return merge.main(args[1:])
    if cmd == "demo":
        from . import _demo

        return _demo.main(args[1:])
    if cmd == "run":
        args = args[1:]
    # the command line itself (argv read from sys.argv) leaves the script's state in place
    return _run(args, restore=argv is not None)
