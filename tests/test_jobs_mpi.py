"""Profiles of multi-rank jobs: `mpirun -n 2 python -m fastprof run --run-dir DIR job.py`
writes one profile per rank, named by its rank, and rank 0 prints the merged report with the
per-rank table (load imbalance).  The launcher is Debian's Open MPI (installed by .ci/run);
these tests skip, saying why, where it is missing, and the mpi4py one where mpi4py is.
"""

from __future__ import annotations

import json
import marshal
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from typing import Any, Dict, List

import pytest

TIMEOUT = 180

JOB = """\
    import os
    import sys

    def leaf(i):
        return i

    def work(n):
        for i in range(n):
            leaf(i)

    if __name__ == "__main__":
        if sys.argv[1:] == ["mpi4py"]:
            from mpi4py import MPI

            comm = MPI.COMM_WORLD
            rank = comm.Get_rank()
            work(100 * (rank + 1))
            with open(f"sum{rank}.txt", "w") as f:  # not stdout: mpirun interleaves the ranks'
                f.write(str(comm.allreduce(rank + 1)))
        else:
            work(100 * (int(os.environ["OMPI_COMM_WORLD_RANK"]) + 1))
"""


def _mpirun() -> str:
    path = shutil.which("mpirun")
    if path is None:
        pytest.skip("no mpirun on PATH (Open MPI is not installed: apt-get install openmpi-bin)")
    return path


def _env() -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def launch(tmp_path: Any, args: List[str]) -> subprocess.CompletedProcess:
    """Runs ``mpirun -n 2 python -m fastprof run ARGS`` in tmp_path; fails on a hang."""
    env = _env()
    env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"  # containers run the suite as root
    env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    env["OMPI_MCA_rmaps_base_oversubscribe"] = "1"  # 2 ranks also on a 1-core machine
    cmd = [_mpirun(), "-n", "2", sys.executable, "-m", "fastprof", "run", *args]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(tmp_path),
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{cmd} hung\nstdout:\n{out}\nstderr:\n{err}")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def leaf_calls(path: Any, script: Any) -> int:
    with open(path, "rb") as f:
        stats: Dict[Any, Any] = marshal.load(f)
    return sum(
        v[1]
        for k, v in stats.items()
        if k[2] == "leaf" and os.path.exists(k[0]) and os.path.samefile(k[0], script)
    )


@pytest.mark.parametrize("mode", ["environment", "mpi4py"])
def test_mpirun_two_ranks(tmp_path: Any, mode: str) -> None:
    _mpirun()
    if mode == "mpi4py":
        try:
            import mpi4py  # noqa: F401
        except ImportError:
            pytest.skip(f"mpi4py is not installed in {sys.executable} (pip install mpi4py)")
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(JOB))
    run_dir = tmp_path / "shared"
    args = ["--run-dir", str(run_dir), "-s", "calls", "--all", str(script)]
    r = launch(tmp_path, args + (["mpi4py"] if mode == "mpi4py" else []))
    assert r.returncode == 0, r.stdout + r.stderr
    if mode == "mpi4py":
        assert [(tmp_path / f"sum{r}.txt").read_text() for r in (0, 1)] == ["3", "3"]
    # one record and one profile per rank, named by the rank
    names = sorted(os.listdir(run_dir))
    ranks = sorted(n.split("-")[0] for n in names if n.endswith(".prof"))
    assert ranks == ["rank0", "rank1"], names
    per_rank = {}
    for n in names:
        if n.endswith(".json") and not n.endswith(".tree.json"):  # a rank's record
            meta = json.loads((run_dir / n).read_text())
            assert meta["complete"] and meta["world_size"] == 2
            per_rank[meta["rank"]] = leaf_calls(run_dir / (n[:-5] + ".prof"), script)
    assert per_rank == {0: 100, 1: 200}
    # rank 0 printed the merged report with the per-rank table; rank 1 only its note
    assert "(wall clock, 2 processes)" in r.stdout
    row = [ln for ln in r.stdout.splitlines() if ln.endswith("job.py:4(leaf)")]
    assert row and row[0].split()[0] == "300"
    assert "per rank: 2 rank(s) with profiles" in r.stdout
    assert "max/mean" in r.stdout
    assert "rank 1's profile written to" in r.stderr
    # and the shared folder merges as any run directory
    r = subprocess.run(
        [sys.executable, "-m", "fastprof", "merge", str(run_dir), "-o", "m.prof"],
        capture_output=True,
        text=True,
        cwd=str(tmp_path),
        timeout=TIMEOUT,
        env=_env(),
    )
    assert r.returncode == 0, r.stderr
    assert leaf_calls(tmp_path / "m.prof", script) == 300
    assert "per rank: 2 rank(s)" in r.stderr


def test_mpirun_without_a_shared_run_dir_each_rank_reports_its_own(tmp_path: Any) -> None:
    # no --run-dir: each rank's folder is its own and temporary, so no rank waits for the
    # others (it waited 300 s, then named a folder its rank deleted): each prints its table
    _mpirun()
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(JOB))
    r = launch(tmp_path, ["--subprocesses", "-s", "calls", "--all", str(script)])
    assert r.returncode == 0, r.stdout + r.stderr
    # the flat table's rows (calls, then times); the per-process table below it may name
    # leaf as a process's top function too (pid, parent pid, rank, ...)
    rows = sorted(
        int(ln.split()[0])
        for ln in r.stdout.splitlines()
        if ln.endswith("job.py:4(leaf)") and "." in ln.split()[1]
    )
    assert rows == [100, 200]
    assert "no profile from rank" not in r.stderr and "rank 1's profile written" not in r.stderr
