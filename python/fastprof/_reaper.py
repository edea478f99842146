"""The temporary folders of a job (``run --subprocesses``), removed however the runner ends.

The runner removes them itself when the program ends, when it raises, and on a SIGTERM it
catches.  It cannot when it is killed (SIGKILL: the out-of-memory killer, a scheduler's last
word), when the program put SIGTERM's default action back before the signal came, or when the
program replaced itself with ``os.exec*``.  ``watch`` starts a small process beside the
runner, in a session of its own (so a Ctrl-C at the terminal or a hang-up does not reach it),
that waits on a pipe only the runner (and what it becomes through ``exec``, and its forked
children, which may still be writing there) holds open; when the last of them ends, however
it ends, the pipe closes and the process removes what is left of the folders.  It is not a
child of the runner: a program's own ``os.wait()`` never sees it.  The process is started
through ``/bin/sh`` without loading ``subprocess``, and is a Python isolated from the
environment and from site (``-I -S``), which the job's bootstrap does not profile.
"""

from __future__ import annotations

import os
import sys
from typing import Optional, Sequence

__all__ = ["watch", "release"]

# the process: ignores the signals of a terminal and of a process group, waits for the end of
# the pipe on fd 3, removes the folders given, and ends
_CODE = (
    "import os, shutil, signal, sys\n"
    "for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):\n"
    "    signal.signal(s, signal.SIG_IGN)\n"
    "while True:\n"
    "    try:\n"
    "        if not os.read(3, 512):\n"
    "            break\n"
    "    except InterruptedError:\n"
    "        continue\n"
    "    except OSError:\n"
    "        break\n"
    "for d in sys.argv[1:]:\n"
    "    shutil.rmtree(d, ignore_errors=True)\n"
)
# sh starts the process in the background and ends at once (the runner waits for sh alone)
_SHELL = '"$0" -I -S -c "$1" "$@" >/dev/null 2>&1 </dev/null &'


def watch(folders: Sequence[str]) -> Optional[int]:
    """Starts the process that removes ``folders`` once the runner and everything holding the
    pipe have ended.  Returns the pipe's end the runner keeps (inherited by what it executes),
    or None when no process could be started (the folders are then the runner's alone)."""
    shell = "/bin/sh"
    if not folders or not sys.executable or not os.path.exists(shell):
        return None
    spawn = getattr(os, "posix_spawn", None)
    if spawn is None:
        return None
    r, w = os.pipe()
    try:
        args = [shell, "-c", _SHELL, sys.executable, _CODE, *folders]
        actions = [(os.POSIX_SPAWN_DUP2, r, 3), (os.POSIX_SPAWN_CLOSE, w)]
        pid = spawn(shell, args, {}, file_actions=actions, setsid=True)
        os.waitpid(pid, 0)
    except (OSError, ValueError, TypeError):
        os.close(r)
        os.close(w)
        return None
    os.close(r)
    os.set_inheritable(w, True)  # kept through the program's exec: it is the runner still
    return w


def release(fd: Optional[int]) -> None:
    """Closes the runner's end of the pipe (the folders are removed by then): the process
    removes nothing more and ends.  Returns None."""
    if fd is None:
        return
    try:
        os.close(fd)
    except OSError:
        pass
