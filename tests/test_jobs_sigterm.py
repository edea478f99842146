"""SIGTERM at the edges of a job's life: between a fork and Python's after-fork step (a
pool's terminate() right after it started a worker), twice in a row while the runner reports
(`timeout` signals the runner, then its process group), and while rank 0 waits for the other
ranks' profiles after its script ended.  Each time the report is written (or, for the worker
that ran nothing, the process ends at once, as without fastprof), the process ends by the
signal, and no temporary folder is left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any, List

from test_jobs import _env, fastprof, write

TIMEOUT = 120


def _run(cmd: List[str], tmp_path: Any, **extra: str) -> subprocess.CompletedProcess:
    env = _env()
    env["TMPDIR"] = str(tmp_path / "tmp")
    env.update(extra)
    os.makedirs(env["TMPDIR"], exist_ok=True)
    return subprocess.run(
        cmd, env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=TIMEOUT
    )


def _left(tmp_path: Any) -> List[str]:
    return sorted(n for n in os.listdir(tmp_path / "tmp") if n.startswith("fastprof-"))


WATCHDOG = """\
    import os, signal, sys, threading
    from fastprof import _fastprof

    got = []
    signal.signal(signal.SIGTERM, lambda s, f: got.append(s))
    _fastprof._sigterm_watchdog()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

    def send():  # from a thread that takes SIGTERM: it runs the C handler, the nudges start
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        os.kill(os.getpid(), signal.SIGTERM)

    t = threading.Thread(target=send)
    t.start()
    t.join()
    pid = os.fork()
    if pid == 0:
        print("child", _fastprof._sigterm_watchdog_cancel(), flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
    print("parent", _fastprof._sigterm_watchdog_cancel(), _fastprof._sigterm_watchdog_cancel())
"""


def test_the_watchdog_says_whose_sigterm_started_it(tmp_path: Any) -> None:
    """A fork child inherits the flag of its parent's SIGTERM, not the signal: cancel says
    False there (the child is not ending), True in the process the signal came to."""
    script = write(tmp_path, "wd.py", WATCHDOG)
    r = _run([sys.executable, str(script)], tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["child False", "parent True False"]


FORK_WINDOW = """\
    import os, signal, sys
    from fastprof import children

    # what a SIGTERM between the fork and Python's after-fork step leaves behind: the
    # watchdog started in the child, its Python handler's call dropped
    children._sigterm_before_after_fork = lambda: True
    pid = os.fork()
    if pid == 0:
        print("the child ran the program's code", flush=True)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    ended = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM
    print("child ended by SIGTERM" if ended else f"child status {status}")
"""


def test_a_sigterm_before_the_after_fork_step_ends_the_child_at_once(tmp_path: Any) -> None:
    script = write(tmp_path, "fork_window.py", FORK_WINDOW)
    r = fastprof(["run", "--subprocesses", str(script)], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "child ended by SIGTERM" in r.stdout and "ran the program" not in r.stdout


PESTER = """\
    import os, signal, threading, time

    def pester():
        while True:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.001)

    def work():
        return sum(range(100))

    work()
    threading.Thread(target=pester, daemon=True).start()
    time.sleep(60)
"""


def test_sigterms_that_keep_coming_do_not_cut_the_report_short(tmp_path: Any) -> None:
    script = write(tmp_path, "pester.py", PESTER)
    r = _run([sys.executable, "-m", "fastprof", "run", "--subprocesses", str(script)], tmp_path)
    assert r.returncode == -signal.SIGTERM, (r.stdout, r.stderr)
    assert "ended by SIGTERM" in r.stderr
    assert "process(es)" in r.stdout and "pester.py" in r.stdout, (r.stdout, r.stderr)
    assert _left(tmp_path) == []


RANK_WAIT = """\
    import os, signal, threading

    def work():
        return sum(range(100))

    work()
    # the other rank never writes: rank 0's runner waits for it once this script has ended
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
"""


def test_a_sigterm_while_rank_0_waits_still_reports(tmp_path: Any) -> None:
    script = write(tmp_path, "rank_wait.py", RANK_WAIT)
    run_dir = tmp_path / "ranks"
    cmd = [sys.executable, "-m", "fastprof", "run", "--subprocesses", "--run-dir", str(run_dir)]
    r = _run(cmd + [str(script)], tmp_path, RANK="0", WORLD_SIZE="2", FASTPROF_RANK_WAIT="100")
    assert r.returncode == -signal.SIGTERM, (r.stdout, r.stderr)
    assert "rank_wait.py" in r.stdout and "process(es)" in r.stdout, (r.stdout, r.stderr)
    assert _left(tmp_path) == []
