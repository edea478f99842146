"""Profiles of whole jobs: `fastprof run --subprocesses` follows the Python children (os.fork,
multiprocessing with fork, spawn and forkserver, ProcessPoolExecutor, subprocess of the same
Python), each writes its own profile into the run directory, and `merge DIR` / `view DIR`
read them back merged with a per-process table.

The scripts call functions a known number of times; the tests check those exact counts in
the merged profile, in each process's own file, and against profiling a child alone.  Each
command runs in its own process group, killed whole on a timeout, so a hang fails the test.
"""

from __future__ import annotations

import json
import marshal
import os
import signal
import subprocess
import sys
import textwrap
from typing import Any, Dict, List, Optional

import pytest

TIMEOUT = 120
START_METHODS = ["fork", "spawn", "forkserver"]


def _env(extra_path: Optional[str] = None) -> Dict[str, str]:
    env = dict(os.environ)
    paths = [p for p in sys.path if p]
    if extra_path:
        paths.insert(0, extra_path)
    env["PYTHONPATH"] = os.pathsep.join(paths)
    for k in ("FASTPROF_RUN_DIR", "FASTPROF_RUN_PYTHON", "FASTPROF_RUN_OPTIONS"):
        env.pop(k, None)
    env["PYTHONFAULTHANDLER"] = "1"  # a hung job's processes show their stacks (see fastprof())
    return env


def _group_listing(pgid: int) -> str:
    """One line per live process of process group pgid: pid, parent, state, what it waits in,
    command line (from /proc; a failure to diagnose a hang never hides the hang)."""
    lines = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:
                continue
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{name}/wchan") as f:
                wchan = f.read()
            lines.append(f"{name} ppid={fields[1]} state={fields[0]} wchan={wchan} {argv}")
        except (OSError, IndexError, ValueError):
            continue
    return "\n".join(lines) or "(none left)"


def fastprof(
    args: List[str], cwd: Any, *, extra_path: Optional[str] = None
) -> subprocess.CompletedProcess:
    """Runs ``python -m fastprof ARGS``; fails the test on a hang."""
    cmd = [sys.executable, "-m", "fastprof", *args]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(extra_path),
        cwd=str(cwd),
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        group = _group_listing(proc.pid)
        # faulthandler (PYTHONFAULTHANDLER in _env) prints every thread's stack on SIGABRT
        os.killpg(proc.pid, signal.SIGABRT)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        pytest.fail(f"{cmd} hung\nprocesses:\n{group}\nstdout:\n{out}\nstderr:\n{err}")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def load(path: Any) -> Dict[Any, Any]:
    with open(path, "rb") as f:
        data = marshal.load(f)
    assert isinstance(data, dict)
    return data


def calls(stats: Dict[Any, Any], script: Any, name: str) -> int:
    """The call count of function name defined in script (0 when absent)."""
    return sum(
        v[1]
        for k, v in stats.items()
        if k[2] == name and os.path.exists(k[0]) and os.path.samefile(k[0], script)
    )


def records(run_dir: Any) -> Dict[int, Dict[str, Any]]:
    out = {}
    for n in os.listdir(run_dir):
        if n.endswith(".json") and n[:-5].isdigit():
            with open(os.path.join(run_dir, n)) as f:
                out[int(n[:-5])] = json.load(f)
    return out


def write(tmp_path: Any, name: str, text: str) -> Any:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


POOL = """\
    import multiprocessing as mp
    import os
    import sys

    def leaf(i):
        return i * 2

    def work(n):
        for i in range(n):
            leaf(i)
        return os.getpid()

    if __name__ == "__main__":
        ctx = mp.get_context(sys.argv[1])
        with ctx.Pool(2) as pool:  # leaving the block terminates the workers (SIGTERM)
            seen, tasks = set(), 0
            while len(seen) < 2 and tasks < 4000:  # until both workers have run tasks
                seen.update(pool.map(work, [100] * 4, chunksize=1))
                tasks += 4
            print(tasks)
"""


# -- 1. the children are followed, with exact counts ---------------------------------------


@pytest.mark.parametrize("method", START_METHODS)
def test_pool_workers_exact_counts(tmp_path: Any, method: str) -> None:
    script = write(tmp_path, "pool.py", POOL)
    run_dir = tmp_path / "run"
    r = fastprof(
        ["run", "--subprocesses", "--run-dir", str(run_dir), "-o", "all.prof", str(script), method],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    tasks = int(r.stdout)
    assert "Error in sitecustomize" not in r.stderr
    merged = load(tmp_path / "all.prof")
    assert calls(merged, script, "leaf") == 100 * tasks
    assert calls(merged, script, "work") == tasks
    recs = records(run_dir)
    workers = [pid for pid, m in recs.items() if not m["root"]]
    root = [pid for pid, m in recs.items() if m["root"]]
    assert len(root) == 1 and len(workers) == 2, recs
    # every worker wrote its profile, also the ones pool.terminate() sent SIGTERM
    assert all(m["complete"] for m in recs.values()), recs
    per_worker = [calls(load(run_dir / f"{pid}.prof"), script, "leaf") for pid in workers]
    assert sum(per_worker) == 100 * tasks and all(per_worker)
    assert calls(load(run_dir / f"{root[0]}.prof"), script, "leaf") == 0
    for pid in workers:
        assert recs[pid]["ppid"] == root[0]
        assert recs[pid]["wall"] > 0
    assert "3 process(es)" in r.stderr


LEFT_OPEN = """\
    import concurrent.futures as cf
    import multiprocessing as mp
    import sys

    def leaf(i):
        return i * 2

    def work(n):
        for i in range(n):
            leaf(i)
        return n

    if __name__ == "__main__":
        # neither is closed: Python's exit ends them (the executor at threading's shutdown,
        # the pool through multiprocessing's atexit handler)
        pool = mp.get_context(sys.argv[1]).Pool(2)
        ex = cf.ProcessPoolExecutor(2, mp_context=mp.get_context(sys.argv[1]))
        print(sum(pool.map(work, [10] * 4)) + sum(ex.map(work, [10] * 4)))
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_processes_left_to_pythons_exit_are_in_the_report(tmp_path: Any, method: str) -> None:
    # the report is taken once Python's own exit steps have ended them, not before
    script = write(tmp_path, "left_open.py", LEFT_OPEN)
    r = fastprof(["run", "--subprocesses", "-o", "all.prof", str(script), method], tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "80\n"
    merged = load(tmp_path / "all.prof")
    assert calls(merged, script, "work") == 8
    assert calls(merged, script, "leaf") == 80
    assert "missing" not in r.stderr and "could not write" not in r.stderr, r.stderr


def test_executor_and_subprocess_exact_counts(tmp_path: Any) -> None:
    script = write(
        tmp_path,
        "job.py",
        """\
        import subprocess
        import sys
        from concurrent.futures import ProcessPoolExecutor

        def leaf(i):
            return i

        def work(n):
            return sum(leaf(i) for i in range(n))

        if __name__ == "__main__":
            if sys.argv[1:] == ["child"]:
                print(work(37))
                sys.exit(0)
            subprocess.run([sys.executable, __file__, "child"], check=True)
            with ProcessPoolExecutor(2) as ex:
                print(sum(ex.map(work, [10] * 5)))
        """,
    )
    run_dir = tmp_path / "run"
    r = fastprof(
        ["run", "--subprocesses", "--run-dir", str(run_dir), "-s", "calls", "--all", str(script)],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("666\n225\n")
    assert "4 process(es)" in r.stdout  # the parent, the subprocess, two pool workers
    recs = records(run_dir)
    merged: Dict[Any, Any] = {}
    from fastprof import Stats

    st = Stats(*(str(run_dir / f"{pid}.prof") for pid in recs))
    merged = st.to_dict()
    assert calls(merged, script, "leaf") == 37 + 50
    assert calls(merged, script, "work") == 1 + 5
    child = [m for m in recs.values() if m["argv"][-1] == "child"]
    assert len(child) == 1 and child[0]["argv"][-2] == str(script)


def test_a_fork_to_exec_with_preexec_fn_is_not_a_missing_process(tmp_path: Any) -> None:
    """subprocess with preexec_fn forks, runs the fork hooks and the function, then execs: the
    child that execs a program writes no profile and was reported missing (killed?)."""
    script = write(
        tmp_path,
        "job.py",
        """\
        import subprocess
        import sys

        def hi():
            return 1

        if __name__ == "__main__":
            if sys.argv[1:] == ["child"]:
                hi()
                sys.exit(0)
            subprocess.run(["true"], preexec_fn=lambda: None, check=True)
            subprocess.run(["false"], preexec_fn=lambda: None)
            subprocess.run([sys.executable, __file__, "child"], preexec_fn=lambda: None, check=True)
            try:
                subprocess.run(["/nonexistent/program"], preexec_fn=lambda: None)
            except OSError:
                pass
        """,
    )
    run_dir = tmp_path / "run"
    r = fastprof(["run", "--subprocesses", "--run-dir", str(run_dir), str(script)], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "missing" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert "2 process(es)" in r.stdout  # the script, and the Python program it ran
    recs = records(run_dir)
    assert sorted(len(m["argv"]) > 0 and m["argv"][-1] == "child" for m in recs.values()) == [
        False,
        True,
    ]


def test_a_fork_while_another_thread_holds_threadings_lock_does_not_hang(tmp_path: Any) -> None:
    """The child's profile starts in a fork hook and reads the threads' names, which takes
    threading's lock of its thread list. A thread of the parent that held it at the fork
    left it held in the child for good, unless threading's own hook remade it first: the
    child hung (CPython's test_threading met this under run --subprocesses)."""
    script = write(
        tmp_path,
        "job.py",
        """\
        import os
        import threading
        import time

        held, release = threading.Event(), threading.Event()

        def hold():
            with threading._active_limbo_lock:
                held.set()
                release.wait(30)

        t = threading.Thread(target=hold)
        t.start()
        held.wait()
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        release.set()
        t.join()
        deadline = time.monotonic() + 20
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                print("child", os.waitstatus_to_exitcode(status))
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                print("child hung")
                break
            time.sleep(0.01)
        """,
    )
    r = fastprof(["run", "--subprocesses", "-s", "calls", str(script)], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "child 7" in r.stdout and "2 process(es)" in r.stdout and "missing" not in r.stdout


def test_child_counts_equal_profiling_it_alone(tmp_path: Any) -> None:
    script = write(
        tmp_path,
        "parent.py",
        """\
        import subprocess
        import sys

        def leaf(i):
            return i % 3

        def work(n):
            return [leaf(i) for i in range(n)]

        if __name__ == "__main__":
            if sys.argv[1:] == ["child"]:
                for n in range(20):
                    work(n)
                sys.exit(0)
            subprocess.run([sys.executable, __file__, "child"], check=True)
        """,
    )
    run_dir = tmp_path / "run"
    r = fastprof(
        ["run", "--subprocesses", "--run-dir", str(run_dir), "-o", "all.prof", str(script)],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    (child,) = [pid for pid, m in records(run_dir).items() if not m["root"]]
    in_job = load(run_dir / f"{child}.prof")
    r = fastprof(["run", "-o", "alone.prof", str(script), "child"], tmp_path)
    assert r.returncode == 0, r.stderr
    alone = load(tmp_path / "alone.prof")

    def own(stats: Dict[Any, Any]) -> Dict[Any, Any]:
        return {
            k[2]: v[:2]
            for k, v in stats.items()
            if os.path.exists(k[0]) and os.path.samefile(k[0], script)
        }

    assert own(in_job) == own(alone)
    assert own(alone)["leaf"] == (190, 190)
    assert own(alone)["work"] == (20, 20)


# -- how processes end ----------------------------------------------------------------------

ENDINGS = """\
    import os
    import signal
    import sys
    import time

    def leaf():
        return 1

    def fork(n, end):
        pid = os.fork()
        if pid == 0:
            for _ in range(n):
                leaf()
            end()
        return pid

    def sleep_forever():
        time.sleep(60)
        os._exit(0)

    if __name__ == "__main__":
        a = fork(3, lambda: os._exit(0))
        print("os._exit", os.waitpid(a, 0)[1])
        b = fork(5, sleep_forever)
        time.sleep(1.0)
        os.kill(b, signal.SIGTERM)
        st = os.waitpid(b, 0)[1]
        print("sigterm", os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGTERM)
        c = fork(11, sleep_forever)
        time.sleep(1.0)
        os.kill(c, signal.SIGKILL)
        os.waitpid(c, 0)
        print("killed", c)
        d = fork(13, lambda: sys.exit(0))
        print("sys.exit", os.waitpid(d, 0)[1])
"""


def test_os_exit_sigterm_sys_exit_and_killed(tmp_path: Any) -> None:
    script = write(tmp_path, "ends.py", ENDINGS)
    run_dir = tmp_path / "run"
    r = fastprof(
        ["run", "--subprocesses", "--run-dir", str(run_dir), "-o", "all.prof", str(script)],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "os._exit 0"
    assert lines[1] == "sigterm True"  # it still dies of the signal, once its profile is written
    killed = int(lines[2].split()[1])
    assert lines[3] == "sys.exit 0"
    recs = records(run_dir)
    assert not recs[killed]["complete"]
    assert not (run_dir / f"{killed}.prof").exists()
    counts = sorted(
        calls(load(run_dir / f"{pid}.prof"), script, "leaf")
        for pid, m in recs.items()
        if not m["root"] and pid != killed
    )
    assert counts == [3, 5, 13]
    merged = load(tmp_path / "all.prof")
    assert calls(merged, script, "leaf") == 3 + 5 + 13
    # the children's writes at os._exit, SIGTERM and sys.exit (atexit) are not in it: each
    # stops the profile from C before any of fastprof's Python code runs
    ours = [k for k in merged if k[0].endswith(os.path.join("fastprof", "children.py"))]
    assert ours == [], ours
    for k, v in merged.items():
        if "disable" in k[2] or "sigterm" in k[2]:
            assert not v[4], (k, v)  # at most the runner's own disable, called by nothing
    assert "4 process(es), 1 missing" in r.stderr
    assert f"{killed}" in r.stderr and "wrote no profile" in r.stderr


# A SIGTERM that runs the interpreter's C handler without interrupting the main thread's
# blocking call (it lands just before the call, or in another thread): the Python handler that
# writes the profile is then due but never runs, unless fastprof's watchdog nudges the main
# thread (src/profile/exit_watchdog.c).  Here the main thread blocks SIGTERM, so the signal goes
# to a helper thread, which makes the race certain.
BLOCKED_AT_TERM = """\
    import multiprocessing as mp
    import signal
    import sys
    import threading
    import time

    def child(lock, ready):
        threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        ready.set()
        lock.acquire()  # blocks: the parent holds the lock

    if __name__ == "__main__":
        ctx = mp.get_context(sys.argv[1])
        lock = ctx.Lock()
        lock.acquire()
        ready = ctx.Event()
        p = ctx.Process(target=child, args=(lock, ready))
        p.start()
        ready.wait()
        time.sleep(0.5)
        p.terminate()
        p.join(60)
        print(p.pid, "alive" if p.is_alive() else p.exitcode)
        if p.is_alive():
            p.kill()
            p.join()
"""


@pytest.mark.parametrize("method", START_METHODS)
def test_sigterm_that_interrupts_nothing_still_writes_and_ends(tmp_path: Any, method: str) -> None:
    script = write(tmp_path, "blocked.py", BLOCKED_AT_TERM)
    run_dir = tmp_path / "run"
    r = fastprof(
        ["run", "--subprocesses", "--run-dir", str(run_dir), "-o", "all.prof", str(script), method],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    pid, ending = r.stdout.split()
    assert ending == str(-signal.SIGTERM)  # it died of SIGTERM, as without fastprof
    rec = records(run_dir)[int(pid)]
    assert rec["complete"], rec
    assert calls(load(run_dir / f"{pid}.prof"), script, "child") == 1


# A SIGTERM whose Python handler runs while a hook of the profiler is running Python code
# (here a user timer; in a pool worker, a builtin's name being worked out): the profiler cannot
# be disabled there, so the handler must take the signal again once the hook has returned.
TERM_IN_HOOK = """\
import os, signal, sys
from fastprof import children
from fastprof.profile import Profile

ticks = 0

def timer():
    global ticks
    ticks += 1
    if ticks == 40:
        os.kill(os.getpid(), signal.SIGTERM)  # the handler runs in the loop below
        for _ in range(20):
            pass
    return ticks

def leaf():
    return 1

prof = Profile(timer=timer)
children._session = children._Session(sys.argv[1], prof, os.getppid(), root=False)
children._install_hooks()
children._install_sigterm()
prof.enable()
for _ in range(1000):
    leaf()
prof.disable()
print("not ended")
"""


def test_sigterm_inside_a_hook_writes_once_the_hook_returns(tmp_path: Any) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    script = write(tmp_path, "term_in_hook.py", TERM_IN_HOOK)
    r = subprocess.run(
        [sys.executable, str(script), str(run_dir)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert r.returncode == -signal.SIGTERM, (r.stdout, r.stderr)
    assert "could not write" not in r.stderr, r.stderr
    (rec,) = records(run_dir).values()
    assert rec["complete"], rec
    assert 1 <= calls(load(run_dir / f"{rec['pid']}.prof"), script, "leaf") < 1000


# -- merge and view of a run directory ------------------------------------------------------


@pytest.fixture
def run_dir(tmp_path: Any) -> Any:
    script = write(tmp_path, "pool.py", POOL)
    d = tmp_path / "run"
    r = fastprof(
        ["run", "--subprocesses", "--run-dir", str(d), "-o", "x.prof", str(script), "fork"],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    return d


def test_merge_writes_one_pstats_file(tmp_path: Any, run_dir: Any) -> None:
    r = fastprof(["merge", str(run_dir), "-o", "merged.prof"], tmp_path)
    assert r.returncode == 0, r.stderr
    merged = load(tmp_path / "merged.prof")
    assert merged == load(tmp_path / "x.prof")  # what run -o wrote
    assert calls(merged, tmp_path / "pool.py", "leaf") == 100 * calls(
        merged, tmp_path / "pool.py", "work"
    )
    assert "3 process(es)" in r.stderr
    # each process wrote its tree as the core's raw records; merge made one tree of them
    trees = [(run_dir / f"{pid}.tree.marshal").exists() for pid in records(run_dir)]
    assert all(trees)
    assert (tmp_path / "merged.prof.tree.json").exists()


def _fake_process(
    d: Any,
    pid: int,
    ppid: int,
    leaf_calls: int,
    *,
    tree: bool = True,
    rank: Optional[int] = None,
    world_size: Optional[int] = None,
) -> None:
    """Writes the files of one process as fastprof.children writes them."""
    from fastprof.children import FORMAT
    from fastprof.tree import CallTree, Node

    key = ("job.py", 3, "leaf")
    main = ("job.py", 1, "main")
    stats = {
        main: (1, 1, 0.5, 1.0, {}),
        key: (leaf_calls, leaf_calls, 0.5, 0.5, {main: (leaf_calls, leaf_calls, 0.5, 0.5)}),
    }
    name = str(pid) if rank is None else f"rank{rank}-{pid}"
    (d / f"{name}.prof").write_bytes(marshal.dumps(stats))
    if tree:
        root = Node(None, 0, 0.0, 1.0)
        m = Node(main, 1, 0.5, 1.0, root)
        root.children.append(m)
        m.children.append(Node(key, leaf_calls, 0.5, 0.5, m))
        CallTree({1: root}).save(str(d / f"{name}.prof.tree.json"))
    meta = {
        "format": FORMAT,
        "pid": pid,
        "ppid": ppid,
        "root": ppid == 1,
        "argv": ["job.py"],
        "rank": rank,
        "world_size": world_size,
        "start": 0.0,
        "end": 2.0,
        "wall": 2.0,
        "complete": True,
    }
    (d / f"{name}.json").write_text(json.dumps(meta))


def test_per_rank_table_shows_the_spread_and_missing_ranks(tmp_path: Any) -> None:
    from fastprof.merge import format_processes, read_run

    # the same pid on two nodes: both kept, named by rank
    _fake_process(tmp_path, 100, 1, 4, rank=0, world_size=3)
    _fake_process(tmp_path, 100, 1, 6, rank=1, world_size=3)
    run = read_run(str(tmp_path))
    assert len(run.procs) == 2 and len(run.tree.threads) == 2
    assert run.stats.to_dict()[("job.py", 3, "leaf")][:2] == (10, 10)
    assert run.missing_ranks == [2]
    text = format_processes(run)
    assert "per rank: 2 rank(s) with profiles; no profile from rank(s) 2" in text
    (own,) = [ln.split() for ln in text.splitlines() if ln.split()[:1] == ["own"]]
    assert own == ["own", "1.000", "1.000", "1.00"]  # 0.5 + 0.5 s on each rank: even
    (leaf,) = [ln.split() for ln in text.splitlines() if ln.startswith("job.py:3(leaf)")]
    assert leaf == ["job.py:3(leaf)", "0.500", "0.500", "0.500", "0.500", "1.00", "0"]


def test_a_rank_that_wrote_nothing_is_named_and_an_empty_profile_keeps_the_tree(
    tmp_path: Any,
) -> None:
    """Rank 1 started (its record) but wrote no profile: it is a missing rank, named with its
    rank; a process SIGTERMed as it began wrote an empty profile and no tree, which the
    job's tree does not lack."""
    from fastprof.children import FORMAT
    from fastprof.merge import format_processes, read_run

    _fake_process(tmp_path, 100, 1, 4, rank=0, world_size=2)
    meta = {"format": FORMAT, "pid": 200, "ppid": 1, "root": True, "argv": ["job.py"]}
    meta.update(rank=1, world_size=2, start=0.0, complete=False)
    (tmp_path / "rank1-200.json").write_text(json.dumps(meta))
    meta = dict(meta, pid=300, ppid=100, root=False, rank=0, complete=True, end=1.0, wall=1.0)
    (tmp_path / "rank0-300.json").write_text(json.dumps(meta))
    (tmp_path / "rank0-300.prof").write_bytes(marshal.dumps({}))
    run = read_run(str(tmp_path))
    assert run.missing_ranks == [1] and run.tree_left_out == []
    assert run.tree is not None and len(run.tree.threads) == 1
    text = format_processes(run)
    assert "no profile from rank(s) 1" in text
    (row,) = [ln.split() for ln in text.splitlines() if "missing:" in ln]
    assert row[:4] == ["200", "1", "1", "missing:"]
    out = tmp_path / "all.prof"
    from fastprof.merge import write_merged

    write_merged(run, str(out))
    assert (tmp_path / "all.prof.tree.json").exists()


def test_read_run_sums_functions_and_trees(tmp_path: Any) -> None:
    from fastprof.merge import format_processes, read_run

    _fake_process(tmp_path, 100, 1, 4)
    _fake_process(tmp_path, 101, 100, 6)
    run = read_run(str(tmp_path))
    assert run.stats.to_dict()[("job.py", 3, "leaf")][:2] == (10, 10)
    assert sorted(run.tree.threads) == [100, 101]  # one root per process
    merged = run.tree.merged_threads()
    (m,) = merged.children
    assert (m.key, m.ncalls) == (("job.py", 1, "main"), 2)
    assert [(c.key[2], c.ncalls) for c in m.children] == [("leaf", 10)]
    table = format_processes(run)
    assert "2 process(es)" in table
    assert [ln.split()[:2] for ln in table.splitlines() if ln.split()[:1] == ["101"]] == [
        ["101", "100"]
    ]
    # a process without a tree file: the tree keeps the others and names the one left out
    _fake_process(tmp_path, 102, 100, 1, tree=False)
    run = read_run(str(tmp_path))
    assert sorted(run.tree.threads) == [100, 101] and run.tree_left_out == [102]


def test_view_dir_shows_merged_and_per_process(tmp_path: Any, run_dir: Any) -> None:
    r = fastprof(["view", str(run_dir), "-s", "calls", "--all"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "(3 processes)" in r.stdout
    merged = load(tmp_path / "x.prof")
    row = [ln for ln in r.stdout.splitlines() if ln.endswith("pool.py:5(leaf)")]
    assert row and int(row[0].split()[0]) == calls(merged, tmp_path / "pool.py", "leaf")
    assert "3 process(es)" in r.stdout
    for pid in records(run_dir):
        assert str(pid) in r.stdout
    # the tree view, every path shown (the workers' start-up can take most of a short run)
    r = fastprof(["view", str(run_dir), "--color", "never", "--min-percent", "0"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "work" in r.stdout


def test_truncated_and_other_version_files_are_named_and_the_rest_merges(
    tmp_path: Any, run_dir: Any
) -> None:
    recs = records(run_dir)
    workers = sorted(pid for pid, m in recs.items() if not m["root"])
    bad_prof = run_dir / f"{workers[0]}.prof"
    bad_prof.write_bytes(bad_prof.read_bytes()[:50])
    meta = recs[workers[1]]
    meta["format"] = 999
    (run_dir / f"{workers[1]}.json").write_text(json.dumps(meta))
    r = fastprof(["merge", str(run_dir), "-o", "merged.prof"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count(f"{workers[0]}.prof") == 1  # named once, not once per layer
    assert f"{workers[1]}.json" in r.stderr and "another version" in r.stderr
    assert "1 process(es)" in r.stderr and "2 unreadable" in r.stderr
    merged = load(tmp_path / "merged.prof")
    root = [pid for pid, m in recs.items() if m["root"]][0]
    assert merged == load(run_dir / f"{root}.prof")


def test_merge_errors(tmp_path: Any) -> None:
    r = fastprof(["merge", str(tmp_path / "nope"), "-o", "m.prof"], tmp_path)
    assert r.returncode == 2 and "not a directory" in r.stderr
    (tmp_path / "empty").mkdir()
    r = fastprof(["merge", str(tmp_path / "empty"), "-o", "m.prof"], tmp_path)
    assert r.returncode == 2 and "no process profiles" in r.stderr
    r = fastprof(["view", str(tmp_path / "empty")], tmp_path)
    assert r.returncode == 2 and "no process profiles" in r.stderr


# -- options, the environment, a user's own sitecustomize -----------------------------------


def test_run_dir_alone_and_an_unused_folder(tmp_path: Any, run_dir: Any) -> None:
    script = write(tmp_path, "s.py", "def f():\n    return 1\n\nf()\nprint('ran')\n")
    # --run-dir without --subprocesses: this process's profile alone goes to the folder
    r = fastprof(["run", "--run-dir", "d", "-o", "a.prof", str(script)], tmp_path)
    assert r.returncode == 0, r.stderr
    (rec,) = records(tmp_path / "d").values()
    assert rec["root"] and rec["complete"]
    assert calls(load(tmp_path / "d" / f"{rec['pid']}.prof"), script, "f") == 1
    assert load(tmp_path / "a.prof") == load(tmp_path / "d" / f"{rec['pid']}.prof")
    r = fastprof(["run", "--subprocesses", "--run-dir", str(run_dir), str(script)], tmp_path)
    assert r.returncode == 2 and "earlier run" in r.stderr and "ran" not in r.stdout


def test_users_sitecustomize_still_runs_in_children(tmp_path: Any) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import builtins\nbuiltins.USER_SITE = 42\n")
    script = write(
        tmp_path,
        "s.py",
        """\
        import subprocess
        import sys

        def leaf():
            return 1

        if __name__ == "__main__":
            if sys.argv[1:] == ["child"]:
                leaf()
                import sitecustomize
                print(USER_SITE, sitecustomize.__file__.endswith("site/sitecustomize.py"))
                sys.exit(0)
            subprocess.run([sys.executable, __file__, "child"], check=True)
        """,
    )
    run_dir = tmp_path / "run"
    r = fastprof(
        ["run", "--subprocesses", "--run-dir", str(run_dir), "-o", "a.prof", str(script)],
        tmp_path,
        extra_path=str(site),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "42 True\n"
    assert calls(load(tmp_path / "a.prof"), script, "leaf") == 1


def test_in_process_run_leaves_nothing_behind(tmp_path: Any, monkeypatch: Any, capsys: Any) -> None:
    import tempfile

    from fastprof import children, cli

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    script = write(tmp_path, "s.py", "def f():\n    return 1\nf()\n")
    before_env = dict(os.environ)
    real_exit = os._exit
    assert cli.main(["run", "--subprocesses", "-o", str(tmp_path / "a.prof"), str(script)]) == 0
    assert dict(os.environ) == before_env
    assert os._exit is real_exit
    assert children._session is None
    assert sys.getprofile() is None
    assert calls(load(tmp_path / "a.prof"), script, "f") == 1
    assert os.listdir(tmp) == []  # the temporary run and bootstrap folders are gone


@pytest.mark.parametrize(
    "argv, kind",
    [
        (
            ["python", "-c", "from multiprocessing.resource_tracker import main;main(5)"],
            "resource_tracker",
        ),
        (
            [
                "python",
                "-B",
                "-c",
                "from joblib.externals.loky.backend.resource_tracker import main; main(7, False)",
            ],
            "resource_tracker",
        ),
        (["python", "-c", "from multiprocessing.forkserver import main; main(3, 4)"], "forkserver"),
        (["python", "work.py"], None),
    ],
)
def test_multiprocessing_machinery_is_known_by_its_command_line(
    monkeypatch: Any, argv: List[str], kind: Optional[str]
) -> None:
    # a resource tracker (multiprocessing's, or joblib loky's copy) runs no user code: its
    # profile would be noise in the job's
    from fastprof import children

    monkeypatch.setattr(children, "_command_line", lambda: argv)
    assert children._machinery() == kind


def test_a_childs_profile_holds_no_frame_of_the_bootstrap(tmp_path: Any) -> None:
    # the bootstrap's file lies in a new temporary folder each run: a frame of it would show
    # as a new row in every diff of two runs
    script = write(
        tmp_path,
        "child.py",
        """\
        import subprocess, sys
        subprocess.run([sys.executable, "-c", "print(sum(range(10)))"], check=True)
        """,
    )
    r = fastprof(["run", "--subprocesses", "-o", "all.prof", str(script)], tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "45\n"
    merged = load(tmp_path / "all.prof")
    boot = [k for k in merged if "sitecustomize" in k[0] or k[2].startswith("_fastprof_")]
    assert boot == [], boot
    assert "2 process(es)" in r.stderr
