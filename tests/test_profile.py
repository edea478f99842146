"""fastprof.Profile: exact times under a fake clock, cProfile's API and shapes, pstats files,
fastprof.run/runctx, and bad input."""

from __future__ import annotations

import cProfile
import io
import marshal
import os
import pstats
import subprocess
import sys
import threading
from typing import Any

import pytest

import fastprof
from fastprof.profile import ProfilerEntry, label
from profile_helpers import ThreadWatch, audit_refusing

HERE = __file__


# -- exact times: the clock moves only where the code says so --------------------------------

T = [0]


def leaf() -> None:
    T[0] += 3


def mid() -> None:
    T[0] += 2
    leaf()
    leaf()


def top() -> None:
    T[0] += 1
    mid()
    leaf()


def rec(n: int) -> None:
    T[0] += 1
    if n:
        rec(n - 1)
    T[0] += 10


def ping(n: int) -> None:
    T[0] += 1
    if n:
        pong(n - 1)


def pong(n: int) -> None:
    T[0] += 2
    if n:
        ping(n - 1)


def key(fn: Any) -> tuple:
    return (HERE, fn.__code__.co_firstlineno, fn.__name__)


def fake_profile(fn: Any, *args: Any, **kw: Any) -> fastprof.Profile:
    p = fastprof.Profile(lambda: T[0], 1, **kw)
    p.runcall(fn, *args)
    p.create_stats()
    return p


def test_exact_times_simple_tree() -> None:
    st = fake_profile(top).stats
    # (primitive calls, calls, tottime, cumtime, callers)
    assert st[key(top)][:4] == (1, 1, 1.0, 12.0)
    assert st[key(mid)][:4] == (1, 1, 2.0, 8.0)
    assert st[key(leaf)][:4] == (3, 3, 9.0, 9.0)
    # callers: (calls, primitive calls, tottime, cumtime) per caller
    assert st[key(leaf)][4] == {key(mid): (2, 2, 6.0, 6.0), key(top): (1, 1, 3.0, 3.0)}
    assert st[key(mid)][4] == {key(top): (1, 1, 2.0, 8.0)}


def test_exact_times_direct_recursion() -> None:
    st = fake_profile(rec, 3).stats
    # 4 activations, 1 primitive; own time 4 * 11; cumtime counted at the outermost only
    assert st[key(rec)][:4] == (1, 4, 44.0, 44.0)
    nc, cc, tt, ct = st[key(rec)][4][key(rec)]
    assert (nc, tt) == (3, 33.0)


def test_exact_times_mutual_recursion() -> None:
    st = fake_profile(ping, 5).stats
    # ping(5) pong(4) ping(3) pong(2) ping(1) pong(0)
    assert st[key(ping)][:4] == (1, 3, 3.0, 9.0)
    assert st[key(pong)][:4] == (1, 3, 6.0, 8.0)


def test_exact_times_match_cprofile_everywhere() -> None:
    for fn, args in ((top, ()), (rec, (5,)), (ping, (7,))):
        ref = cProfile.Profile(lambda: T[0], 1)
        ref.runcall(fn, *args)
        ref.create_stats()
        got = fake_profile(fn, *args).stats
        here = {k: v for k, v in ref.stats.items() if k[0] == HERE}
        assert {k: v for k, v in got.items() if k[0] == HERE} == here


def test_float_timer_with_timeunit_zero() -> None:
    clock = [0.0]

    def work() -> None:
        clock[0] += 0.25

    p = fastprof.Profile(lambda: clock[0])
    p.runcall(work)
    p.create_stats()
    tt, ct = p.stats[key(work)][2:4]
    assert tt == pytest.approx(0.25)
    assert ct == pytest.approx(0.25)


# -- getstats / snapshot_stats / create_stats ----------------------------------------------


def test_getstats_has_lsprof_shape() -> None:
    p = fastprof.Profile(lambda: T[0], 1)
    p.runcall(top)
    entries = {e.code: e for e in p.getstats() if not isinstance(e.code, str)}
    e = entries[top.__code__]
    assert isinstance(e, ProfilerEntry)
    assert (e.callcount, e.reccallcount, e.totaltime, e.inlinetime) == (1, 0, 12.0, 1.0)
    subs = {s.code: s for s in e.calls}
    assert set(subs) >= {mid.__code__, leaf.__code__}
    assert (subs[mid.__code__].callcount, subs[mid.__code__].totaltime) == (1, 8.0)
    assert entries[leaf.__code__].calls is None  # called nothing, as _lsprof says


def test_snapshot_keeps_profiling_and_create_disables() -> None:
    p = fastprof.Profile()
    p.enable()
    try:
        leaf()
        p.snapshot_stats()
        assert p.enabled
        assert p.stats[key(leaf)][1] == 1
        leaf()
    finally:
        p.create_stats()
    assert not p.enabled
    assert p.stats[key(leaf)][1] == 2


def test_stats_accumulate_until_clear() -> None:
    p = fastprof.Profile()
    p.runcall(leaf)
    p.runcall(leaf)
    p.create_stats()
    assert p.stats[key(leaf)][1] == 2
    p.clear()
    p.create_stats()
    assert key(leaf) not in p.stats


def test_label() -> None:
    assert label(leaf.__code__) == key(leaf)
    assert label("<built-in method builtins.len>") == ("~", 0, "<built-in method builtins.len>")


def test_builtins_named_as_cprofile() -> None:
    def work() -> None:
        len([1])
        [].append(1)

    p = fastprof.Profile()
    p.runcall(work)
    p.create_stats()
    assert ("~", 0, "<built-in method builtins.len>") in p.stats
    assert ("~", 0, "<method 'append' of 'list' objects>") in p.stats


# -- cProfile's API ------------------------------------------------------------------------


def test_runcall_returns_and_propagates() -> None:
    p = fastprof.Profile()
    assert p.runcall(divmod, 7, 2) == (3, 1)
    with pytest.raises(ZeroDivisionError):
        p.runcall(divmod, 1, 0)
    assert not p.enabled


def test_runctx_and_run() -> None:
    p = fastprof.Profile()
    ns: dict = {"leaf": leaf}
    assert p.runctx("leaf(); leaf()", ns, ns) is p
    p.create_stats()
    assert p.stats[key(leaf)][1] == 2
    import __main__

    __main__.__dict__["_fastprof_test_leaf"] = leaf
    try:
        q = fastprof.Profile().run("_fastprof_test_leaf()")
    finally:
        del __main__.__dict__["_fastprof_test_leaf"]
    q.create_stats()
    assert q.stats[key(leaf)][1] == 1


def test_context_manager() -> None:
    with fastprof.Profile() as p:
        assert p.enabled
        mid()
    assert not p.enabled
    p.create_stats()
    assert p.stats[key(leaf)][1] == 2


def test_print_stats_is_pstats_table(capsys: Any) -> None:
    p = fastprof.Profile()
    p.runcall(top)
    p.print_stats("cumulative")
    out = capsys.readouterr().out
    assert "Ordered by: cumulative time" in out
    assert "(top)" in out and "(leaf)" in out
    p.print_stats(("calls", "name"))
    assert "(mid)" in capsys.readouterr().out


def test_dump_stats_pstats_round_trip(tmp_path: Any) -> None:
    p = fastprof.Profile()
    p.runcall(rec, 4)
    path = tmp_path / "out.prof"
    p.dump_stats(str(path))
    with open(path, "rb") as f:
        assert marshal.load(f) == p.stats
    ps = pstats.Stats(str(path))
    assert ps.stats == p.stats
    assert ps.total_calls == sum(v[1] for v in p.stats.values())
    # pstats reads the profiler object itself, too (and empties its .stats)
    expected = dict(p.stats)
    assert pstats.Stats(p).stats == expected
    p.stats = expected
    buf = io.StringIO()
    pstats.Stats(str(path), stream=buf).sort_stats("tottime").print_callers("rec")
    assert "rec" in buf.getvalue()
    assert fastprof.Stats(str(path)).to_dict() == p.stats


def test_module_run_and_runctx(tmp_path: Any, capsys: Any) -> None:
    ns = {"leaf": leaf}
    fastprof.runctx("leaf()", ns, ns, sort="calls")
    assert "(leaf)" in capsys.readouterr().out
    path = tmp_path / "r.prof"
    fastprof.runctx("leaf(); leaf()", ns, ns, filename=str(path))
    assert pstats.Stats(str(path)).stats[key(leaf)][1] == 2
    fastprof.run("import sys; sys.exit(3)")  # SystemExit ends the run quietly, as cProfile
    assert "function calls" in capsys.readouterr().out


def test_subclassable_and_positional_arguments() -> None:
    class Mine(fastprof.Profile):
        pass

    p = Mine(lambda: T[0], 1, True, False)
    p.runcall(top)
    p.create_stats()
    assert p.stats[key(top)][2:4] == (1.0, 12.0)
    assert not any(k[0] == "~" for k in p.stats)


@pytest.mark.parametrize("clock", ["wall", "cpu", "process_cpu"])
def test_clocks(clock: str) -> None:
    p = fastprof.Profile(clock=clock)
    p.runcall(sum, range(1000))
    p.runcall(rec, 3)
    p.create_stats()
    cc, nc, tt, ct, _ = p.stats[key(rec)]
    assert (cc, nc) == (1, 4)
    assert 0.0 <= tt <= ct


_MONOTONIC_SCRIPT = """
import cProfile, time, fastprof, fastprof._fastprof as F

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def work():
    fib(12)
    sorted([3, 1, 2], key=abs)

assert F.clock_info()[0] == "monotonic", F.clock_info()
got = fastprof.Profile()
t0 = time.perf_counter()
got.runcall(work)
elapsed = time.perf_counter() - t0
got.create_stats()
ref = cProfile.Profile()
ref.runcall(work)
ref.create_stats()
keep = lambda k: k[2] in ("fib", "work", "<built-in method builtins.sorted>",
                          "<built-in function abs>")
def calls(stats):
    return {k: (v[0], v[1], sorted((c, e[:2]) for c, e in v[4].items() if keep(c)))
            for k, v in stats.items() if keep(k)}
assert calls(got.stats) == calls(ref.stats), (calls(got.stats), calls(ref.stats))
fib_key = [k for k in got.stats if k[2] == "fib"][0]
assert 0.0 < got.stats[fib_key][2] <= got.stats[fib_key][3] <= elapsed, (got.stats[fib_key], elapsed)
print("ok")
"""


def test_monotonic_wall_clock_counts_match_cprofile() -> None:
    """FASTPROF_CLOCK=monotonic, what a machine without an invariant TSC gets: the hooks' copy
    whose fast paths read CLOCK_MONOTONIC; counts still match cProfile, and times add up and
    stay within the wall time of the run."""
    env = {**os.environ, "FASTPROF_CLOCK": "monotonic"}
    r = subprocess.run(
        [sys.executable, "-c", _MONOTONIC_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


# -- bad input -----------------------------------------------------------------------------


def test_bad_timer() -> None:
    with pytest.raises(TypeError, match="timer"):
        fastprof.Profile(42)
    with pytest.raises(TypeError):
        fastprof.Profile(lambda: 0, "x")


def test_bad_clock() -> None:
    with pytest.raises(ValueError, match="clock"):
        fastprof.Profile(clock="sundial")
    with pytest.raises(TypeError):
        fastprof.Profile(clock=3)


def test_bad_keyword() -> None:
    with pytest.raises(TypeError):
        fastprof.Profile(colour="red")


def test_disable_without_enable_is_a_no_op() -> None:
    p = fastprof.Profile()
    p.disable()
    p.disable()
    assert not p.enabled
    p.create_stats()
    assert p.stats == {}


def test_enable_twice_is_a_no_op() -> None:
    p = fastprof.Profile()
    p.enable()
    try:
        p.enable()
        leaf()
        assert p.enabled
    finally:
        p.disable()
    assert not p.enabled
    p.create_stats()
    assert p.stats[key(leaf)][1] == 1
    # the second enable() records as cProfile records its own: one C call, no Python frame
    # of fastprof's (and no name holding a memory address)
    ours = [k for k in p.stats if "fastprof" in k[0] or "enable" in k[2]]
    assert ours == [("~", 0, "<method 'enable' of 'fastprof.Profile' objects>")]
    assert p.stats[ours[0]][1] == 1


def test_a_second_profiler_is_refused_with_valueerror_on_every_version() -> None:
    # cProfile 3.12+ raises ValueError; fastprof does on 3.9-3.11 too (one Profile at a time),
    # and the first profiler's table gains none of fastprof's own frames from the refusal
    p = fastprof.Profile()
    p.enable()
    try:
        with pytest.raises(ValueError, match="Another profiling tool is already active"):
            fastprof.Profile().enable()
        leaf()
    finally:
        p.disable()
    p.create_stats()
    assert p.stats[key(leaf)][1] == 1
    assert [k for k in p.stats if "fastprof" in k[0]] == []  # not one frame of fastprof's
    enable = ("~", 0, "<method 'enable' of 'fastprof.Profile' objects>")
    assert p.stats[enable][1] == 1
    assert [k for k in p.stats if "thread" in k[2] or "enumerate" in k[2]] == []


def test_timer_error_is_reported_as_unraisable_and_hook_is_freed() -> None:
    calls = [0]

    def bad_timer() -> int:
        calls[0] += 1
        if calls[0] > 3:
            raise ZeroDivisionError("timer broke")
        return calls[0]

    seen: list = []
    saved_hook = sys.unraisablehook
    sys.unraisablehook = seen.append
    p = fastprof.Profile(bad_timer, 1)
    try:
        p.enable()
        for _ in range(5):
            leaf()
        p.disable()  # as cProfile: the timer's errors went to sys.unraisablehook
    finally:
        sys.unraisablehook = saved_hook
        p.disable()
    assert seen and all(u.exc_type is ZeroDivisionError and u.object is bad_timer for u in seen)
    assert "timer broke" in str(seen[0].exc_value)
    assert not p.enabled
    # the hook was given back: another profiler can take it
    q = fastprof.Profile()
    q.runcall(leaf)
    q.create_stats()
    assert q.stats[key(leaf)][1] == 1
    assert sys.getprofile() is None


def test_next_to_cprofile() -> None:
    """3.12+: both run at once (fastprof takes another sys.monitoring tool id) and agree;
    before 3.12 there is one profile hook per thread, and the error names who holds it."""
    outer = cProfile.Profile()
    outer.enable()
    try:
        p = fastprof.Profile()
        if sys.version_info >= (3, 12):
            p.enable()
            rec(6)
            p.disable()
        else:
            with pytest.raises(ValueError, match="cProfile.Profile"):
                p.enable()
            rec(6)
    finally:
        outer.disable()
    assert not p.enabled
    outer.create_stats()
    assert outer.stats[key(rec)][:2] == (1, 7)
    if sys.version_info >= (3, 12):
        p.create_stats()
        assert p.stats[key(rec)][:2] == (1, 7)
        assert p.stats[key(rec)][4][key(rec)][:2] == outer.stats[key(rec)][4][key(rec)][:2]


@pytest.mark.skipif(
    sys.version_info >= (3, 12),
    reason="the empty hook is the floor of the PyEval_SetProfile path, below 3.12 only",
)
def test_empty_profile_hook_holds_the_hook_and_leaves_none() -> None:
    """benchmarks/overhead.py's floor: a C profile function with no object.  fastprof refuses
    to take the hook from it and says so; it never replaces or removes another profiler."""
    from fastprof import _fastprof

    _fastprof._empty_profile_hook(True)
    try:
        with pytest.raises(ValueError, match="C profile function with no object"):
            fastprof.Profile().enable()
    finally:
        _fastprof._empty_profile_hook(False)
    p = fastprof.Profile()
    p.enable()
    try:
        with pytest.raises(RuntimeError, match="another profile function"):
            _fastprof._empty_profile_hook(True)
        rec(3)
    finally:
        p.disable()
    assert p.getstats() and sys.getprofile() is None


def stamped_work() -> None:
    rec(4)
    sorted([3, 1, 2])
    len("abc")


@pytest.mark.skipif(
    sys.version_info >= (3, 12),
    reason="the stamp hook is a floor of the PyEval_SetProfile path, below 3.12 only",
)
def test_stamp_profile_hook_times_every_call_cprofile_sees() -> None:
    """benchmarks/overhead.py's timing floor: it times each call that cProfile counts (every
    Python and C call but the one that removes it), then leaves no hook; it starts from zero
    each time and will not take a hook another profiler holds."""
    from fastprof import _fastprof

    for _ in range(2):
        _fastprof._stamp_profile_hook(True)
        try:
            stamped_work()
        finally:
            timed, ticks = _fastprof._stamp_profile_hook(False)
        assert sys.getprofile() is None
        ref = cProfile.Profile()
        ref.enable()
        stamped_work()
        ref.disable()
        calls = sum(e.callcount for e in ref.getstats() if "disable" not in str(e.code))
        assert timed == calls == 8  # rec x5, stamped_work's sorted and len, stamped_work
        assert ticks > 0
    p = fastprof.Profile()
    p.enable()
    try:
        with pytest.raises(RuntimeError, match="another profile function"):
            _fastprof._stamp_profile_hook(True)
    finally:
        p.disable()
    assert sys.getprofile() is None


def test_pstats_file_has_cprofile_types(tmp_path: Any) -> None:
    """What snakeviz, gprof2dot and tuna read: ints for counts, floats for times, 3-tuple keys."""
    p = fastprof.Profile()
    p.runcall(top)
    p.runcall(sorted, [3, 1, 2], key=lambda v: v)
    path = tmp_path / "t.prof"
    p.dump_stats(str(path))
    with open(path, "rb") as f:
        data = marshal.load(f)
    assert data
    for (fname, line, name), (cc, nc, tt, ct, callers) in data.items():
        assert isinstance(fname, str) and isinstance(line, int) and isinstance(name, str)
        assert type(cc) is int and type(nc) is int and 0 < cc <= nc
        assert type(tt) is float and type(ct) is float
        for ck, edge in callers.items():
            assert ck in data
            e_nc, e_cc, e_tt, e_ct = edge
            assert type(e_nc) is int and type(e_cc) is int and e_cc <= e_nc
            assert type(e_tt) is float and type(e_ct) is float


@pytest.mark.skipif(
    sys.version_info >= (3, 12),
    reason="3.12+ profiles through sys.monitoring, not per-thread profile functions",
)
def test_enable_refused_by_an_audit_hook_leaves_no_hook_anywhere() -> None:
    watch = ThreadWatch(sys.getprofile)
    p = fastprof.Profile()
    try:
        with audit_refusing("sys.setprofile"), pytest.raises(RuntimeError, match="refused"):
            p.enable()
    finally:
        seen = watch.finish()
    assert not p.enabled
    assert sys.getprofile() is None and threading._profile_hook is None and seen == [None]
    p.enable()
    rec(3)
    p.disable()
    p.create_stats()
    assert p.stats[key(rec)][:2] == (1, 4)


def test_functions_sharing_a_label_share_one_row_with_all_their_calls() -> None:
    """Each dataclass compiles its own ``__init__`` from ``<string>`` line 2: one pstats key.
    Their row sums every call (cProfile's keeps one code object's and drops the rest)."""
    from dataclasses import dataclass

    @dataclass
    class A:
        x: int

    @dataclass
    class B:
        y: int

    assert A.__init__.__code__ is not B.__init__.__code__
    key = (A.__init__.__code__.co_filename, 2, "__init__")
    assert (B.__init__.__code__.co_filename, B.__init__.__code__.co_firstlineno) == key[:2]

    def run() -> None:
        for i in range(3):
            A(i)
        for i in range(5):
            B(i)

    p = fastprof.Profile()
    p.runcall(run)
    p.create_stats()
    cc, nc, tt, ct, callers = p.stats[key]
    assert (cc, nc) == (8, 8)
    assert sum(c[1] for c in callers.values()) == 8


def test_dump_stats_takes_what_cprofile_takes(tmp_path) -> None:
    # bytes paths, and targets with no "beside" for the call tree (a link such as
    # /dev/stdout or /proc/self/fd/N): the pstats file is written, no FILE.tree.json
    p = fastprof.Profile()
    p.runcall(rec, 2)
    target = tmp_path / "b.prof"
    p.dump_stats(os.fsencode(target))
    assert pstats.Stats(str(target)).stats[key(rec)][1] == 3
    assert (tmp_path / "b.prof.tree.json").is_file()
    if os.path.isdir("/proc/self/fd"):
        real = tmp_path / "fd.prof"
        with open(real, "wb") as fh:
            p.dump_stats(f"/proc/self/fd/{fh.fileno()}")
        assert pstats.Stats(str(real)).stats[key(rec)][1] == 3
        assert not (tmp_path / "fd.prof.tree.json").exists()
    before = set(os.listdir("/dev"))
    p.dump_stats(os.devnull)
    assert set(os.listdir("/dev")) == before  # no /dev/null.tree.json
    # a descriptor, as open() takes (and closes, as under cProfile)
    p.dump_stats(os.open(tmp_path / "by_fd.prof", os.O_WRONLY | os.O_CREAT))
    assert pstats.Stats(str(tmp_path / "by_fd.prof")).stats[key(rec)][1] == 3


def test_a_long_file_name_gets_its_tree_under_a_short_name(tmp_path, recwarn) -> None:
    """pytest-profiling names a .prof after the test id: up to the 255-byte limit, where
    FILE.tree.json cannot be; the tree goes under FILE cut short and a digest of its name,
    without a warning (which -W error would turn into pytest's INTERNALERROR), and reads back."""
    from fastprof.tree import tree_path

    p = fastprof.Profile()
    p.runcall(rec, 2)
    names = ["a" * 250 + ".prof", "b" * 250 + ".prof", "é" * 120 + ".prof"]
    for name in names:
        p.dump_stats(tmp_path / name)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
    trees = {os.path.basename(tree_path(str(tmp_path / n))) for n in names}
    assert len(trees) == 3 and all(len(os.fsencode(t)) <= 255 for t in trees)
    assert trees <= set(os.listdir(tmp_path))
    for name in names:
        assert fastprof.Stats(str(tmp_path / name)).call_tree() is not None
    assert tree_path("x.prof") == "x.prof.tree.json"


def test_a_tree_that_cannot_be_written_warns_after_the_pstats_file(tmp_path, monkeypatch) -> None:
    from fastprof._tree_file import TreeText
    from fastprof.tree import CallTree

    def refuse(self, path):  # a directory that takes the .prof but not a new file
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(CallTree, "save", refuse)
    monkeypatch.setattr(TreeText, "save", refuse)
    p = fastprof.Profile()
    p.runcall(rec, 1)
    with pytest.warns(RuntimeWarning, match="call tree was not saved"):
        p.dump_stats(tmp_path / "x.prof")
    assert pstats.Stats(str(tmp_path / "x.prof")).stats[key(rec)][1] == 2


def test_the_methods_signatures_name_self() -> None:
    import inspect

    p = fastprof.Profile()
    for name, rest in (("enable", ["subcalls", "builtins"]), ("disable", []), ("clear", [])):
        unbound = inspect.signature(getattr(fastprof.Profile, name))
        assert list(unbound.parameters) == ["self", *rest], name
        unbound.bind(p)  # the unbound method takes the profiler
        assert list(inspect.signature(getattr(p, name)).parameters) == rest, name


def test_a_subclass_getstats_is_what_the_stats_are_built_from(tmp_path) -> None:
    """cProfile builds snapshot_stats (so create_stats, print_stats, dump_stats and
    pstats.Stats(p)) from self.getstats(): a subclass that filters it filters them all."""

    def noise():
        return sum(range(10))

    def work():
        noise()
        return sorted([3, 1, 2])

    results = {}
    for base in (cProfile.Profile, fastprof.Profile):

        class Filtered(base):  # type: ignore[misc,valid-type]
            def getstats(self):
                return [e for e in super().getstats() if getattr(e.code, "co_name", "") != "noise"]

        p = Filtered()
        p.runcall(work)
        st = pstats.Stats(p)
        out = tmp_path / f"{base.__module__}.prof"
        p.dump_stats(out)
        results[base] = (
            {(k[2], v[1]) for k, v in st.stats.items() if "disable" not in k[2]},
            {k[2] for k in pstats.Stats(str(out)).stats},
            {c[2] for c in st.stats[key(work)][4]} if key(work) in st.stats else None,
        )
    mine, theirs = results[fastprof.Profile], results[cProfile.Profile]
    assert ("noise", 1) not in mine[0] and mine[0] == theirs[0]
    assert "noise" not in mine[1]
    assert mine[2] == theirs[2]
    assert not (tmp_path / "fastprof.profile.prof.tree.json").exists()


def test_a_method_called_through_its_type_with_another_type_is_no_call() -> None:
    """str.upper(b"x") is refused by the descriptor before str.upper runs: no call of it is
    counted, and the row keeps its type's name, so bytes.upper's calls stay its own (3.12+
    report the refused call as a CALL event with the bytes object as its first argument)."""
    p = fastprof.Profile()
    p.enable()
    for bad in (b"x", 5, None):
        try:
            str.upper(bad)  # type: ignore[arg-type]
        except TypeError:
            pass
    for _ in range(10):
        "a".upper()
    for _ in range(7):
        b"a".upper()
    str.upper(type("S", (str,), {})("q"))  # a subclass's instance is a call of str.upper
    p.disable()
    p.create_stats()
    rows = {k[2]: v[:2] for k, v in p.stats.items() if "upper" in k[2]}  # type: ignore[attr-defined]
    assert rows == {
        "<method 'upper' of 'str' objects>": (11, 11),
        "<method 'upper' of 'bytes' objects>": (7, 7),
    }
