"""A job's temporary folders (run --subprocesses) are removed however the runner ends: killed
by SIGKILL, by a SIGTERM whose default action the program put back, or replaced by an exec
(fastprof._reaper); the process that removes them is no child of the program and does not
outlive the job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any, List

import pytest

from test_jobs import _env, write  # noqa: E402  (tests/ is on sys.path)

pytestmark = pytest.mark.skipif(
    not hasattr(os, "posix_spawn") or not os.path.exists("/bin/sh"),
    reason="the folders' watcher starts through /bin/sh with os.posix_spawn",
)

START = """\
    import multiprocessing as mp, os, signal, sys

    def leaf(i):
        return i * i

    if __name__ == "__main__":
        with mp.get_context("fork").Pool(2) as pool:
            pool.map(leaf, range(8))
"""


def _leftovers(tmp: Any, wait: float = 15.0) -> List[str]:
    """What is left in tmp once the watcher had up to ``wait`` seconds to remove it."""
    end = time.monotonic() + wait
    while os.listdir(tmp) and time.monotonic() < end:
        time.sleep(0.05)
    return os.listdir(tmp)


def _watchers_of(tmp: Any) -> List[int]:
    """The pids of processes whose command line names tmp (the watcher names the folders)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if str(tmp).encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def _run(tmp_path: Any, body: str) -> subprocess.CompletedProcess:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = write(tmp_path, "job.py", START + body)
    env = dict(_env(), TMPDIR=str(tmp))
    return subprocess.run(
        [sys.executable, "-m", "fastprof", "run", "--subprocesses", str(script)],
        capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize(
    "body, status",
    [
        # the program puts SIGTERM's default action back, then is ended by it
        (
            "        signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
            "        os.kill(os.getpid(), signal.SIGTERM)\n",
            -signal.SIGTERM,
        ),
        ("        os.kill(os.getpid(), signal.SIGKILL)\n", -signal.SIGKILL),
        # the program becomes another program: the runner's report never comes
        ("        os.execv('/bin/true', ['/bin/true'])\n", 0),
    ],
    ids=["sigterm-default", "sigkill", "exec"],
)
def test_the_folders_are_removed_when_the_runner_cannot(
    tmp_path: Any, body: str, status: int
) -> None:
    r = _run(tmp_path, body)
    assert r.returncode == status, r.stderr
    assert _leftovers(tmp_path / "tmp") == []
    _no_watcher_left(tmp_path / "tmp")


def _no_watcher_left(tmp: Any) -> None:
    """Asserts the watcher of tmp's folders ends (it may still be exiting just after it
    removed them)."""
    end = time.monotonic() + 15
    while _watchers_of(tmp) and time.monotonic() < end:
        time.sleep(0.05)
    assert _watchers_of(tmp) == []


def test_a_normal_run_leaves_no_folder_and_no_watcher(tmp_path: Any) -> None:
    r = _run(
        tmp_path,
        "        try:\n"
        "            os.wait()\n"  # the watcher is no child of the program
        "        except ChildProcessError:\n"
        "            print('no child')\n",
    )
    assert r.returncode == 0, r.stderr
    assert "no child" in r.stdout
    assert "3 process(es)" in r.stderr + r.stdout, r.stdout + r.stderr
    assert _leftovers(tmp_path / "tmp", wait=0.0) == []  # the runner removed them itself
    _no_watcher_left(tmp_path / "tmp")


def test_a_program_that_closes_its_descriptors_keeps_its_job(tmp_path: Any) -> None:
    """The watcher holds nothing the program could close: a program closing every descriptor
    it does not know (as daemons do) still gets its job's report, and no folder is left."""
    r = _run(
        tmp_path,
        "        os.closerange(3, 4096)\n"
        "        pid = os.fork()\n"
        "        if pid == 0:\n"
        "            leaf(3)\n"
        "            os._exit(0)\n"
        "        os.waitpid(pid, 0)\n",
    )
    assert r.returncode == 0, r.stderr
    assert "could not" not in r.stderr and "not profiled" not in r.stderr, r.stderr
    assert "4 process(es)" in r.stdout + r.stderr, r.stdout + r.stderr
    assert _leftovers(tmp_path / "tmp", wait=0.0) == []


def test_a_background_descendant_neither_inherits_nor_holds_the_watcher(tmp_path: Any) -> None:
    """A command the program leaves running in the background gets no descriptor of
    fastprof's, and the watcher ends with the runner, not with that command."""
    r = _run(
        tmp_path,
        "        os.system('ls /proc/self/fd > fds.txt; sleep 30 >/dev/null 2>&1 &')\n",
    )
    assert r.returncode == 0, r.stderr
    assert sorted((tmp_path / "fds.txt").read_text().split()) == ["0", "1", "2", "3"]
    _no_watcher_left(tmp_path / "tmp")


def test_a_relative_tmpdir_survives_the_script_changing_folder(tmp_path: Any) -> None:
    (tmp_path / "tmp").mkdir()
    (tmp_path / "elsewhere").mkdir()
    script = write(tmp_path, "job.py", START + "        os.chdir('elsewhere')\n")
    env = dict(_env(), TMPDIR="tmp")
    r = subprocess.run(
        [sys.executable, "-m", "fastprof", "run", "--subprocesses", str(script)],
        capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "could not" not in r.stderr and "3 process(es)" in r.stdout + r.stderr
    assert _leftovers(tmp_path / "tmp", wait=0.0) == []


def _namespace_init() -> List[str]:
    """The command prefix that runs a program as the first process of a new PID namespace (as
    a container's first process runs), or a skip when this machine cannot make one."""
    import shutil

    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("no unshare(1) to make a PID namespace with")
    probe = subprocess.run(
        [unshare, "--pid", "--fork", "--mount-proc", "true"], capture_output=True, timeout=30
    )
    if probe.returncode != 0:
        pytest.skip(f"unshare cannot make a PID namespace here: {probe.stderr.decode()[:200]}")
    return [unshare, "--pid", "--fork", "--mount-proc"]


def test_as_a_containers_first_process_the_program_reaps_what_it_started(tmp_path: Any) -> None:
    """As PID 1 (docker run IMAGE python -m fastprof run ...), an orphan becomes the runner's
    child: no watcher is started there, so a program that reaps children until there are none
    ends, as without fastprof."""
    init = _namespace_init()
    script = write(
        tmp_path,
        "init.py",
        """\
        import os, subprocess, sys

        subprocess.Popen([sys.executable, "-c", "pass"])
        while True:
            try:
                os.wait()
            except ChildProcessError:
                print("no more children", flush=True)
                break
        """,
    )
    r = subprocess.run(
        [*init, sys.executable, "-m", "fastprof", "run", "--subprocesses", str(script)],
        capture_output=True, text=True, env=_env(), cwd=str(tmp_path), timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "no more children" in r.stdout
    assert "2 process(es)" in r.stdout + r.stderr


def test_as_a_containers_first_process_sigterm_is_ignored_as_without_fastprof(
    tmp_path: Any,
) -> None:
    """The kernel ignores SIGTERM's default action for a namespace's first process: fastprof
    installs no handler there, so the program goes on and is reported once, at its end."""
    init = _namespace_init()
    script = write(
        tmp_path,
        "term.py",
        """\
        import os, signal

        os.kill(os.getpid(), signal.SIGTERM)
        print("went on", flush=True)
        """,
    )
    r = subprocess.run(
        [*init, sys.executable, "-m", "fastprof", "run", "-s", "calls", str(script)],
        capture_output=True, text=True, env=_env(), cwd=str(tmp_path), timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "went on" in r.stdout and "ended by SIGTERM" not in r.stderr
    assert r.stdout.count("function calls") == 1, r.stdout
