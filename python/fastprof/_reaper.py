"""The temporary folders of a job (``run --subprocesses``), removed however the runner ends.

The runner removes them itself when the program ends, when it raises, and on a SIGTERM it
catches.  It cannot when it is killed (SIGKILL: the out-of-memory killer, a scheduler's last
word), when the program put SIGTERM's default action back before the signal came, or when the
program replaced itself with ``os.exec*`` and what it became ended.  ``watch`` starts a small
process beside the runner that looks every quarter of a second whether the runner's process
(its pid with the start time it had, so a reused pid is not taken for it) still runs, and
when it has ended, however it ended, removes what is left of the folders and ends too.  The
process holds nothing of the runner's (no descriptor the program could close or a child
could inherit; it closes those it inherited), is in a session of its own (a Ctrl-C at the terminal or a hang-up does not
reach it), and is no child of the runner (a program's own ``os.wait()`` never sees it).  It
is started through ``/bin/sh`` without loading ``subprocess``, and is a Python isolated from
the environment and from site (``-I -S``), which the job's bootstrap does not profile.

What ends every process at once ends it too: a kill of a whole cgroup (Slurm's or systemd's
end of a job, a container stopped), or of a PID namespace whose first process is the runner
(no process is started there: it would be the runner's child).
"""

from __future__ import annotations

import os
import sys
from typing import Sequence

__all__ = ["watch"]

# the process: closes what it inherited (the runner's parent's pipes and locks stay the
# runner's alone), ignores the signals of a terminal and of a process group, waits for the end of
# process argv[1] (whose start time in /proc is argv[2], or "" where there is no /proc),
# removes the folders argv[3:], and ends
_CODE = (
    "import os, shutil, signal, sys, time\n"
    "try:\n"
    "    fds = [int(fd) for fd in os.listdir('/proc/self/fd')]\n"
    "except OSError:\n"
    "    fds = range(3, 1024)\n"
    "for fd in fds:\n"
    "    if fd > 2:\n"
    "        try:\n"
    "            os.close(fd)\n"
    "        except OSError:\n"
    "            pass\n"
    "for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):\n"
    "    signal.signal(s, signal.SIG_IGN)\n"
    "pid, start = int(sys.argv[1]), sys.argv[2].encode()\n"
    "def alive():\n"
    "    if not start:\n"
    "        try:\n"
    "            os.kill(pid, 0)\n"
    "        except OSError:\n"
    "            return False\n"
    "        return True\n"
    "    try:\n"
    "        with open('/proc/%d/stat' % pid, 'rb') as f:\n"
    "            fields = f.read().rpartition(b')')[2].split()\n"
    "    except OSError:\n"
    "        return False\n"
    "    return len(fields) > 19 and fields[0] != b'Z' and fields[19] == start\n"
    "while alive():\n"
    "    time.sleep(0.25)\n"
    "for d in sys.argv[3:]:\n"
    "    shutil.rmtree(d, ignore_errors=True)\n"
)
# sh starts the process in the background and ends at once (the runner waits for sh alone)
_SHELL = 'code=$1; shift; "$0" -I -S -c "$code" "$@" >/dev/null 2>&1 </dev/null &'


def _start_time(pid: int) -> str:
    """The start time of process pid in /proc/PID/stat (its 22nd field, in clock ticks since
    boot), or "" where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()
        return fields[19].decode() if len(fields) > 19 else ""
    except (OSError, UnicodeDecodeError):
        return ""


def watch(folders: Sequence[str]) -> None:
    """Starts the process that removes ``folders`` once this process has ended.  Returns
    None; where no process can be started the folders are the runner's alone, as before."""
    shell = "/bin/sh"
    spawn = getattr(os, "posix_spawn", None)
    if not folders or not sys.executable or spawn is None or not os.path.exists(shell):
        return
    pid = os.getpid()
    if pid == 1:
        # the init of its namespace (a container's first process): the process would become
        # the runner's own child there, which a program's os.wait() would wait for; and a kill
        # of the runner there ends every process of the namespace, this one too
        return
    args = [shell, "-c", _SHELL, sys.executable, _CODE, str(pid), _start_time(pid), *folders]
    try:
        os.waitpid(spawn(shell, args, {}, setsid=True), 0)
    except (OSError, ValueError, TypeError):
        pass
