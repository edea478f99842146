"""Following a job's child processes: each Python process of a ``fastprof run --subprocesses``
job profiles itself and writes its own profile into the run directory.

How a child starts profiling:

- a fork child (``os.fork``, multiprocessing's ``fork`` start method, and every process the
  ``forkserver`` forks) is taken over by an ``os.register_at_fork`` hook: the profile it
  inherited is switched off and a fresh one starts for the new process;
- a new interpreter (multiprocessing's ``spawn``, the forkserver itself, ``subprocess`` running
  ``sys.executable``) finds the bootstrap directory on its ``PYTHONPATH``: its
  ``sitecustomize`` starts profiling when the job's environment variables name a run directory
  and this same Python, then hands over to the ``sitecustomize`` that the path would otherwise
  give (so a user's own one still runs).

Each process writes ``<run dir>/<pid>.prof`` (pstats), ``<pid>.tree.marshal`` (its call
tree summed over its threads, as flat records whose numbers are JSON text already: see
``fastprof._proc_tree``), ``<pid>.lprof``
(line timings, when lines are on) and ``<pid>.json`` (command line, parent pid, wall time,
rank) when it ends: at normal exit, at ``os._exit`` (a gate in C that stops the profile first: see
``_set_exit_gate``), and on SIGTERM (a handler that
writes, then dies of the signal as it would have; a pool's ``terminate`` sends it).  The
atexit callback and the SIGTERM handler are builtins of the core too (``_stopping``): each stops
the profile from C before the write, so no process's profile holds fastprof's own calls.  Every
file is written to a temporary name and renamed, so a reader never sees half a file.
``<pid>.json`` is first written when the process starts, marked incomplete: a process killed
outright is reported as missing, never as an empty profile.

A child's start and its write are kept cheap: this module imports only what the standard
library's interpreter start has loaded already (no json, no report code), the records are
written with marshal, and the conversion to views happens when the run is read.  What can be
done per process is done here, in parallel across the job, rather than in the runner after it:
the tree is summed over threads and its numbers rendered as text, so that the runner joins the
processes' trees into its tree file without walking or encoding them.
"""

from __future__ import annotations

# The interpreter's own signal module, loaded at its start (the public ``signal`` module is a
# layer of enums over it): a profiled program's own ``import signal`` shows in its profile.
import _signal as signal  # type: ignore[import-not-found]  # (no stub)
import atexit
import os
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

__all__ = [
    "ENV_DIR",
    "ENV_PYTHON",
    "FORMAT",
    "follow",
    "start_child",
    "write_now",
    "own_stats",
    "process_rank",
    "run_options",
    "json_text",
]

ENV_DIR = "FASTPROF_RUN_DIR"  # the run directory children write to
ENV_PYTHON = "FASTPROF_RUN_PYTHON"  # the interpreter children must be to follow
ENV_OPTIONS = "FASTPROF_RUN_OPTIONS"  # the profilers' options, one ``name=value`` a line
FORMAT = 3  # the version of the per-process files' layout (3: trees as _proc_tree writes them)
READS = (2, 3)  # the versions fastprof.merge reads (2: trees as the core's raw records)
TREE_SUFFIX = ".tree.marshal"  # a process's call tree: _proc_tree.encode's records, marshalled

# Rank variables of the launchers, in the order they are looked at.
RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
SIZE_VARS = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")

_BOOT = '''\
"""fastprof: runs the sitecustomize the path would otherwise give, then starts profiling in a
Python child of a `fastprof run --subprocesses` job (the profile starts where Python's own
start-up ends, as a profiler started on the command line would, so neither this file's
frames nor the site's are in it)."""
import os as _os
import sys as _sys

_HERE = {here!r}
_ROOT = {root!r}


def _fastprof_start():
    if _os.environ.get({env_python!r}) != _sys.executable + "|" + _sys.version:
        return
    try:
        try:
            from fastprof import children
        except ImportError:
            _sys.path.append(_ROOT)
            try:
                from fastprof import children
            finally:
                _sys.path.remove(_ROOT)
        children.start_child()
    except Exception as e:  # a child must run even when it cannot be profiled
        _sys.stderr.write("fastprof: this process is not profiled: %r\\n" % (e,))


def _fastprof_chain():
    import importlib.machinery
    import importlib.util

    path = [p for p in _sys.path if _os.path.abspath(p or ".") != _HERE]
    _sys.path[:] = path
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    _sys.modules["sitecustomize"] = mod  # what `import sitecustomize` then returns
    spec.loader.exec_module(mod)


try:
    _fastprof_chain()
finally:  # a failing sitecustomize of the user's (Python reports it) stops no profile
    _fastprof_start()
'''


def json_text(value: Any) -> str:
    """value (None, bool, int, float, str, or lists and str-keyed dicts of them) as JSON
    text, every non-ASCII character escaped as json.dumps does (a lone surrogate from an
    undecodable command line included).  Written here so that a child never imports json."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return "null"  # not JSON; never a time the records hold
        return repr(value)
    if isinstance(value, str):
        if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
            return '"' + value + '"'
        out = []
        for ch in value:
            o = ord(ch)
            if ch == '"' or ch == "\\":
                out.append("\\" + ch)
            elif 0x20 <= o < 0x7F:
                out.append(ch)
            elif o > 0xFFFF:
                o -= 0x10000
                out.append("\\u%04x\\u%04x" % (0xD800 | (o >> 10), 0xDC00 | (o & 0x3FF)))
            else:
                out.append("\\u%04x" % o)
        return '"' + "".join(out) + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(json_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{" + ",".join(json_text(str(k)) + ":" + json_text(v) for k, v in value.items()) + "}"
        )
    raise TypeError(f"json_text: cannot write a {type(value).__name__}")


def options_text(options: Dict[str, Any]) -> str:
    """The job's options as FASTPROF_RUN_OPTIONS holds them: ``name=value`` lines, a list one
    line per item (read back by run_options)."""
    lines = []
    for name, value in options.items():
        for item in value if isinstance(value, list) else [value]:
            text = str(int(item)) if isinstance(item, bool) else str(item)
            if "\n" in text or "\0" in text:
                raise ValueError(f"{name}: {text!r} holds a line break or a NUL")
            lines.append(f"{name}={text}")
    return "\n".join(lines)


_LISTS = ("lines_of",)  # the options that are lists


def run_options() -> Dict[str, Any]:
    """The job's options from FASTPROF_RUN_OPTIONS: str values, lists for _LISTS."""
    out: Dict[str, Any] = {name: [] for name in _LISTS}
    for line in os.environ.get(ENV_OPTIONS, "").split("\n"):
        name, sep, value = line.partition("=")
        if not sep:
            continue
        if name in _LISTS:
            out[name].append(value)
        else:
            out[name] = value
    return out


def process_rank() -> Optional[int]:
    """The rank a launcher (torchrun, MPI, Slurm) gave this process, or None."""
    for var in RANK_VARS:
        value = os.environ.get(var)
        if value is not None and value.strip().isdigit():
            return int(value)
    return None


def world_size() -> Optional[int]:
    """The number of ranks the launcher started (with process_rank's variables), or None."""
    for var in SIZE_VARS:
        value = os.environ.get(var)
        if value is not None and value.strip().isdigit() and int(value) > 0:
            return int(value)
    return None


def own_stats(prof: Any) -> Dict[Any, Any]:
    """The pstats dictionary of prof, without the call of ``disable`` that ended it."""
    from ._runstats import own_stats as stats_of

    return stats_of(prof)


def _command_line() -> List[str]:
    """This process's command line: sys.orig_argv (3.10+), else /proc/self/cmdline (which,
    unlike sys.argv, keeps a ``-c`` command), else sys.executable and sys.argv."""
    argv = getattr(sys, "orig_argv", None)
    if argv:
        return list(argv)
    try:
        with open("/proc/self/cmdline", "rb") as f:
            words = f.read().split(b"\0")
        if words and not words[-1]:
            words.pop()
        if words:
            return [os.fsdecode(w) for w in words]
    except OSError:
        pass
    return [sys.executable, *sys.argv]


class _Session:
    """This process's profile and where it goes."""

    def __init__(
        self, run_dir: str, prof: Any, ppid: int, *, root: bool, quiet: bool = False
    ) -> None:
        self.quiet = quiet  # multiprocessing's forkserver: not profiled, its fork children are
        self.run_dir = run_dir
        self.prof = prof
        self.lines: Any = None  # the line profiler, when the job times lines
        self.pid = os.getpid()
        self.ppid = ppid
        self.root = root  # the process `fastprof run` started in: the runner writes its file
        self.start = time.time()
        self.written = False
        self.rank = process_rank()
        # the files' name: PID, or rank<R>-PID under a launcher (pids repeat across nodes)
        self.name = str(self.pid) if self.rank is None else f"rank{self.rank}-{self.pid}"

    def meta(self, complete: bool) -> Dict[str, Any]:
        end = time.time()
        return {
            "format": FORMAT,
            "pid": self.pid,
            "ppid": self.ppid,
            "root": self.root,
            "argv": _command_line(),
            "rank": self.rank,
            "world_size": world_size() if self.rank is not None else None,
            "start": self.start,
            "end": end if complete else None,
            "wall": end - self.start if complete else None,
            "complete": complete,
        }


_session: Optional[_Session] = None
_hooks_installed = False
# [the disable of this process's child session, or None]: what the atexit callback and the
# SIGTERM handler (builtins of the core, see _stopping) call from C before they write, so that
# the write's own Python calls stay out of the process's profile
_STOP: List[Any] = [None]


def _atomic_write(path: str, data: bytes) -> None:
    """Writes data to path through a temporary file renamed over it; OSError on failure."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _write_meta(s: _Session, complete: bool) -> None:
    _atomic_write(os.path.join(s.run_dir, f"{s.name}.json"), json_text(s.meta(complete)).encode())


def _tree_records(prof: Any) -> Optional[Tuple[Any, ...]]:
    """The call tree prof recorded (without the call of ``disable`` that ended it), summed
    over its threads path by path, as ``fastprof._proc_tree.encode`` lays it out for the run
    directory (its numbers already JSON text: the runner joins the processes' trees without
    re-encoding them); None when it keeps no tree."""
    if not hasattr(prof, "_raw_tree"):
        return None
    from ._proc_tree import encode
    from ._runstats import own_records
    from .keys import label

    tspt, nodes, threads, merged = prof._raw_tree()
    if not nodes and not merged:
        return None
    keys = [label(f[0]) for f in prof._raw()[1]]
    return encode(tspt, keys, own_records(keys, nodes), len(threads))


# A child's write that cannot finish (a lock left held by a thread of the parent at fork)
# must not keep a pool's terminate waiting forever: SIGALRM's default action ends it.
WRITE_LIMIT_S = 60


def _guard_write() -> Optional[int]:
    """Arms SIGALRM (when no handler and no alarm of the program's own are set, in the main
    thread of a child) to end a stuck write; returns the seconds to re-arm afterwards (0 to
    disarm), or None when nothing was armed."""
    s = _session
    try:
        if s is None or s.root or signal.getsignal(signal.SIGALRM) != signal.SIG_DFL:
            return None
        before = signal.alarm(WRITE_LIMIT_S)
        if before:  # the program's own alarm: put it back, arm nothing
            signal.alarm(before)
            return None
        return 0
    except (ValueError, OSError):
        return None


def write_now(s: Optional[_Session] = None) -> bool:
    """Stops this process's profile and writes its files (once); returns whether it wrote.
    Never raises: a process that ends must end, so a failure is one line on stderr."""
    s = _session if s is None else s
    if s is None or s.written or s.quiet or s.pid != os.getpid():
        return False
    s.written = True
    try:
        # first, so that the write's own calls (the alarm, the collector) stay out of the profile
        if getattr(s.prof, "_busy", False):
            # SIGTERM came while a hook of the profiler ran Python code (a builtin's name, a
            # user timer), where it cannot be disabled: the process ends right after this
            # write, so the hook never resumes, and the tables are read as they stand.
            pass
        else:
            s.prof.disable()
        if s.lines is not None:
            s.lines.disable()
    except Exception as e:
        try:
            sys.stderr.write(f"fastprof: could not stop the profile of process {s.pid}: {e!r}\n")
        except Exception:
            pass
        return False
    alarm = _guard_write()
    # the write allocates tens of thousands of short-lived objects and frees them: no cyclic
    # collection can find anything among them (a child ends right after its write)
    import gc

    collecting = gc.isenabled()
    gc.disable()
    try:
        import marshal

        stats = own_stats(s.prof)
        base = os.path.join(s.run_dir, s.name)
        try:
            tree = _tree_records(s.prof)
        except Exception:  # the flat profile is still worth having
            tree = None
        if tree is not None:
            _atomic_write(base + TREE_SUFFIX, marshal.dumps(tree))
        if s.lines is not None:
            _atomic_write(f"{base}.lprof", _line_stats_bytes(s.lines))
        _atomic_write(f"{base}.prof", marshal.dumps(stats))
        _write_meta(s, complete=True)
        return True
    except Exception as e:
        if not os.path.isdir(s.run_dir):  # the job is over: its runner reported and cleaned up
            return False
        try:
            sys.stderr.write(f"fastprof: could not write the profile of process {s.pid}: {e!r}\n")
        except Exception:
            pass
        return False
    finally:
        if collecting:
            gc.enable()
        if alarm is not None:
            signal.alarm(alarm)


def _on_exit() -> None:
    s = _session
    if s is not None and not s.root:
        write_now(s)


def _before_exit() -> None:
    """What os._exit does first (multiprocessing's fork workers end through it): writes a
    child's profile."""
    s = _session
    if s is not None and not s.root:
        write_now(s)


def _set_exit_gate(s: Optional[_Session]) -> None:
    """Makes os._exit the core's gate for this process's session s (see fastprof._exit_gate):
    it stops a child's profile from C, then writes it (_before_exit)."""
    from . import _exit_gate

    prof = None if s is None or s.root else s.prof
    _STOP[0] = None if prof is None else prof.disable
    _exit_gate.install(_STOP[0], _before_exit)


def _stopping(then: Callable[..., Any]) -> Callable[..., Any]:
    """then, behind a builtin of the core that first calls _STOP[0] from C (a builtin called
    from C, by atexit or the signal machinery, reaches no profile hook): a child's profile ends
    where the process began to end, and holds none of fastprof's own calls.  then itself when
    the core has no such builtin (an older build)."""
    try:
        return _C()._stop_first(_STOP, then)
    except (ImportError, AttributeError):
        return then


def _on_sigterm(signum: int, frame: Any) -> None:
    """Writes the profile, then ends the process by SIGTERM's default action.  A process
    already writing its profile on its way out (a pool worker that got its sentinel, then
    terminate's SIGTERM) finishes the write and ends as it was ending."""
    try:
        _C()._sigterm_watchdog_cancel()
    except Exception:  # an extension without the watchdog: nothing was armed
        pass
    s = _session
    if s is not None and s.written and s.pid == os.getpid():
        return
    _on_exit()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _C() -> Any:
    from . import _fastprof

    return _fastprof


def _install_sigterm() -> None:
    """Catches SIGTERM (when the program has no handler of its own) to write the profile, with
    the C watchdog that makes the handler run even when the signal lands just before a
    blocking call (see src/profile/exit_watchdog.c)."""
    from ._runner_term import runner_sigterm

    try:
        current = signal.getsignal(signal.SIGTERM)
        if current in (signal.SIG_DFL, None) or (
            runner_sigterm is not None and current is runner_sigterm
        ):
            signal.signal(signal.SIGTERM, _stopping(_on_sigterm))
            _C()._sigterm_watchdog()
    except ValueError:  # not the main thread: the runtime cannot catch the signal here
        pass
    except (ImportError, AttributeError, OSError):  # the handler alone, as before
        pass


def _new_profile() -> Any:
    from .profile import Profile

    kw = run_options()
    clock: Any = kw.get("clock", "wall")
    return Profile(builtins=kw.get("builtins", "1") != "0", clock=clock)


def _lines_on() -> bool:
    """Whether the job times lines (--lines or --lines-of)."""
    kw = run_options()
    return kw.get("lines") == "1" or bool(kw["lines_of"])


def _new_lines() -> Any:
    """A line profiler set up from the job's options (not yet enabled), or None when the job
    times no lines."""
    if not _lines_on():
        return None
    from ._child_lines import line_profiler

    kw = run_options()
    return line_profiler(kw["lines_of"], kernprof=kw.get("lines") == "1")


def _enable_lines(lines: Any) -> None:
    """Switches a process's line profiler on for the whole run when the job names functions
    to time (``--lines-of``).  Under ``--lines`` alone it stays off: what ``@profile``
    registers is timed by ``builtins.profile``'s own profiler, whose hooks are on only while
    such code runs, as kernprof's are.  Returns None."""
    if lines is not None and run_options()["lines_of"]:
        lines.enable()


def _line_stats_bytes(lp: Any) -> bytes:
    """The line timings of lp as a .lprof file holds them."""
    import pickle

    return pickle.dumps(lp.get_stats(), protocol=4)


def _forked_to_exec() -> bool:
    """Whether this fork child is one that subprocess forks to exec a program (with a
    ``preexec_fn``, CPython's _posixsubprocess runs the fork hooks in it): it runs no code of
    the program's but that function, then becomes the program, which a Python one follows
    itself, or ends at once, from C, when the exec fails."""
    try:
        code = sys._getframe(2).f_code  # the Python frame that called fork_exec
    except ValueError:
        return False
    return code.co_name == "_execute_child" and os.path.basename(code.co_filename) == (
        "subprocess.py"
    )


def _after_fork_child() -> None:
    """In a fork child: the inherited profile stops, this process's own starts (none in the
    child that subprocess forks to exec a program: it writes no profile, and would be reported
    missing)."""
    global _session
    parent = _session
    if parent is None:
        return
    try:
        if parent.prof is not None:
            parent.prof.disable()
    except Exception:
        pass
    if _sigterm_before_after_fork():
        # a SIGTERM came between the fork and here (a pool's terminate() right after it
        # started the worker): the interpreter's after-fork step dropped its Python handler's
        # call, and the watchdog's nudges would wait 10 s for it.  The process has run none of
        # the program's code: it ends by the signal at once, as it would without fastprof.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
    if _forked_to_exec():
        _session = None
        return
    try:
        prof = _new_profile()
        ppid = parent.ppid if parent.quiet else parent.pid
        _session = _Session(parent.run_dir, prof, ppid, root=False)
        if parent.lines is not None:
            # the parent's line profiler (the forkserver's holds what its preload
            # registered), with its registrations, counts from zero here
            parent.lines.reset()
            _session.lines = parent.lines
        _install_sigterm()
        _write_meta(_session, complete=False)
        _set_exit_gate(_session)
        _enable_lines(_session.lines)
        prof.enable()
    except Exception as e:
        _session = None
        sys.stderr.write(f"fastprof: this process is not profiled: {e!r}\n")


def _sigterm_before_after_fork() -> bool:
    """Whether the SIGTERM watchdog inherited from the parent was set off in this fork child
    before Python's after-fork step ran (it is stopped here either way).  Returns False when
    the core has no watchdog."""
    try:
        return bool(_C()._sigterm_watchdog_cancel())
    except Exception:
        return False


def _install_hooks() -> None:
    """The fork and exit hooks (each registered once per process; they do nothing while no
    session is on) and the os._exit gate of this process's session."""
    global _hooks_installed
    if not _hooks_installed:
        _hooks_installed = True
        # threading's own fork hook first (hooks run in the order they were registered): it
        # remakes the locks that a thread of the parent may have held at the fork, which the
        # child's profile takes when it starts (Profile.enable reads the threads' names)
        import threading  # noqa: F401

        os.register_at_fork(after_in_child=_after_fork_child)
        atexit.register(_stopping(_on_exit))
    _set_exit_gate(_session)


def _machinery() -> Optional[str]:
    """Which of multiprocessing's own processes this is ("resource_tracker", "forkserver"),
    or None: they run no user code of their own.  joblib's loky backend starts its own copy of
    multiprocessing's resource tracker."""
    argv = " ".join(_command_line())
    for name in ("resource_tracker", "forkserver"):
        if f"multiprocessing.{name}" in argv:
            return name
    if "joblib.externals.loky.backend.resource_tracker" in argv:
        return "resource_tracker"
    return None


def start_child() -> None:
    """Called by the bootstrap in a new interpreter of the job: starts its profile."""
    global _session
    run_dir = os.environ.get(ENV_DIR)
    if not run_dir or _session is not None:
        return
    kind = _machinery()
    if kind == "resource_tracker":
        return
    if kind == "forkserver":  # its fork children are the workers: follow them
        _session = _Session(run_dir, None, os.getppid(), root=False, quiet=True)
        # not enabled here: it registers what the preloaded script names (@profile
        # included), for the fork children to time
        _session.lines = _new_lines()
        _install_hooks()
        return
    prof = _new_profile()
    _session = _Session(run_dir, prof, os.getppid(), root=False)
    _session.lines = _new_lines()
    _install_hooks()
    _install_sigterm()
    _write_meta(_session, complete=False)
    if run_options().get("worker_startup") == "0" and _start_at_run(_session):
        return
    _enable_lines(_session.lines)
    prof.enable()


def _start_at_run(s: _Session) -> bool:
    """In a spawn worker (multiprocessing's spawn_main on the command line): arranges for
    s's profilers to start when the worker's process object starts running
    (``BaseProcess._bootstrap``, which calls ``run``), so that the worker's start-up is left
    out; returns whether it did (False elsewhere: start now)."""
    if "spawn_main" not in " ".join(_command_line()):
        return False
    import multiprocessing.process as mp_process

    cls: Any = mp_process.BaseProcess
    bootstrap = cls._bootstrap

    def _bootstrap(self: Any, *args: Any, **kwargs: Any) -> Any:
        cls._bootstrap = bootstrap
        if _session is s and not s.written:
            _enable_lines(s.lines)
            s.prof.enable()
        return bootstrap(self, *args, **kwargs)

    cls._bootstrap = _bootstrap
    return True


def record_names(run_dir: str) -> List[str]:
    """The names (without .json) of the process records in run_dir: PID or rank<R>-PID."""
    import re

    record = re.compile(r"^(?:rank\d+-)?\d+\.json$")
    return [n[:-5] for n in os.listdir(run_dir) if record.match(n)]


def runner_session(run_dir: str, prof: Any, lines: Any = None) -> "_Session":
    """The session of the process ``fastprof run`` started in, when its children are not
    followed: its profile (and lines's line timings) go to run_dir (write them with
    write_now)."""
    s = _Session(os.path.abspath(run_dir), prof, os.getppid(), root=True)
    s.lines = lines
    _write_meta(s, complete=False)
    return s


def _compile_boot(path: str) -> bool:
    """Writes the bytecode cache of the bootstrap at path (this Python's), so that each new
    interpreter of the job reads it instead of compiling the source (about 12 million
    instructions a process; multiprocessing's spawn workers are started with -B when the
    runner was, and never write a cache themselves).  The cache is what py_compile writes (a
    timestamp-checked .pyc, PEP 552), made here so that py_compile and its traceback are not
    loaded before the script.  Returns whether it was written; a failure only leaves each
    process to compile the source."""
    import importlib.util
    import marshal

    try:
        st = os.stat(path)
        with open(path, "rb") as f:
            code = compile(f.read(), path, "exec", dont_inherit=True)
        head = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
        head += (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
        head += (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
        cache = importlib.util.cache_from_source(path)
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        _atomic_write(cache, head + marshal.dumps(code))
        return True
    except (OSError, SyntaxError, ValueError, NotImplementedError):
        return False


def follow(
    run_dir: str,
    prof: Any,
    boot_dir: str,
    *,
    clock: str = "wall",
    builtins: bool = True,
    lines: Any = None,
    lines_of: Optional[List[str]] = None,
    kernprof: bool = False,
    worker_startup: bool = True,
) -> "_Session":
    """In the process ``fastprof run`` started in: makes its Python children profile
    themselves into run_dir (the environment for new interpreters, with the bootstrap written
    to boot_dir; the fork hooks for fork children).  prof is the runner's own profile, which
    fork children switch off; lines its line profiler (or None), which fork children keep
    with their counts zeroed.  lines_of (``module:qualname``, ``file.py:qualname`` or
    ``__main__:qualname`` for the script being run) and kernprof (``@profile`` marks
    functions) say which functions new interpreters time line by line; without
    worker_startup, a spawn worker's profile starts when its process starts running (see
    _start_at_run).  Returns the
    runner's session (write it with write_now).  ValueError when an option cannot be passed
    on (a line break in a name)."""
    global _session
    from . import __file__ as pkg_file

    options: Dict[str, Any] = {"clock": clock, "builtins": builtins}
    if not worker_startup:
        options["worker_startup"] = False
    if lines is not None:
        options.update(lines=kernprof, lines_of=list(lines_of or []))
    text = options_text(options)  # before anything changes: it may raise
    os.makedirs(boot_dir, exist_ok=True)
    root = os.path.dirname(os.path.dirname(os.path.abspath(pkg_file)))
    here = os.path.abspath(boot_dir)
    boot = _BOOT.format(here=here, root=root, env_python=ENV_PYTHON)
    _atomic_write(os.path.join(boot_dir, "sitecustomize.py"), boot.encode())
    _compile_boot(os.path.join(boot_dir, "sitecustomize.py"))
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = here + (os.pathsep + old if old else "")
    os.environ[ENV_DIR] = os.path.abspath(run_dir)
    os.environ[ENV_PYTHON] = sys.executable + "|" + sys.version
    os.environ[ENV_OPTIONS] = text
    _session = runner_session(run_dir, prof, lines)
    _install_hooks()
    return _session


def is_child_of_runner() -> bool:
    """Whether this process is a fork child of the runner (it must not print the report)."""
    s = _session
    return s is not None and not s.root


def stop_following(saved_env: Dict[str, Optional[str]]) -> None:
    """In the runner, once the job is reported: the fork hook and exit hooks do nothing any
    more, os._exit is the real one again, and the environment variables follow() changed are
    put back (as saved_env holds them)."""
    global _session
    if _session is not None and _session.root:
        _session = None
    from . import _exit_gate

    _exit_gate.restore()
    for k, v in saved_env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


ENV_NAMES = ("PYTHONPATH", ENV_DIR, ENV_PYTHON, ENV_OPTIONS)
