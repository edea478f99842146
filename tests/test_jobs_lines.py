"""Line timing across a job's processes: `fastprof run --subprocesses --lines-of F` (and
`--lines` with @profile, kernprof-style) times F's lines in every process that runs it, each
process writes PID.lprof beside PID.prof, and `merge DIR`, `view DIR` and the report sum the
line timings over the processes with a note saying which processes ran each function.

Also: what a child's start and its write at exit import (cheap: no json, no report code,
no line profiler unless lines are on), and the files that carry its records.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, Dict, List, Tuple

import pytest

from test_jobs import fastprof, records, write  # noqa: E402  (tests/ is on sys.path)

START_METHODS = ["fork", "spawn", "forkserver"]

POOL = """\
    import multiprocessing as mp
    import os
    import sys

    def leaf(i):
        return i * 2

    def work(n):
        total = 0
        for i in range(n):
            total += leaf(i)
        return os.getpid()

    if __name__ == "__main__":
        ctx = mp.get_context(sys.argv[1])
        with ctx.Pool(2) as pool:
            seen, tasks = set(), 0
            while len(seen) < 2 and tasks < 4000:  # until both workers have run tasks
                seen.update(pool.map(work, [100] * 4, chunksize=1))
                tasks += 4
            print(tasks)
"""
# the lines of work() in POOL, by their number in the file
WORK_FIRST = 8  # def work(n):
TOTAL_LINE, FOR_LINE, BODY_LINE, RETURN_LINE = 9, 10, 11, 12


def line_hits(stats: Any, script: Any, name: str) -> Dict[int, int]:
    """{line: hits} of function name of script in a LineStats."""
    out: Dict[int, int] = {}
    for (filename, _first, func), rows in stats.timings.items():
        if func == name and os.path.samefile(filename, script):
            for lineno, hits, _time in rows:
                out[lineno] = out.get(lineno, 0) + hits
    return out


def workers(run_dir: Any) -> Tuple[int, List[int]]:
    recs = records(run_dir)
    root = [pid for pid, m in recs.items() if m["root"]]
    assert len(root) == 1, recs
    return root[0], sorted(pid for pid, m in recs.items() if not m["root"])


@pytest.mark.parametrize("method", START_METHODS)
@pytest.mark.parametrize("spec", ["script", "__main__"])
def test_lines_of_in_pool_workers_exact_hits(tmp_path: Any, method: str, spec: str) -> None:
    from fastprof.lines import load_stats

    script = write(tmp_path, "pool.py", POOL)
    run_dir = tmp_path / "run"
    where = str(script) if spec == "script" else "__main__"
    r = fastprof(
        [
            "run",
            "--subprocesses",
            "--run-dir",
            str(run_dir),
            "--lines-of",
            f"{where}:work",
            "-o",
            "all.lprof",
            str(script),
            method,
        ],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    tasks = int(r.stdout)
    root, pids = workers(run_dir)
    assert len(pids) == 2
    # each worker wrote its line timings beside its call profile, and timed work's lines
    per = {pid: load_stats(run_dir / f"{pid}.lprof") for pid in pids}
    for pid in pids:
        assert (run_dir / f"{pid}.prof").exists()
        assert line_hits(per[pid], script, "work")[RETURN_LINE] > 0
    merged = load_stats(tmp_path / "all.lprof")  # summed over the processes
    hits = line_hits(merged, script, "work")
    assert hits[TOTAL_LINE] == tasks and hits[RETURN_LINE] == tasks
    assert hits[BODY_LINE] == 100 * tasks
    assert hits[FOR_LINE] == 101 * tasks
    assert sum(line_hits(per[p], script, "work")[BODY_LINE] for p in pids) == 100 * tasks
    # one table for work, with a note naming the processes that ran it
    assert "pool.py:8(work): ran in 2 process(es)" in r.stderr
    for pid in pids:
        assert f"{pid} (" in r.stderr
    assert "3 process(es)" in r.stderr


@pytest.mark.parametrize("method", START_METHODS)
def test_kernprof_decorator_in_pool_workers(tmp_path: Any, method: str) -> None:
    from fastprof.lines import load_stats

    marked = POOL.replace("    def work(n):\n", "    @profile\n    def work(n):\n")
    script = write(tmp_path, "pool.py", marked)
    run_dir = tmp_path / "run"
    r = fastprof(
        ["run", "--subprocesses", "--lines", "--run-dir", str(run_dir), str(script), method],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    tasks = int(r.stdout.splitlines()[0])
    root, pids = workers(run_dir)
    hits: Dict[int, int] = {}
    for pid in [root, *pids]:
        for line, n in line_hits(load_stats(run_dir / f"{pid}.lprof"), script, "work").items():
            hits[line] = hits.get(line, 0) + n
    # the decorator line comes first: work's lines are one further down
    assert hits[BODY_LINE + 1] == 100 * tasks and hits[RETURN_LINE + 1] == tasks


def test_kernprof_decorator_in_executor_workers(tmp_path: Any) -> None:
    from fastprof.lines import load_stats

    script = write(
        tmp_path,
        "job.py",
        """\
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        @profile
        def work(n):
            total = 0
            for i in range(n):
                total += i
            return total

        if __name__ == "__main__":
            with ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as ex:
                print(sum(ex.map(work, [10] * 6)))
        """,
    )
    run_dir = tmp_path / "run"
    r = fastprof(
        ["run", "--subprocesses", "--lines", "--run-dir", str(run_dir), str(script)], tmp_path
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("270\n")
    root, pids = workers(run_dir)
    stats = [load_stats(run_dir / f"{pid}.lprof") for pid in [root, *pids]]
    hits: Dict[int, int] = {}
    for st in stats:
        for line, n in line_hits(st, script, "work").items():
            hits[line] = hits.get(line, 0) + n
    assert hits[6] == 6 and hits[8] == 60 and hits[9] == 6  # total = 0, the body, return
    assert hits[7] == 66
    # the printed table is kernprof's, of the sums, then the notes and the process table
    assert "Function: work at line 4" in r.stdout
    body = [ln.split() for ln in r.stdout.splitlines() if ln.strip().endswith("total += i")]
    assert body and body[0][:2] == ["8", "60"]
    assert "job.py:4(work): ran in" in r.stdout and "3 process(es)" in r.stdout


def test_lines_of_a_module_imported_by_spawn_workers(tmp_path: Any) -> None:
    from fastprof.lines import load_stats

    write(
        tmp_path,
        "helpers.py",
        """\
        def work(n):
            total = 0
            for i in range(n):
                total += i
            return total
        """,
    )
    script = write(
        tmp_path,
        "main.py",
        """\
        import multiprocessing as mp

        import helpers

        if __name__ == "__main__":
            with mp.get_context("spawn").Pool(2) as pool:
                print(sum(pool.map(helpers.work, [5] * 8)))
        """,
    )
    r = fastprof(
        ["run", "--subprocesses", "--lines-of", "helpers:work", "-o", "h.lprof", str(script)],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "80\n"
    hits = line_hits(load_stats(tmp_path / "h.lprof"), tmp_path / "helpers.py", "work")
    assert hits == {2: 8, 3: 48, 4: 40, 5: 8}


# -- merge and view of the line timings of a run directory ----------------------------------


def _fake(d: Any, pid: int, ppid: int, rows: List[Tuple[int, int, int]]) -> None:
    """The files of one process that timed the lines of job.py's work (as fastprof.children
    writes them)."""
    import marshal

    from fastprof.children import FORMAT
    from fastprof.lines import LineStats

    key = ("job.py", 3, "work")
    (d / f"{pid}.prof").write_bytes(marshal.dumps({key: (1, 1, 0.5, 0.5, {})}))
    LineStats({key: rows}, 1e-9).to_file(d / f"{pid}.lprof")
    meta = {
        "format": FORMAT,
        "pid": pid,
        "ppid": ppid,
        "root": ppid == 1,
        "argv": ["job.py"],
        "rank": None,
        "world_size": None,
        "start": 0.0,
        "end": 1.0,
        "wall": 1.0,
        "complete": True,
    }
    (d / f"{pid}.json").write_text(json.dumps(meta))


def test_merge_and_view_sum_line_timings(tmp_path: Any) -> None:
    from fastprof.lines import load_stats
    from fastprof.merge import format_line_processes, read_run

    d = tmp_path / "run"
    d.mkdir()
    _fake(d, 100, 1, [(4, 3, 3000), (5, 3, 1000)])
    _fake(d, 101, 100, [(4, 7, 7000), (6, 1, 500)])
    _fake(d, 102, 100, [])
    run = read_run(str(d))
    assert run.lines.timings[("job.py", 3, "work")] == [(4, 10, 10000), (5, 3, 1000), (6, 1, 500)]
    note = format_line_processes(run)
    assert "job.py:3(work): ran in 2 process(es): 101 (8 hits" in note
    r = fastprof(["merge", str(d), "-o", "m.prof"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "line timings to" in r.stderr and "ran in 2 process(es)" in r.stderr
    assert load_stats(tmp_path / "m.lprof").timings == run.lines.timings
    r = fastprof(["view", str(d), "-s", "calls"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Total time: 1.15e-05 s" in r.stdout  # the summed line table
    assert "ran in 2 process(es)" in r.stdout and "3 process(es)" in r.stdout


def test_unreadable_tree_and_line_files_are_named(tmp_path: Any) -> None:
    from fastprof.merge import read_run

    d = tmp_path / "run"
    d.mkdir()
    _fake(d, 100, 1, [(4, 3, 3000)])
    _fake(d, 101, 100, [(4, 1, 1000)])
    (d / "101.lprof").write_bytes(b"\x80\x04junk")
    (d / "100.tree.marshal").write_bytes(b"(\x06\x00\x00\x00junk")
    run = read_run(str(d))
    assert len(run.procs) == 2
    assert run.lines.timings[("job.py", 3, "work")] == [(4, 3, 3000)]
    assert any("101.lprof" in p for p in run.problems)
    assert any("100.tree.marshal" in p and "not a fastprof call tree" in p for p in run.problems)


# -- what a child costs ----------------------------------------------------------------------

HEAVY = ["json", "inspect", "fastprof.lines", "fastprof.stats", "fastprof.report", "fastprof.tree"]

CHILD = """\
import os, sys
from fastprof import children

children.start_child()
leaf = lambda: 1
for _ in range(3):
    leaf()
started = sorted(m for m in {heavy!r} if m in sys.modules)
children.write_now()
print(started, sorted(m for m in {heavy!r} if m in sys.modules))
"""


def test_child_start_and_write_import_nothing_heavy(tmp_path: Any) -> None:
    from fastprof.merge import read_run
    from test_jobs import _env

    env = _env()
    env["FASTPROF_RUN_DIR"] = str(tmp_path)
    env["FASTPROF_RUN_OPTIONS"] = "clock=wall\nbuiltins=1"
    r = subprocess.run(
        [sys.executable, "-c", CHILD.format(heavy=HEAVY)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "[] []\n", r.stdout
    run = read_run(str(tmp_path))  # and what it wrote reads back whole, its tree included
    (proc,) = run.procs
    assert proc.pid == int(next(n for n in os.listdir(tmp_path) if n.endswith(".json"))[:-5])
    assert run.tree is not None
    calls = {k[2]: v[1] for k, v in run.stats.to_dict().items()}
    assert calls["<lambda>"] == 3
    assert any(
        n.key is not None and n.key[2] == "<lambda>" and n.ncalls == 3 for n in run.tree.nodes()
    )


@pytest.mark.parametrize(
    "value",
    [
        ["python", "-c", 'print("a\\\\b")\n\t', "\x00\x1f\x7f", "é€𝄞", "\udcff"],
        {"pid": 3, "wall": 0.125, "end": None, "complete": True, "root": False, "argv": []},
        [1.0e-300, -2, 10**20, "", []],
    ],
)
def test_json_text_reads_back_as_written(value: Any) -> None:
    from fastprof.children import json_text

    text = json_text(value)
    assert text.isascii()
    assert json.loads(text) == value
    assert json.loads(text) == json.loads(json.dumps(value))


def test_options_round_trip_and_refuse_line_breaks(monkeypatch: Any) -> None:
    from fastprof import children

    text = children.options_text(
        {"clock": "cpu", "builtins": False, "lines": True, "lines_of": ["a:f", "/x y/b.py:C.g"]}
    )
    monkeypatch.setenv(children.ENV_OPTIONS, text)
    assert children.run_options() == {
        "clock": "cpu",
        "builtins": "0",
        "lines": "1",
        "lines_of": ["a:f", "/x y/b.py:C.g"],
    }
    with pytest.raises(ValueError, match="line break"):
        children.options_text({"lines_of": ["a\nb:f"]})
