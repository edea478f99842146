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
    assert _watchers_of(tmp_path / "tmp") == []


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
    end = time.monotonic() + 15
    while _watchers_of(tmp_path / "tmp") and time.monotonic() < end:
        time.sleep(0.05)
    assert _watchers_of(tmp_path / "tmp") == []
