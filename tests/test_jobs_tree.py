"""A job's call trees as the run directory holds them (fastprof._proc_tree): each process sums
its tree over its threads and writes it as records whose numbers are JSON text already; the
runner joins them into the merged tree file without building the tree.  The tests compare
that path with the plain one (CallTree.from_raw, merged_threads, save) exactly, check that a
file from anyone is checked before its text reaches a tree file, and that the runner reads
its own private run directory with marshal while any other folder gets the safe reader."""

from __future__ import annotations

import json
import marshal
import os
import stat
import threading
from typing import Any, Dict, List, Tuple

import pytest

from fastprof import _proc_tree, merge
from fastprof._runstats import own_tree
from fastprof.children import FORMAT, TREE_SUFFIX, _tree_records
from fastprof.tree import CallTree

A = ("a.py", 1, "a")
B = ("a.py", 5, "b")
C = ("~", 0, "<built-in method builtins.len>")

# the core's records: (parent, func, thread, ncalls, total ticks, own ticks); funcs 1 and 3
# share key B (two code objects with one key: merged by key, as merged_threads does), and the
# threads' records interleave
KEYS = [A, B, C, B]
NODES = [
    (-1, 0, 0, 1, 100, 10),  # 0: thread 0: a
    (0, 1, 0, 2, 50, 20),  # 1:   a > b
    (-1, 0, 1, 3, 70, 7),  # 2: thread 1: a
    (1, 2, 0, 5, 9, 9),  # 3:   a > b > len
    (0, 3, 0, 1, 11, 11),  # 4:   a > b (func 3, the same key)
    (2, 2, 1, 4, 8, 8),  # 5: thread 1: a > len (a path thread 0 does not have)
    (2, 1, 1, 1, 30, 30),  # 6: thread 1: a > b
    (4, 2, 0, 1, 1, 1),  # 7:   a > b (func 3) > len
]
SPT = 0.25  # seconds per tick: sums stay exact in binary


def plain(keys: List[Any], nodes: List[Any], nthreads: int, ident: int = 7) -> Dict[str, Any]:
    tree = CallTree.from_raw(SPT, keys, nodes, list(range(100, 100 + nthreads)))
    return CallTree({ident: tree.merged_threads()}, processes=True).to_dict()


def fast(keys: List[Any], nodes: List[Any], nthreads: int, ident: int = 7) -> Dict[str, Any]:
    one = _proc_tree.decode(_proc_tree.encode(SPT, keys, nodes, nthreads), check=True)
    text = _proc_tree.tree_json([(ident, one)])
    via_text = CallTree.from_dict(json.loads(text)).to_dict()
    assert _proc_tree.to_call_tree([(ident, one)]).to_dict() == via_text
    return via_text


def test_records_sum_threads_as_merged_threads_does() -> None:
    got = fast(KEYS, NODES, 2)
    assert got == plain(KEYS, NODES, 2)
    (thread,) = got["threads"]
    by_path = {}
    for i, (parent, kid, n, own, total) in enumerate(thread["nodes"]):
        path = (by_path[parent] if parent >= 0 else ()) + (got["keys"][kid][2],)
        by_path[i] = path
        if path == ("a", "b"):  # thread 0's two b's and thread 1's b, in one node
            assert (n, own, total) == (4, (20 + 11 + 30) * SPT, (50 + 11 + 30) * SPT)


def test_records_of_a_real_profile_with_threads() -> None:
    import fastprof
    from fastprof.keys import label

    def leaf(i: int) -> int:
        return i + 1

    def work(n: int) -> int:
        return sum(leaf(i) for i in range(n))

    prof = fastprof.Profile()
    prof.enable()
    ts = [threading.Thread(target=work, args=(50 + i,)) for i in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    work(7)
    prof.disable()
    tspt, nodes, threads, merged = prof._raw_tree()
    keys = [label(f[0]) for f in prof._raw()[1]]
    tree = CallTree.from_raw(tspt, keys, nodes, threads, merged)
    own_tree(tree)  # the child's records leave out the call of disable that ended them
    want = CallTree({1: tree.merged_threads()}, processes=True).to_dict()
    data = marshal.loads(marshal.dumps(_tree_records(prof)))  # as the child writes it
    one = _proc_tree.decode(data, check=True)
    got = CallTree.from_dict(json.loads(_proc_tree.tree_json([(1, one)]))).to_dict()
    assert got == want
    leaves = [r for r in got["threads"][0]["nodes"] if got["keys"][r[1]][2] == "leaf"]
    assert sum(r[2] for r in leaves) == 50 + 51 + 52 + 7


def test_an_empty_tree_and_one_node() -> None:
    assert fast([A], [], 1)["threads"][0]["nodes"] == []
    assert fast([A], [(-1, 0, 0, 1, 4, 4)], 1) == plain([A], [(-1, 0, 0, 1, 4, 4)], 1)


def _with(data: Tuple[Any, ...], i: int, value: Any) -> Tuple[Any, ...]:
    out = list(data)
    out[i] = value
    return tuple(out)


@pytest.mark.parametrize(
    "i, value",
    [
        (5, '[-1,%s,1,2.5,25.0],[0,%s,2,5.0,12.5]]}],"keys":[["x",1,"y"]'),  # text injected
        (5, "[-1,%s,1,2.5,25.0],[0,%s,2,5.0,1e999x]"),
        (5, "[-1,%s,1,2.5,25.0],[1,%s,2,5.0,12.5]"),  # disagrees with the parents
        (5, "[-1,%s,1,2.5,25.0]"),  # one record short
        (3, _proc_tree._int64_bytes([-1, 1])),  # a node its own parent
        (4, _proc_tree._int64_bytes([0, 9])),  # an unknown function
        (2, [("a.py", "1", "a"), B]),  # a malformed key
        (1, 99),  # another version
    ],
)
def test_a_file_from_anyone_is_checked(i: int, value: Any) -> None:
    good = _proc_tree.encode(SPT, [A, B], [(-1, 0, 0, 1, 100, 10), (0, 1, 0, 2, 50, 20)], 1)
    assert _proc_tree.decode(good, check=True).template == "[-1,%s,1,2.5,25],[0,%s,2,5,12.5]"
    with pytest.raises(ValueError):
        _proc_tree.decode(_with(good, i, value), check=True)


def _job_dir(tmp_path: Any, mode: int) -> Any:
    """A run directory of two processes (as their children write them) with the given mode."""
    d = tmp_path / "run"
    d.mkdir()
    for pid, ppid, leaf in ((100, 1, 4), (101, 100, 6)):
        stats = {
            A: (1, 1, 0.5, 1.0, {}),
            B: (leaf, leaf, 0.5, 0.5, {A: (leaf, leaf, 0.5, 0.5)}),
        }
        (d / f"{pid}.prof").write_bytes(marshal.dumps(stats))
        nodes = [(-1, 0, 0, 1, 4, 2), (0, 1, 0, leaf, 2, 2)]
        (d / f"{pid}{TREE_SUFFIX}").write_bytes(
            marshal.dumps(_proc_tree.encode(SPT, [A, B], nodes, 1))
        )
        meta = {"format": FORMAT, "pid": pid, "ppid": ppid, "root": ppid == 1, "argv": ["x"]}
        meta.update(rank=None, world_size=None, start=0.0, end=1.0, wall=1.0, complete=True)
        (d / f"{pid}.json").write_text(json.dumps(meta))
    os.chmod(d, mode)
    return d


@pytest.mark.parametrize("mode", [0o700, 0o755, 0o775, 0o777])
@pytest.mark.parametrize("trusted", [True, False])
def test_marshal_reads_only_the_runners_own_private_folder(
    tmp_path: Any, monkeypatch: Any, mode: int, trusted: bool
) -> None:
    from fastprof import _marshal_reader

    d = _job_dir(tmp_path, mode)
    safe: List[int] = []
    real = _marshal_reader.loads

    def counted(data: bytes, **kw: Any) -> Any:
        safe.append(1)
        return real(data, **kw)

    monkeypatch.setattr(_marshal_reader, "loads", counted)
    run = merge.read_run(str(d), trusted=trusted)
    private = not mode & (stat.S_IWGRP | stat.S_IWOTH)
    assert merge.is_private_dir(str(d)) == private
    assert (len(safe) == 0) == (trusted and private)  # else every .prof and tree file: 4
    assert len(safe) in (0, 4)
    assert run.problems == []
    assert run.stats.to_dict()[B][:2] == (10, 10)
    os.chmod(d, 0o700)


def test_write_merged_joins_the_records_without_building_the_tree(tmp_path: Any) -> None:
    d = _job_dir(tmp_path, 0o700)
    run = merge.read_run(str(d), trusted=True)
    out = str(tmp_path / "m.prof")
    merge.write_merged(run, out)
    assert run._tree is None  # the file was joined from the records
    saved = CallTree.load(out + ".tree.json")
    assert saved.to_dict() == run.tree.to_dict()  # the same tree a view builds
    assert sorted(saved.threads) == [100, 101]
    (m,) = saved.merged_threads().children
    assert (m.key, m.ncalls, [(c.key, c.ncalls) for c in m.children]) == (A, 2, [(B, 10)])


def test_a_hostile_tree_file_never_reaches_the_merged_tree(tmp_path: Any) -> None:
    d = _job_dir(tmp_path, 0o755)
    evil = _proc_tree.encode(SPT, [A, B], [(-1, 0, 0, 1, 4, 2), (0, 1, 0, 1, 2, 2)], 1)
    evil = _with(evil, 5, '[-1,%s,1,0.5,1.0],[0,%s,1,0.5,0.5]]}],"injected":[{"x":[')
    (d / f"101{TREE_SUFFIX}").write_bytes(marshal.dumps(evil))
    os.chmod(d, 0o777)  # not private: read as anyone's
    run = merge.read_run(str(d), trusted=True)
    os.chmod(d, 0o700)
    assert any("101.tree.marshal" in p and "malformed node numbers" in p for p in run.problems)
    # the other process's tree is kept, and the one left out is named
    assert run.tree_left_out == [101] and sorted(run.tree.threads) == [100]
    assert run.stats.to_dict()[B][:2] == (10, 10)  # the flat profile has both processes
    assert "the call tree leaves out process(es) 101" in merge.format_processes(run)
    out = str(tmp_path / "m.prof")
    open(out + ".tree.json", "w").write("stale")
    merge.write_merged(run, out)  # a tree of fewer processes is not the merged profile's
    assert not os.path.exists(out + ".tree.json")


def test_the_call_tree_keeps_the_processes_that_left_one(tmp_path: Any) -> None:
    """One process's tree file truncated or gone: view DIR still shows the others' trees,
    says which process the tree leaves out, and exports of the tree still work; with no tree
    at all, the export's error says why for a run directory."""
    from test_jobs import fastprof

    d = _job_dir(tmp_path, 0o700)
    blob = (d / f"101{TREE_SUFFIX}").read_bytes()
    (d / f"101{TREE_SUFFIX}").write_bytes(blob[: len(blob) // 2])
    r = fastprof(["view", str(d)], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "(2 processes; the call tree leaves out 101)" in r.stdout
    assert "(1 process)" in r.stdout and "call tree" in r.stdout  # the tree of process 100
    assert "101.tree.marshal: not a fastprof call tree" in r.stdout
    assert "the call tree leaves out process(es) 101" in r.stdout
    r = fastprof(["view", str(d), "--format", "speedscope", "-o", "s.json"], tmp_path)
    assert r.returncode == 0, r.stderr
    profiles = json.loads((tmp_path / "s.json").read_text())["profiles"]
    assert len(profiles) == 1 and "100" in profiles[0]["name"]
    r = fastprof(["merge", str(d), "-o", "m.prof"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "without its call tree" in r.stderr
    assert not (tmp_path / "m.prof.tree.json").exists()
    (d / f"101{TREE_SUFFIX}").unlink()
    (d / f"100{TREE_SUFFIX}").unlink()
    r = fastprof(["view", str(d), "--format", "collapsed", "-o", "c.txt"], tmp_path)
    assert r.returncode == 2
    assert "no process left a readable PID.tree.marshal" in r.stderr, r.stderr
    assert "FILE.tree.json" not in r.stderr


def test_raw_tree_files_of_earlier_versions_still_read(tmp_path: Any) -> None:
    """Run directories written before the records were summed in the processes: the core's
    raw records (nodes as little-endian int64 bytes) read as before."""
    import struct

    d = _job_dir(tmp_path, 0o700)
    blob = b"".join(struct.pack("<6q", *n) for n in NODES)
    raw = (SPT, KEYS, blob, [100, 101], 0, None)
    (d / f"100{TREE_SUFFIX}").write_bytes(marshal.dumps(raw))
    for pid in (100, 101):  # the records of those versions said format 2
        meta = json.loads((d / f"{pid}.json").read_text())
        (d / f"{pid}.json").write_text(json.dumps({**meta, "format": 2}))
    for trusted in (True, False):
        run = merge.read_run(str(d), trusted=trusted)
        assert run.problems == []
        want = plain(KEYS, NODES, 2, ident=100)["threads"][0]["nodes"]
        got = run.tree.to_dict()
        assert len(got["threads"][0]["nodes"]) == len(want)
        assert run.tree.threads[100].children[0].ncalls == 4  # thread 0's a and thread 1's


BOOT_CACHE = """\
import subprocess, sys
import fastprof
from fastprof import children

children.follow({run!r}, fastprof.Profile(), {boot!r})
r = subprocess.run([sys.executable, "-B", "-v", "-c", "pass"], capture_output=True, text=True)
print("\\n".join(ln for ln in r.stderr.splitlines() if "code object from" in ln))
"""


def test_new_interpreters_read_the_bootstraps_bytecode_cache(tmp_path: Any) -> None:
    """The runner compiles the bootstrap once; each new interpreter of the job (spawn workers
    are started with -B when the runner was) reads the cache instead of compiling it."""
    import subprocess
    import sys

    from test_jobs import _env

    run, boot = tmp_path / "run", tmp_path / "boot"
    run.mkdir()
    code = BOOT_CACHE.format(run=str(run), boot=str(boot))
    r = subprocess.run(
        [sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    loaded = [ln for ln in r.stdout.splitlines() if "sitecustomize" in ln]
    assert len(loaded) == 1 and str(boot / "__pycache__") in loaded[0], r.stdout


@pytest.mark.parametrize("enabled", [True, False])
def test_a_write_leaves_the_collector_as_it_was(tmp_path: Any, enabled: bool) -> None:
    import gc

    import fastprof
    from fastprof import children

    prof = fastprof.Profile()
    prof.enable()
    sorted(range(3))
    s = children._Session(str(tmp_path), prof, 1, root=True)
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        assert children.write_now(s)
        assert gc.isenabled() == enabled
    finally:
        (gc.enable if was else gc.disable)()
    run = merge.read_run(str(tmp_path), trusted=True)
    assert run.tree is not None and run.problems == []


@pytest.mark.parametrize("skip", [False, True])
@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_no_worker_startup_leaves_out_a_spawn_workers_start_only(
    tmp_path: Any, skip: bool, method: str
) -> None:
    """--no-worker-startup: a spawn worker's profile starts at its process's bootstrap, so
    multiprocessing's spawn_main and the script's re-import as __mp_main__ are left out, and
    every count from there on is exact; a fork worker (its profile starts at fork) and the
    runner are as without it."""
    from test_jobs import POOL, calls, fastprof, load, records, write

    script = write(tmp_path, "pool.py", POOL)
    run_dir = tmp_path / "run"
    flag = ["--no-worker-startup"] if skip else []
    r = fastprof(
        ["run", "--subprocesses", *flag, "--run-dir", str(run_dir), "-o", "all.prof"]
        + [str(script), method],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    tasks = int(r.stdout)
    merged = load(tmp_path / "all.prof")
    assert calls(merged, script, "leaf") == 100 * tasks
    assert calls(merged, script, "work") == tasks
    recs = records(run_dir)
    workers = [pid for pid, m in recs.items() if not m["root"]]
    assert len(workers) == 2 and all(m["complete"] for m in recs.values()), recs
    for pid in workers:
        own = load(run_dir / f"{pid}.prof")
        names = {k[2] for k in own}
        assert ("spawn_main" in names) == (method == "spawn" and not skip), sorted(names)
        # the script's module code ran in a spawn worker as __mp_main__
        assert (calls(own, script, "<module>") == 1) == (method == "spawn" and not skip)
        assert calls(own, script, "leaf") == 100 * calls(own, script, "work")
    runner = [pid for pid, m in recs.items() if m["root"]]
    assert calls(load(run_dir / f"{runner[0]}.prof"), script, "<module>") == 1


def test_no_worker_startup_needs_subprocesses(tmp_path: Any) -> None:
    from test_jobs import fastprof, write

    script = write(tmp_path, "x.py", "pass\n")
    r = fastprof(["run", "--no-worker-startup", str(script)], tmp_path)
    assert r.returncode == 2 and "--no-worker-startup needs --subprocesses" in r.stderr


def test_a_jobs_views_name_its_roots_processes_and_a_profiles_threads(tmp_path: Any) -> None:
    from fastprof.report.collapsed import collapsed_lines
    from fastprof.report.speedscope import to_speedscope
    from fastprof.report.tree_text import format_tree_report

    d = _job_dir(tmp_path, 0o700)
    run = merge.read_run(str(d), trusted=True)
    out = str(tmp_path / "m.prof")
    merge.write_merged(run, out)
    for tree in (run.tree, CallTree.load(out + ".tree.json")):  # built, and read back
        assert tree.processes
        text = format_tree_report(tree)
        assert "(2 processes)" in text and "process 1 (pid 100)" in text, text
        assert "process 2 (pid 101)" in text and "thread" not in text, text
        merged = format_tree_report(tree, threads="merged")
        assert "all processes, summed by path" in merged, merged
        names = [p["name"] for p in to_speedscope(tree)["profiles"]]
        assert names == ["process 1 (pid 100)", "process 2 (pid 101)"]
        firsts = {line.split(";")[0] for line in collapsed_lines(tree, merge_threads=False)}
        assert firsts == {"process 100", "process 101"}
    # one process's own tree keeps its threads, in the file and in the view
    one = CallTree.from_dict(json.loads(json.dumps(CallTree(dict(run.tree.threads)).to_dict())))
    assert not one.processes and "roots" not in one.to_dict()
    text = format_tree_report(one)
    assert "(2 threads)" in text and "thread 1 (id 100)" in text, text


def test_a_tree_file_with_unknown_roots_is_refused() -> None:
    data = CallTree({}, processes=True).to_dict()
    assert data["roots"] == "processes"
    data["roots"] = "ranks"
    with pytest.raises(ValueError, match="roots 'ranks'"):
        CallTree.from_dict(data)


def _run_job(script: Any) -> Tuple[Any, Dict[Any, Any]]:
    """Runs ``fastprof run --subprocesses -o all.prof script`` beside it; returns the finished
    process and the merged pstats dictionary."""
    import pstats
    import subprocess
    import sys

    out = script.parent / "all.prof"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    cmd = [sys.executable, "-m", "fastprof", "run", "--subprocesses", "-o", str(out)]
    proc = subprocess.run(cmd + [str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc, pstats.Stats(str(out)).stats  # type: ignore[attr-defined]


def test_a_childs_write_leaves_its_own_calls_out_of_the_profile(tmp_path: Any) -> None:
    script = tmp_path / "job.py"
    script.write_text(
        "import os\n"
        "def work(n):\n"
        "    return sum(range(n))\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    work(10)\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
    )
    proc, stats = _run_job(script)
    names = {k[2] for k in stats}
    assert "work" in names
    for inside_the_write in ("_guard_write", "_write_meta", "_atomic_write", "own_stats"):
        assert inside_the_write not in names, sorted(names)
    assert not any("alarm" in n or "getsignal" in n for n in names), sorted(names)


def test_a_childs_os_exit_shows_as_the_builtin_it_called(tmp_path: Any) -> None:
    """The child's profile ends in its own call of os._exit, as cProfile would show it: no
    wrapper, write function or ``disable`` call of fastprof's (they showed before the gate)."""
    script = tmp_path / "job.py"
    script.write_text(
        "import os\n"
        "def work(n):\n"
        "    return sum(range(n))\n"
        "def leave():\n"
        "    work(10)\n"
        "    os._exit(0)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    leave()\n"
        "os.waitpid(pid, 0)\n"
        "print('status', os.waitpid(os.fork() or os._exit(3), 0)[1] >> 8)\n"
    )
    proc, stats = _run_job(script)
    assert "status 3" in proc.stdout  # the status reaches the parent through the gate
    names = {k[2] for k in stats}
    for ours in ("_exit_wrapper", "_before_exit", "write_now"):
        assert ours not in names, sorted(names)
    assert not any("disable" in n or "getpid" in n for n in names), sorted(names)
    exit_key = ("~", 0, "<built-in method posix._exit>")
    cc, nc, tt, ct, callers = stats[exit_key]
    assert nc == 2  # leave()'s, and the second child's at module level
    # the second child's profile starts inside os.fork, below its module frame: a call from
    # that frame has no recorded caller, as under a profile enabled there by cProfile
    assert {k[2] for k in callers} == {"leave"}
