"""SIGTERM while ``fastprof run`` runs a program: the report of what ran, then the end the
signal gives.

Without fastprof, SIGTERM ends a Python program at once, and cProfile's profile with it.  The
programs users profile are often ended that way: ``timeout 600 python -m fastprof run job.py``,
a batch scheduler's time limit (Slurm sends SIGTERM, then SIGKILL after its KillWait), a
container being stopped.  While the program runs, and only while SIGTERM has its default action
(a program with a handler of its own keeps it), the runner catches it: the profile is stopped
from C where the signal found the program (a builtin of the core, so none of this shows in the
profile), the report is written as at the program's end (the temporary folders of a job
removed), and the process then ends by SIGTERM's default action, so its exit status is still
"killed by SIGTERM".  The core's watchdog (src/profile/exit_watchdog.c) makes sure the handler
runs, or the process ends, when the signal lands just before a blocking call.  A fork child of
the program that inherited the handler ends as it would without fastprof, or, in a job, writes
its own profile (fastprof.children).
"""

from __future__ import annotations

# The interpreter's own signal module, which it loads at start-up: the public ``signal`` module
# is a layer of enums over it, and a profiled script's own ``import signal`` (subprocess and
# asyncio import it) must show in its profile as without fastprof.  Its handlers compare
# equal to signal's (SIG_DFL is 0 in both).
import _signal as signal  # type: ignore[import-not-found]  # (no stub: the module under signal)
import os
import sys
from typing import Any, Callable, List, Optional

__all__ = ["catch", "finish", "hand_over", "release", "runner_sigterm"]

# the SIGTERM handler catch installed while the runner runs the program, or None: a fork child
# of a job replaces it with its own (fastprof.children._install_sigterm)
runner_sigterm: Any = None


class _Handler:
    """The Python side of the runner's SIGTERM handler (behind the core's _stop_first)."""

    def __init__(self, report: Callable[[], None]) -> None:
        self.report = report
        self.pid = os.getpid()

    def __call__(self, signum: int, frame: Any) -> None:
        from . import _fastprof

        try:
            _fastprof._sigterm_watchdog_cancel()
        except (AttributeError, OSError):
            pass
        # a second SIGTERM (timeout sends one to the runner, then one to its process group)
        # would end the report half written: ignored until the report is out, then the end
        signal.signal(signal.SIGTERM, signal.SIG_IGN if os.getpid() == self.pid else signal.SIG_DFL)
        if os.getpid() == self.pid:
            try:
                sys.stderr.write(
                    "\nfastprof: the program was ended by SIGTERM; the profile stops where the "
                    "signal found it\n"
                )
            except (OSError, ValueError):
                pass
            try:
                self.report()
            finally:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def catch(stop: Callable[[], Any], report: Callable[[], None]) -> Optional[Any]:
    """Catches SIGTERM in the runner, when SIGTERM has its default action, this is the main
    thread and not the first process of a PID namespace (where the kernel ignores the signal):
    stop() from C, then report(), then the end by the signal.  Returns the handler (for
    release), or None when nothing was installed."""
    if os.getpid() == 1:
        # a namespace's first process (a container's): SIGTERM's default action there is to
        # be ignored, as it is without fastprof; a handler would end nothing
        return None
    try:
        if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
            return None
        from . import _fastprof

        cell: List[Any] = [stop]
        handler = _fastprof._stop_first(cell, _Handler(report))
        signal.signal(signal.SIGTERM, handler)
    except (ValueError, AttributeError, ImportError):  # not the main thread; an older core
        return None
    try:
        _fastprof._sigterm_watchdog()
    except (AttributeError, OSError):  # the handler alone
        pass
    global runner_sigterm
    runner_sigterm = handler
    return handler


class _Late:
    """SIGTERM while the runner reports after the program ended (rank 0 waiting for the other
    ranks' profiles, the merge, the tables): noted, the wait cut short (hurry), the report
    finished, then the end by the signal (finish)."""

    def __init__(self, hurry: Callable[[], None]) -> None:
        self.hurry = hurry
        self.got = False

    def __call__(self, signum: int, frame: Any) -> None:
        self.got = True
        self.hurry()


def hand_over(handler: Optional[Any], hurry: Callable[[], None]) -> Optional[_Late]:
    """release(handler), then, when catch had installed it and it was still in place, a
    _Late handler for the report that follows.  Returns that handler (for finish) or None."""
    if handler is None:
        return None
    try:
        still = signal.getsignal(signal.SIGTERM) is handler
    except ValueError:
        still = False
    release(handler)
    if not still:
        return None
    late = _Late(hurry)
    try:
        signal.signal(signal.SIGTERM, late)
    except ValueError:
        return None
    return late


def finish(late: Optional[_Late]) -> None:
    """Puts SIGTERM's default action back after the report; when a SIGTERM came during it,
    the process ends by that signal now."""
    if late is None:
        return
    handler: _Late = late
    try:
        if signal.getsignal(signal.SIGTERM) is handler:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
    except ValueError:
        pass
    if handler.got:
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGTERM)


def release(handler: Optional[Any]) -> None:
    """Puts SIGTERM's default action back once the program has run, when handler (catch's) is
    still the one in place; a handler the program installed since stays."""
    if handler is None:
        return
    global runner_sigterm
    runner_sigterm = None
    try:
        if signal.getsignal(signal.SIGTERM) is handler:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
    except ValueError:
        pass
