"""Each thread's own table (``CallTree.thread_pstats``, ``Stats.threads``/``for_thread``) and the
``--threads`` view.  The threads' tables must sum to the merged table exactly, tick for tick,
on every zoo workload run in threads and on more threaded workloads; times are checked with a
fake timer; the view's merged header is the run's wall time, never a sum of thread times."""

from __future__ import annotations

import asyncio
import concurrent.futures
import cProfile
import gc
import io
import marshal
import os
import re
import sys
import textwrap
import threading
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest

import fastprof
from fastprof import cli
from fastprof.keys import label
from fastprof.report.threads_text import format_threads_report, without_runner
from fastprof.tree import CallTree
from profile_helpers import comparable
from test_profile_zoo import CASES, fib, t_work
from test_threads_running import _run_with_a_running_thread

HERE = __file__


# -- the truth in ticks ------------------------------------------------------------------------


def merged_ticks(prof: Any) -> Dict[Any, Any]:
    """The profile's pstats dictionary in the core's integer ticks (snapshot_stats' sums)."""
    _, funcs, edges = prof._raw()
    stats: Dict[Any, List[Any]] = {}
    keys = []
    for key, nc, nrec, tt, it in funcs:
        fk = label(key)
        keys.append(fk)
        acc = stats.setdefault(fk, [0, 0, 0, 0, {}])
        acc[0] += nc - nrec
        acc[1] += nc
        acc[2] += it
        acc[3] += tt
    for caller, callee, nc, nrec, tt, it in edges:
        callers = stats[keys[callee]][4]
        prev = callers.get(keys[caller], (0, 0, 0, 0))
        callers[keys[caller]] = tuple(a + b for a, b in zip(prev, (nc, nc - nrec, it, tt)))
    return {k: tuple(v) for k, v in stats.items() if v[1]}


def summed_threads(tree: CallTree) -> Dict[Any, Any]:
    """The threads' tables of tree, summed."""
    out: Dict[Any, List[Any]] = {}
    for ident in tree.threads:
        for key, (cc, nc, tt, ct, callers) in tree.thread_pstats(ident).items():
            acc = out.setdefault(key, [0, 0, 0, 0, {}])
            for i, v in enumerate((cc, nc, tt, ct)):
                acc[i] += v
            for ck, e in callers.items():
                prev = acc[4].get(ck, (0, 0, 0, 0))
                acc[4][ck] = tuple(a + b for a, b in zip(prev, e))
    return {k: tuple(v) for k, v in out.items()}


def check_sums(prof: Any, min_threads: int = 2) -> CallTree:
    """Asserts that the threads' tables sum to the merged table tick for tick."""
    tree = CallTree.from_profile(prof, ticks=True)
    assert tree.merged == 0
    assert len(tree.threads) >= min_threads
    got, want = summed_threads(tree), merged_ticks(prof)
    assert got == want
    # ticks are integers: the sums are exact, not close
    assert all(float(v[2]).is_integer() and float(v[3]).is_integer() for v in got.values())
    return tree


def profiled(fn: Callable[[], Any], **kw: Any) -> Any:
    prof = fastprof.Profile(**kw)
    prof.enable()
    try:
        fn()
    finally:
        prof.disable()
    return prof


def in_threads(fn: Callable[[], Any], n: int = 3) -> Callable[[], None]:
    """fn run in n threads at once and in the calling thread."""

    def run() -> None:
        ts = [threading.Thread(target=fn, name=f"zoo-{i}") for i in range(n)]
        for t in ts:
            t.start()
        fn()
        for t in ts:
            t.join()

    return run


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("builtins", [True, False])
def test_zoo_in_threads_sums_to_the_merged_table(name: str, builtins: bool) -> None:
    check_sums(profiled(in_threads(CASES[name]), builtins=builtins))


@pytest.mark.parametrize("name", sorted(CASES))
def test_zoo_one_thread_table_is_the_merged_table_and_cprofiles(name: str) -> None:
    prof = profiled(CASES[name])
    tree = check_sums(prof, min_threads=1)
    assert len(tree.threads) == 1
    st = fastprof.Stats(prof)
    (only,) = st.threads()
    assert only.ident == threading.get_ident() and only.name == "MainThread"
    mine = st.for_thread(only.ident).to_dict()
    ref = cProfile.Profile()
    ref.enable()
    try:
        CASES[name]()
    finally:
        ref.disable()
    ref.create_stats()
    keep = lambda k: k[0] in (HERE, CASES[name].__code__.co_filename, "~")  # noqa: E731
    assert comparable(mine, keep) == comparable(ref.stats, keep)


def test_threads_already_running_sum_to_the_merged_table() -> None:
    prof, counts = _run_with_a_running_thread(fastprof.Profile)
    check_sums(prof)


def test_thread_pool_sums_to_the_merged_table() -> None:
    def pool() -> None:
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            assert list(ex.map(fib, range(12))) == [fib(i) for i in range(12)]

    check_sums(profiled(pool))


def test_generator_resumed_in_another_thread() -> None:
    def gen() -> Iterator[int]:
        for i in range(5):
            yield fib(i)

    def work() -> None:
        g = gen()
        next(g)
        t = threading.Thread(target=lambda: list(g))
        t.start()
        t.join()

    tree = check_sums(profiled(work))
    calls = [tree.thread_pstats(i) for i in tree.threads]
    key = (HERE, gen.__code__.co_firstlineno, "gen")
    assert sorted(c[key][1] for c in calls if key in c) == [1, 5]  # 1 step here, 5 there


def test_recursion_and_asyncio_in_threads() -> None:
    async def a_fib(n: int) -> int:
        await asyncio.sleep(0)
        return n if n < 2 else await a_fib(n - 1) + await a_fib(n - 2)

    def both() -> None:
        fib(10)
        asyncio.run(a_fib(6))

    tree = check_sums(profiled(in_threads(both, 2)))
    key = (fib.__code__.co_filename, fib.__code__.co_firstlineno, "fib")
    counts = [tree.thread_pstats(i)[key][:2] for i in tree.threads]
    # one primitive call per run of fib(10) (177 calls), as pstats counts recursion; three
    # runs (two threads, which may share an ident, and this one)
    assert all(nc == 177 * cc for cc, nc in counts) and len(counts) >= 2
    assert sum(nc for _, nc in counts) == 3 * 177


def test_idents_reused_share_a_root() -> None:
    def sequential() -> None:
        for _ in range(4):
            t = threading.Thread(target=t_work, args=(5,))
            t.start()
            t.join()

    tree = check_sums(profiled(sequential))
    key = (t_work.__code__.co_filename, t_work.__code__.co_firstlineno, "t_work")
    assert sum(tree.thread_pstats(i).get(key, (0, 0))[1] for i in tree.threads) == 4


# -- fastprof.Stats: threads(), for_thread() -----------------------------------------------


class FakeTimer:
    """A timer that advances by one on every reading (thread-safe)."""

    def __init__(self) -> None:
        self.t = 0
        self.lock = threading.Lock()

    def __call__(self) -> int:
        with self.lock:
            self.t += 1
            return self.t


KEEP: List[threading.Thread] = []  # Thread objects alive: threading still knows their names


def two_threads() -> Tuple[Any, int]:
    """A profile (fake timer) of the main thread and one named thread; returns it and the
    thread's ident."""
    prof = fastprof.Profile(FakeTimer(), 1.0)
    worker = threading.Thread(target=t_work, args=(6,), name="worker-1")
    KEEP[:] = [worker]
    prof.enable()
    try:
        worker.start()
        worker.join()
        t_work(2)
    finally:
        prof.disable()
    assert worker.ident is not None
    return prof, worker.ident


def test_thread_names_where_known() -> None:
    """Names of the threads running at enable(), and of those started meanwhile, a thread
    dropped before the profile is read included (the core read its name)."""
    go, done = threading.Event(), threading.Event()
    early = threading.Thread(target=lambda: (go.wait(30), t_work(3)), name="early")
    early.start()
    prof = fastprof.Profile()
    prof.enable()
    try:
        late = threading.Thread(target=t_work, args=(3,), name="late")
        late.start()
        late.join()
        late_ident = late.ident
        del late
        go.set()
        early.join()
        early_ident = early.ident
        del early
    finally:
        prof.disable()
    done.set()
    names = {t.ident: t.name for t in fastprof.Stats(prof).threads()}
    assert names[early_ident] == "early"
    assert names[late_ident] == "late"
    assert names[threading.get_ident()] == "MainThread"


def test_a_finished_thread_renamed_since_shows_its_name_now_in_every_view() -> None:
    """profiling.md: a thread's name is the one it has when the stats are read, while its
    Thread object lives (finished or not); the timeline's tracks say the same."""

    def renamer() -> None:
        t_work(2)
        threading.current_thread().name = "renamed-inside"
        t_work(2)

    t = threading.Thread(target=renamer, name="before-rename")
    prof = fastprof.Profile()
    prof.enable()
    try:
        t.start()
        t.join()
    finally:
        prof.disable()
    assert {ti.name for ti in fastprof.Stats(prof).threads()} == {"MainThread", "renamed-inside"}
    with fastprof.trace() as tr:
        t2 = threading.Thread(target=renamer, name="before-rename")
        t2.start()
        t2.join()
    assert [th.name for th in tr.threads] == [ti.name for ti in tr.stats().threads()]
    assert "renamed-inside" in [th.name for th in tr.threads]


def test_stats_threads_and_for_thread() -> None:
    prof, worker = two_threads()
    st = fastprof.Stats(prof)
    infos = st.threads()
    assert [(i.ident, i.name) for i in infos] == [
        (threading.get_ident(), "MainThread"),
        (worker, "worker-1"),
    ]
    main_t, work_t = st.for_thread(threading.get_ident()), st.for_thread("worker-1")
    assert work_t.to_dict() == st.for_thread(worker).to_dict()
    assert work_t.row("t_work").ncalls == 1 and work_t.row("t_leaf").ncalls == 6
    assert main_t.row("t_work").ncalls == 1 and main_t.row("t_leaf").ncalls == 2
    assert st.row("t_leaf").ncalls == 8
    # the fake clock: every time is a whole number of ticks, and the tables sum exactly
    for key, (cc, nc, tt, ct, _) in st.to_dict().items():
        parts = [t.to_dict().get(key, (0, 0, 0.0, 0.0, {})) for t in (main_t, work_t)]
        assert (cc, nc, tt, ct) == tuple(sum(p[i] for p in parts) for i in range(4))
    assert work_t.row("t_work").tottime > 0 and float(work_t.row("t_work").cumtime).is_integer()
    assert work_t.threads() == [infos[1]]
    # order and filters are kept
    sorted_t = st.sort("calls").filter("^t_").for_thread(worker)
    assert [r.name for r in sorted_t.rows] == ["t_leaf", "t_work"]
    assert sorted_t.sort_keys == ("calls",)


def test_for_thread_errors_name_what_is_wrong() -> None:
    prof, worker = two_threads()
    st = fastprof.Stats(prof)
    with pytest.raises(TypeError, match="ident must be"):
        st.for_thread(1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"no thread 12345.*threads: \d+ \(MainThread\)"):
        st.for_thread(12345)
    with pytest.raises(ValueError, match="no threads named 'nope'"):
        st.for_thread("nope")
    ref = cProfile.Profile()
    ref.runcall(t_work, 2)
    for src, why in ((ref, "recorded no call tree"), (fastprof.Stats(prof, prof), "sums 2")):
        with pytest.raises(ValueError, match=f"no per-thread data: .*{why}"):
            fastprof.Stats(src).threads()
        with pytest.raises(ValueError, match=f"for_thread: .*{why}"):
            fastprof.Stats(src).for_thread(worker)
    assert fastprof.Stats(prof).add(ref).call_tree() is None


def test_capped_tree_refuses_per_thread_numbers() -> None:
    prof = fastprof.Profile(tree_nodes=3)
    prof.enable()
    try:
        in_threads(lambda: t_work(5), 2)()
    finally:
        prof.disable()
    st = fastprof.Stats(prof)
    assert st.call_tree() is not None and st.call_tree().merged > 0  # type: ignore[union-attr]
    assert len(st.threads()) >= 2
    with pytest.raises(ValueError, match=r"capped \(\d+ calls merged past the node cap of 3\)"):
        st.for_thread(st.threads()[0].ident)
    text = format_threads_report(st, st.call_tree(), wall=1.0)  # type: ignore[arg-type]
    assert "each thread's table is left out: the call tree was capped" in text
    assert "thread 1" not in text and "all " in text and "merged" in text


def test_per_thread_data_survives_dump_stats_and_stats_dump(tmp_path: Any) -> None:
    prof, worker = two_threads()
    want = {i: fastprof.Stats(prof).for_thread(i).to_dict() for i in (worker,)}
    path = tmp_path / "p.prof"
    prof.dump_stats(str(path))
    assert (tmp_path / "p.prof.tree.json").is_file()
    loaded = fastprof.Stats(str(path))
    assert [t.name for t in loaded.threads()] == ["MainThread", "worker-1"]
    assert loaded.for_thread(worker).to_dict() == want[worker]
    again = tmp_path / "q.prof"
    loaded.dump(again)
    assert fastprof.Stats(again).for_thread("worker-1").to_dict() == want[worker]
    # a filtered table is saved without a tree that would not match it
    loaded.filter("t_leaf").dump(again)
    assert not (tmp_path / "q.prof.tree.json").exists()
    # cProfile's pstats files still load, with no per-thread data
    ref = cProfile.Profile()
    ref.runcall(t_work, 2)
    ref.dump_stats(str(tmp_path / "c.prof"))
    assert fastprof.Stats(str(tmp_path / "c.prof")).call_tree() is None


# -- the --threads view ------------------------------------------------------------------------


def test_threads_report_headers_with_a_fake_timer() -> None:
    prof, worker = two_threads()
    st = fastprof.Stats(prof)
    tree = st.call_tree()
    assert tree is not None
    # each thread's own time, without the profiler's own disable() call (the view leaves it out)
    own = {
        i: sum(v[2] for v in without_runner(tree.thread_pstats(i)).values())
        for i in (threading.get_ident(), worker)
    }
    assert own[threading.get_ident()] == st.for_thread(threading.get_ident()).total_tt - 1
    text = format_threads_report(st, tree, wall=12.5, title="run", sort="calls")
    lines = text.splitlines()
    assert lines[0] == "run"
    assert lines[1].startswith("2 threads: each thread's table")
    heads = [ln for ln in lines if re.match(r"(.+: )?thread \d+ \(id \d+\)$", ln)]
    assert heads == [
        f"MainThread: thread 1 (id {threading.get_ident()})",
        f"worker-1: thread 2 (id {worker})",
    ]
    own_lines = [ln for ln in lines if "the thread's own time" in ln]
    assert [float(re.search(r"in ([\d.]+) seconds", ln).group(1)) for ln in own_lines] == [  # type: ignore[union-attr]
        own[threading.get_ident()],
        own[worker],
    ]
    merged_at = lines.index("all 2 threads merged")
    assert "function calls in 12.500000 seconds of wall time (the run)" in lines[merged_at + 1]
    assert sum(own.values()) != 12.5  # the header is the wall time given, not the sum
    # without a recorded wall time it says so rather than print a sum
    text = format_threads_report(st, tree)
    assert "(the run's wall time was not recorded)" in text
    assert f"{sum(own.values()):.6f} seconds" not in text.split("all 2 threads merged")[1]


TWO_THREADS = textwrap.dedent("""
    import threading

    def leaf(i):
        return i * 2

    def work(n):
        return sum(leaf(i) for i in range(n))

    t = threading.Thread(target=work, args=(50,), name="worker-1")
    t.start()
    work(20)
    t.join()
""")


@pytest.fixture
def fake_wall(monkeypatch: Any) -> None:
    readings = iter([100.0, 103.25])
    monkeypatch.setattr(cli, "_wall_clock", lambda: next(readings))


def _tables(out: str) -> Dict[str, str]:
    """The view's tables by their first line (a thread's, or the merged one's)."""
    tables: Dict[str, List[str]] = {}
    current: List[str] = []
    for line in out.splitlines():
        if re.match(r"(.+: )?thread \d+ \(id \d+\)$|all \d+ threads merged$", line):
            current = tables.setdefault(line, [])
        current.append(line)
    return {head: "\n".join(lines) for head, lines in tables.items()}


def test_run_threads_prints_each_thread_then_the_run(
    tmp_path: Any, capsys: Any, fake_wall: None, monkeypatch: Any
) -> None:
    (tmp_path / "two.py").write_text(TWO_THREADS)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "--threads", "--all", "two.py"]) == 0
    out = capsys.readouterr().out
    tables = _tables(out)
    main_head = next(h for h in tables if h.startswith("MainThread: thread 1 "))
    work_head = next(h for h in tables if h.startswith("worker-1: thread 2 "))
    assert re.search(r"\b50\s.*two\.py:4\(leaf\)", tables[work_head])
    assert re.search(r"\b20\s.*two\.py:4\(leaf\)", tables[main_head])
    merged = tables["all 2 threads merged"]
    assert "in 3.250000 seconds of wall time (the run)" in merged
    assert re.search(r"\b70\s.*two\.py:4\(leaf\)", merged)
    assert "fastprof" not in merged.split("function\n", 1)[1]  # no disable row
    assert out.index(main_head) < out.index(work_head) < out.index("all 2 threads merged")


def test_view_threads_reads_the_saved_tree(
    tmp_path: Any, capsys: Any, fake_wall: None, monkeypatch: Any
) -> None:
    (tmp_path / "two.py").write_text(TWO_THREADS)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "-o", "two.prof", "two.py"]) == 0
    capsys.readouterr()
    assert cli.main(["view", "--threads", "-s", "calls", "two.prof"]) == 0
    out = capsys.readouterr().out
    assert "worker-1: thread 2 " in out
    assert "in 3.250000 seconds of wall time (the run)" in out
    with open(tmp_path / "two.prof", "rb") as f:
        merged = marshal.load(f)
    leaf = [v for k, v in merged.items() if k[2] == "leaf"][0]
    assert leaf[1] == 70


def test_threads_option_errors(tmp_path: Any, capsys: Any, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "two.py").write_text(TWO_THREADS)
    ref = cProfile.Profile()
    ref.runcall(t_work, 2)
    ref.dump_stats(str(tmp_path / "c.prof"))
    assert cli.main(["view", "--threads", "c.prof"]) == 2
    assert "--threads needs the call tree" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "--threads", "--lines", "two.py"])
    assert e.value.code == 2
    assert "--threads shows one process's call profile" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["view", "--threads", "--format", "collapsed", "c.prof"])
    assert "--threads prints tables as text" in capsys.readouterr().err


def test_two_thread_script_as_a_subprocess(tmp_path: Any) -> None:
    """The real command line, end to end (no fake clock: only the shape is checked)."""
    import subprocess

    (tmp_path / "two.py").write_text(TWO_THREADS)
    env = dict(os.environ)
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(fastprof.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([pkg] + [p for p in [env.get("PYTHONPATH")] if p])
    r = subprocess.run(
        [sys.executable, "-m", "fastprof", "run", "--threads", "two.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "worker-1: thread 2 " in r.stdout
    assert re.search(
        r"all 2 threads merged\n\d+ function calls( \(\d+ primitive calls\))? in [\d.]+ "
        r"seconds of wall",
        r.stdout,
    )


def test_report_reads_from_a_stream() -> None:
    prof, _ = two_threads()
    st = fastprof.Stats(prof)
    buf = io.StringIO()
    buf.write(format_threads_report(st, st.call_tree(), wall=2.0))  # type: ignore[arg-type]
    assert buf.getvalue().endswith("\n")


def test_tree_file_names_and_wall_are_checked() -> None:
    good = {
        "format": "fastprof-tree",
        "version": 1,
        "merged": 0,
        "node_cap": None,
        "keys": [["a.py", 1, "f"]],
        "threads": [{"ident": 7, "name": "w", "nodes": [[-1, 0, 1, 1.0, 1.0]]}],
        "wall": 2.5,
    }
    tree = CallTree.from_dict(good)
    assert tree.names == {7: "w"} and tree.wall == 2.5
    assert CallTree.from_dict(tree.to_dict()).to_dict() == tree.to_dict()
    for bad in (
        {**good, "wall": -1.0},
        {**good, "wall": "2"},
        {**good, "wall": True},
        {**good, "threads": [[7, []]]},
    ):
        with pytest.raises(ValueError):
            CallTree.from_dict(bad)
    assert CallTree.from_dict({**good, "threads": [{**good["threads"][0], "name": 5}]}).names == {}


def test_stats_threads_table_and_print_threads() -> None:
    prof, worker = two_threads()
    st = fastprof.Stats(prof).sort("calls")
    before = [r.key for r in st.rows]
    buf = io.StringIO()
    st.print_threads(stream=buf, wall=4.0, title="t")
    text = buf.getvalue()
    assert text == st.threads_table(wall=4.0, title="t")
    assert [r.key for r in st.rows] == before  # the Stats is left as it was
    assert "in 4.000000 seconds of wall time (the run)" in text
    assert text.count("sorted by ncalls") == 3  # each thread's table and the merged one
    assert "disable" not in text
    assert "(the run's wall time was not recorded)" in st.threads_table()
    # pstats' legacy integer keys carry over too
    legacy = fastprof.Stats(prof).sort(0)
    assert legacy.for_thread(worker).sort_keys == ("calls",)  # pstats 0, named
    assert "sorted by ncalls" in legacy.threads_table(top=1)
    with pytest.raises(ValueError, match="top must be"):
        st.threads_table(top=-1)
    with pytest.raises(TypeError, match="wall must be"):
        st.threads_table(wall="1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="threads_table: .*no per-thread data"):
        fastprof.Stats(st.to_dict()).threads_table()


def test_finished_threads_keep_the_names_threading_gave_them() -> None:
    """A thread that ended, its Thread object gone, is named in the per-thread views and the
    timeline by the name it had: the core reads it when it first sees the thread named
    (they showed as unnamed: threading no longer knows them when the stats are read)."""

    def work() -> int:
        return sum(range(10))

    def start(name: str) -> None:
        t = threading.Thread(target=work, name=name)
        t.start()
        t.join()

    prof = fastprof.Profile()
    prof.enable()
    for i in range(3):
        start(f"gone-{i}")
    prof.disable()
    gc.collect()
    names = ", ".join(info.name or "" for info in fastprof.Stats(prof).threads())
    assert all(f"gone-{i}" in names for i in range(3)), names
    with fastprof.trace() as tr:
        start("traced")
    gc.collect()
    assert "traced" in [t.name for t in tr.threads]
