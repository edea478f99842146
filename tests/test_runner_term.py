"""SIGTERM while ``fastprof run`` runs a program (fastprof._runner_term): the report of what
ran, then the end the signal gives; a program's own handler, and a fork child's end, as
without fastprof."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any, List, Tuple

from test_jobs import _env, write  # noqa: E402  (tests/ is on sys.path)

BUSY = """\
    import os, sys, time

    def leaf():
        return 1

    def busy():
        n = 0
        while True:
            leaf()
            n += 1
            if n == 1000:  # the signal then lands inside busy, whenever it comes
                print("ready", flush=True)

    busy()
"""


def _run_then_term(args: List[str], cwd: Any, env_extra: Any = None) -> Tuple[int, str, str]:
    """Starts ``python -m fastprof ARGS``, sends it SIGTERM once the program printed "ready",
    and returns (returncode, stdout after "ready", stderr)."""
    env = _env()
    env.update(env_extra or {})
    proc = subprocess.Popen(
        [sys.executable, "-m", "fastprof", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(cwd),
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first == "ready\n", first + proc.communicate(timeout=60)[1]
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return proc.returncode, out, err


def test_sigterm_reports_what_ran_then_ends_by_the_signal(tmp_path: Any) -> None:
    script = write(tmp_path, "busy.py", BUSY)
    rc, out, err = _run_then_term(["run", "-s", "calls", "--all", str(script)], tmp_path)
    assert rc == -signal.SIGTERM, err  # the exit status Python's own end by SIGTERM gives
    assert "the program was ended by SIGTERM" in err
    rows = {ln.split()[-1]: ln.split() for ln in out.splitlines() if ln.strip()}
    assert "busy.py:6(busy)" in rows and "busy.py:3(leaf)" in rows, out
    assert rows["busy.py:6(busy)"][0] == "1" and int(rows["busy.py:3(leaf)"][0]) >= 1000
    # none of fastprof's own handling is in the profile
    assert "_runner_term" not in out and "disable" not in out and "_Handler" not in out


def test_a_job_ended_by_sigterm_reports_and_leaves_no_temporary_folder(tmp_path: Any) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = write(
        tmp_path,
        "job.py",
        """\
        import os, time

        def leaf():
            return 1

        pid = os.fork()
        if pid == 0:
            for _ in range(7):
                leaf()
            os._exit(0)
        os.waitpid(pid, 0)
        print("ready", flush=True)
        while True:
            time.sleep(0.01)
        """,
    )
    rc, out, err = _run_then_term(
        ["run", "--subprocesses", "-s", "calls", str(script)], tmp_path, {"TMPDIR": str(tmp)}
    )
    assert rc == -signal.SIGTERM, err
    assert "2 process(es)" in out + err, out + err
    leaf = [ln.split() for ln in out.splitlines() if ln.strip().endswith("job.py:3(leaf)")]
    assert leaf and leaf[0][0] == "7", out  # the fork child's calls, merged
    assert os.listdir(tmp) == []  # the run and bootstrap folders are removed


def test_a_programs_own_sigterm_handler_is_kept(tmp_path: Any) -> None:
    script = write(
        tmp_path,
        "own.py",
        """\
        import signal, sys

        def bye(signum, frame):
            print("handled", flush=True)
            sys.exit(3)

        signal.signal(signal.SIGTERM, bye)
        print("ready", flush=True)
        while True:
            pass
        """,
    )
    rc, out, err = _run_then_term(["run", "-s", "calls", "--all", str(script)], tmp_path)
    assert rc == 3, err
    assert "handled" in out and "own.py:3(bye)" in out
    assert "ended by SIGTERM" not in err


def test_a_fork_child_of_the_program_ends_by_sigterm_as_without_fastprof(tmp_path: Any) -> None:
    script = write(
        tmp_path,
        "kid.py",
        """\
        import os, signal, time

        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(w, b"x")
            while True:
                time.sleep(0.01)
        os.read(r, 1)
        os.kill(pid, signal.SIGTERM)
        st = os.waitpid(pid, 0)[1]
        print("child", os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGTERM)
        """,
    )
    r = subprocess.run(
        [sys.executable, "-m", "fastprof", "run", "-s", "calls", str(script)],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=str(tmp_path),
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "child True" in r.stdout
    assert r.stdout.count("function calls") == 1  # the child printed no report
    assert "ended by SIGTERM" not in r.stderr


def test_the_handler_is_put_back_after_the_run_and_never_taken_from_a_program(
    monkeypatch: Any,
) -> None:
    from fastprof import _runner_term

    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    reported: List[int] = []
    h = _runner_term.catch(lambda: None, lambda: reported.append(1))
    try:
        assert h is not None and signal.getsignal(signal.SIGTERM) is h
        assert _runner_term.runner_sigterm is h  # a job's fork child replaces it with its own
    finally:
        _runner_term.release(h)
    assert (
        signal.getsignal(signal.SIGTERM) == signal.SIG_DFL and _runner_term.runner_sigterm is None
    )

    def mine(signum: int, frame: Any) -> None:
        pass

    signal.signal(signal.SIGTERM, mine)
    try:
        assert _runner_term.catch(lambda: None, lambda: None) is None  # the program's stays
        assert signal.getsignal(signal.SIGTERM) is mine
        _runner_term.release(h)  # one of ours no longer in place: the program's stays too
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    assert reported == []


def test_a_caller_in_a_program_keeps_its_signals(tmp_path: Any) -> None:
    """fastprof.cli.main called from a program (not the command line) catches no signal."""
    from fastprof import cli

    seen: List[Any] = []
    script = write(
        tmp_path,
        "peek.py",
        """\
        import signal
        SEEN.append(signal.getsignal(signal.SIGTERM))
        """,
    )
    import builtins

    builtins.SEEN = seen  # type: ignore[attr-defined]
    try:
        assert cli.main(["run", "-o", str(tmp_path / "p.prof"), str(script)]) == 0
    finally:
        del builtins.SEEN  # type: ignore[attr-defined]
    assert seen == [signal.SIG_DFL]


def test_a_handler_that_calls_the_one_it_replaced_goes_on_as_without_fastprof(
    tmp_path: Any,
) -> None:
    """signal.getsignal(SIGTERM) gives fastprof's handler where Python would give SIG_DFL; a
    program's handler that calls "the previous handler" when it is callable must not end the
    process through fastprof's: its own code decides (here: exit status 5)."""
    script = write(
        tmp_path,
        "chain.py",
        """\
        import os, signal, sys

        prev = signal.getsignal(signal.SIGTERM)

        def handler(signum, frame):
            if callable(prev):
                prev(signum, frame)
            print("own handler", flush=True)
            sys.exit(5)

        signal.signal(signal.SIGTERM, handler)
        os.kill(os.getpid(), signal.SIGTERM)
        """,
    )
    r = subprocess.run(
        [sys.executable, "-m", "fastprof", "run", "-s", "calls", "--all", str(script)],
        capture_output=True, text=True, env=_env(), cwd=str(tmp_path), timeout=120,
    )  # fmt: skip
    assert r.returncode == 5, r.stderr
    assert "own handler" in r.stdout and "chain.py:5(handler)" in r.stdout, r.stdout
    assert "ended by SIGTERM" not in r.stderr
