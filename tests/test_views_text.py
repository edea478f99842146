"""The terminal views: the call tree folded for display (recursion, library internals,
pruning, threads), the table of top functions with paths that tell files apart, colour
rules, and trees as large and as deep as the core makes them."""

from __future__ import annotations

import io
import os
import re
from typing import Any, List

import pytest

from fastprof.report.display import display_tree, library_of, short_paths
from fastprof.report.tree_text import format_tree_report, use_color
from fastprof.tree import CallTree
from view_helpers import KEYS, big_tree, sample_tree

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _tree_lines(text: str) -> List[str]:
    """The call-tree rows of a report, without the figures' padding."""
    return [" ".join(line.split()) for line in text.splitlines()]


def test_library_of() -> None:
    assert library_of(KEYS[0]) is None
    assert library_of(KEYS[3]) == "numpy"
    # a C method is tagged with its package, or "builtins" for Python's own and the stdlib's
    assert library_of(KEYS[5]) == "numpy"
    assert library_of(KEYS[8]) == "builtins"
    for name, lib in (
        ("<method 'mean' of 'numpy.ndarray' objects>", "numpy"),
        ("<built-in method torch._C._nn.linear>", "torch"),
        ("<built-in method sum of torch._C.TensorBase object at 0x7f00>", "torch"),
        ("<method 'append' of 'list' objects>", "builtins"),
        ("<method 'acquire' of '_thread.lock' objects>", "builtins"),
        ("<built-in method _json.scanstring>", "builtins"),
        ("<built-in method time.sleep>", "builtins"),
        ("<built-in method __exit__ of _thread.lock object at 0x7f00>", "builtins"),
        ("<something else>", "builtins"),
    ):
        assert library_of(("~", 0, name)) == lib, name
    assert library_of(("/usr/lib/python3.11/json/decoder.py", 1, "decode")) == "stdlib"
    assert library_of(("<frozen importlib._bootstrap>", 1, "_find")) == "stdlib"
    assert library_of(("/x/lib/python3.12/site-packages/six.py", 1, "f")) == "six"


def test_short_paths_tell_apart_files_of_the_same_name() -> None:
    p = short_paths(
        ["/r/a/__init__.py", "/r/b/__init__.py", "/r/x/util.py", "/s/y/util.py", "/r/main.py", "~"]
    )
    assert p == {
        "/r/a/__init__.py": "a/__init__.py",
        "/r/b/__init__.py": "b/__init__.py",
        "/r/x/util.py": "x/util.py",
        "/s/y/util.py": "y/util.py",
        "/r/main.py": "main.py",
        "~": "~",
    }
    # a lone package __init__ still names its package
    assert short_paths(["/r/pkg/__init__.py"]) == {"/r/pkg/__init__.py": "pkg/__init__.py"}


@pytest.mark.skipif(os.sep != "/" or os.altsep is not None, reason="POSIX paths")
def test_short_paths_split_at_this_systems_separators_only() -> None:
    """On POSIX a backslash is part of a file name (``my\\lib.py``), not a separator."""
    odd = "/p/my\\lib.py"
    assert short_paths([odd]) == {odd: "my\\lib.py"}
    assert short_paths([odd, "/q/lib.py"]) == {odd: "my\\lib.py", "/q/lib.py": "lib.py"}
    t = CallTree.from_raw(1e-3, [(odd, 1, "f")], [(-1, 0, 0, 20, 10, 10)], [1])
    text = format_tree_report(t, min_percent=0)
    assert "└─ f  my\\lib.py:1" in text and "  my\\lib.py:1(f)" in text, text


def test_the_tree_view_names_each_thread_as_speedscope_does() -> None:
    from fastprof.report.speedscope import to_speedscope

    t = sample_tree()
    t.names = {1001: "MainThread", 2002: "worker\x1b[31m"}
    text = format_tree_report(t)
    lines = _tree_lines(text)
    assert "MainThread: thread 1 (id 1001): 71.4% of the run" in lines
    assert "worker\\x1b[31m: thread 2 (id 2002): 28.6% of the run" in lines  # escaped
    assert "\x1b" not in text
    profiles = [p["name"] for p in to_speedscope(t)["profiles"]]
    assert profiles == ["MainThread: thread 1 (id 1001)", "worker\x1b[31m: thread 2 (id 2002)"]
    t.names = {1001: "MainThread"}  # a thread whose name is not known: as before
    assert "thread 2 (id 2002): 28.6% of the run" in _tree_lines(format_tree_report(t))


def test_the_tree_view_of_a_profile_names_its_threads() -> None:
    import threading

    from fastprof import Profile

    def work() -> int:
        return sum(range(1000))

    p = Profile()
    p.enable()
    th = threading.Thread(target=work, name="worker-7")
    th.start()
    th.join()
    work()
    p.disable()
    text = format_tree_report(CallTree.from_profile(p), min_percent=0)
    assert re.search(r"^MainThread: thread \d \(id \d+\): ", text, re.M), text
    # (an ident that a finished thread of the session had too names both: "worker-7, Thread-3")
    m = re.search(rf"^(.*): thread \d+ \(id {th.ident}\): ", text, re.M)
    assert m is not None and "worker-7" in m.group(1).split(", "), text


def test_recursion_folds_into_one_row_with_its_depth() -> None:
    top = display_tree(sample_tree().threads[1001])
    main = top.children[0].children[0]
    fib = [r for r in main.children if r.key == KEYS[2]]
    assert len(fib) == 1
    f = fib[0]
    assert (f.levels, f.ncalls, f.children) == (3, 1 + 2 + 4, [])
    assert f.tottime == pytest.approx(0.300) and f.cumtime == pytest.approx(0.300)


def test_library_internals_fold_into_their_entry_and_user_callbacks_show_below() -> None:
    main = display_tree(sample_tree().threads[1001]).children[0].children[0]
    mean = [r for r in main.children if r.key == KEYS[3]][0]
    # _mean and the ufunc's reduce fold into mean; the callback is user code, shown below
    assert (mean.library, mean.hidden, mean.ncalls) == ("numpy", 2, 100)
    assert mean.tottime == pytest.approx(0.050 + 0.190 + 0.250)
    assert mean.cumtime == pytest.approx(0.500)
    assert [c.key for c in mean.children] == [KEYS[10]]
    expanded = display_tree(sample_tree().threads[1001], expand_libs=True)
    mean = [r for r in expanded.children[0].children[0].children if r.key == KEYS[3]][0]
    assert mean.hidden == 0 and [c.key for c in mean.children] == [KEYS[4]]
    assert [c.key for c in mean.children[0].children] == [KEYS[5], KEYS[10]]


def test_report_text_exactly() -> None:
    text = format_tree_report(sample_tree(), title="T", color=False)
    assert _tree_lines(text) == [
        "T",
        "1333 function calls in 1.400000 seconds (2 threads); the call tree of the paths above "
        "1% of the run, library internals folded (--expand-libs shows them)",
        "",
        "thread 1 (id 1001): 71.4% of the run",
        "total% total self calls call tree",
        "71.4% 1.000s 10.00ms 1 └─ <module> app.py:1",
        "70.7% 990.00ms 25.00ms 1 └─ main app.py:10",
        "35.7% 500.00ms 490.00ms 100 ├─ mean [numpy] +2 frames fromnumeric.py:3500",
        "│ └─ (1 more below 1%: 0.7% together)",
        "21.4% 300.00ms 300.00ms 7 ├─ fib (recursion, 3 levels) app.py:20",
        "7.1% 100.00ms 100.00ms 5 ├─ helper a/__init__.py:1",
        "4.3% 60.00ms 60.00ms 5 ├─ helper b/__init__.py:1",
        "└─ (1 more below 1%: 0.4% together)",
        "",
        "thread 2 (id 2002): 28.6% of the run",
        "total% total self calls call tree",
        "28.6% 400.00ms 100.00ms 1 └─ worker app.py:40",
        "21.4% 300.00ms 300.00ms 3 └─ helper a/__init__.py:1",
        "",
        "top functions by own time (11 of 11 functions)",
        "self% self total calls function",
        "28.6% 400.00ms 400.00ms 8 a/__init__.py:1(helper)",
        "21.4% 300.00ms 300.00ms 7 app.py:20(fib)",
        "17.9% 250.00ms 250.00ms 100 {method 'reduce' of 'numpy.ufunc' objects}",
        "13.6% 190.00ms 450.00ms 100 _methods.py:115(_mean)",
        "7.1% 100.00ms 400.00ms 1 app.py:40(worker)",
        "4.3% 60.00ms 60.00ms 5 b/__init__.py:1(helper)",
        "3.6% 50.00ms 500.00ms 100 fromnumeric.py:3500(mean)",
        "1.8% 25.00ms 990.00ms 1 app.py:10(main)",
        "0.7% 10.00ms 1.000s 1 app.py:1(<module>)",
        "0.7% 10.00ms 10.00ms 10 app.py:50(callback)",
        "0.4% 5.00ms 5.00ms 1000 {built-in method builtins.len}",
    ]


def test_threshold_and_merged_threads() -> None:
    text = format_tree_report(sample_tree(), min_percent=0, threads="merged", top=2)
    lines = _tree_lines(text)
    assert "all threads, summed by path: 100.0% of the run" in lines
    assert "0.4% 5.00ms 5.00ms 1000 │ └─ {built-in method builtins.len} [builtins]" in lines
    assert "0.7% 10.00ms 10.00ms 10 │ │ └─ callback app.py:50" in lines
    assert lines[-3:] == [
        "self% self total calls function",
        "28.6% 400.00ms 400.00ms 8 a/__init__.py:1(helper)",
        "21.4% 300.00ms 300.00ms 7 app.py:20(fib)",
    ]
    high = format_tree_report(sample_tree(), min_percent=50)
    tree_part = _tree_lines(high.split("top functions")[0])
    assert "70.7% 990.00ms 25.00ms 1 └─ main app.py:10" in tree_part
    assert "└─ (5 more below 50%: 68.9% together)" in tree_part
    assert not any("fib" in line for line in tree_part)
    assert tree_part[-3:-1] == ["thread 2 (id 2002): 28.6% of the run", "(below the threshold)"]
    with pytest.raises(ValueError, match="min_percent"):
        format_tree_report(sample_tree(), min_percent=101)
    with pytest.raises(ValueError, match="threads"):
        format_tree_report(sample_tree(), threads="some")


def test_merged_calls_are_reported() -> None:
    t = sample_tree()
    t.merged, t.node_cap = 12, 100
    assert "12 calls merged (node cap 100)" in format_tree_report(t)


def test_colour_rules(monkeypatch: Any) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TERM", raising=False)
    assert use_color("auto", Tty()) and not use_color("auto", io.StringIO())
    assert use_color("always", io.StringIO()) and not use_color("never", Tty())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color("auto", Tty()) and use_color("always", Tty())
    with pytest.raises(ValueError, match="color must be one of auto, always, never"):
        use_color("yes", Tty())
    coloured = format_tree_report(sample_tree(), color=True)
    plain = format_tree_report(sample_tree(), color=False)
    assert "\x1b[" in coloured and "\x1b[" not in plain
    assert _ANSI.sub("", coloured) == plain


def test_a_deep_chain_and_a_100000_node_tree() -> None:
    # a path as deep as a deep recursion: f -> g -> f -> g ... 20,000 frames, no RecursionError
    keys = [("/p/m.py", 1, "f"), ("/p/m.py", 5, "g")]
    depth = 20_000
    nodes = [(i - 1, i % 2, 0, 1, depth - i, 1) for i in range(depth)]
    t = CallTree.from_raw(1e-6, keys, nodes, [7])
    text = format_tree_report(t, min_percent=0)
    assert "... " in text and "more rows" in text  # capped, not 20,000 lines
    # direct recursion 20,000 deep folds to one row
    nodes = [(i - 1, 0, 0, 1, depth - i, 1) for i in range(depth)]
    t = CallTree.from_raw(1e-6, keys, nodes, [7])
    assert "f (recursion, 20000 levels)" in format_tree_report(t)
    big = big_tree(100_000, seed=3)
    text = format_tree_report(big)
    assert text.count("\n") < 600


def test_control_characters_in_names_are_escaped() -> None:
    """A function or file name with an ANSI escape or a newline can neither drive the
    terminal nor break the layout of the tree, the table, callers/callees or a diff."""
    from fastprof.diff import format_diff
    from fastprof.report.callers_text import format_callers
    from fastprof.stats import Stats

    evil = ("/p/\x1b[31mred\n.py", 3, "f\x1b[2Jclear\rx")
    keys = [evil, ("~", 0, "<built-in method \x1b]0;title\x07>")]
    t = CallTree.from_raw(1e-3, keys, [(-1, 0, 0, 1, 10, 5), (0, 1, 0, 2, 5, 5)], [1])
    text = format_tree_report(t, title="t\x1b[0m", color=False, min_percent=0)
    assert "\x1b" not in text and "\r" not in text and "\x07" not in text
    assert "f\\x1b[2Jclear\\rx  \\x1b[31mred\\n.py:3" in text
    assert "{built-in method \\x1b]0;title\\x07}" in text
    assert all(len(line) < 200 for line in text.splitlines())
    st = Stats(
        {evil: (1, 1, 0.005, 0.01, {}), keys[1]: (2, 2, 0.005, 0.005, {evil: (2, 2, 0.005, 0.005)})}
    )
    for which in ("callers", "callees"):
        out = format_callers(st, "clear|title", which)
        assert "\x1b" not in out and "\r" not in out and "\x07" not in out
    d = format_diff({evil: (1, 0.1, 0.2)}, {evil: (2, 0.2, 0.3)}, t, t, names=("a\x1b", "b"))
    assert "\x1b" not in d and "\r" not in d


def test_a_capped_tree_reports_shares_of_the_tables_time() -> None:
    # calls merged at the top level have no node: the header and the shares are of the
    # table's own time, so no function's self% passes 100
    import fastprof
    from fastprof.report.source import totals_of

    ticks = [0]

    def clock() -> int:
        ticks[0] += 1
        return ticks[0]

    def first() -> int:
        return sum(second(i) for i in range(3))

    def second(i: int) -> int:
        return i

    def later() -> int:
        return sum(second(i) for i in range(40))

    prof = fastprof.Profile(clock, 1.0, builtins=False, tree_nodes=2)
    prof.enable()
    first()
    later()  # a new top-level function past the cap: merged, with no caller node
    prof.disable()
    stats = fastprof.Stats(prof)
    tree = prof.tree()
    assert tree.merged > 0 and tree.total_time < stats.total_tt
    text = format_tree_report(tree, totals=totals_of(stats), top=10)
    assert f"in {stats.total_tt:.6f} seconds" in text.splitlines()[0]
    table = text[text.index("self%") :].splitlines()[1:]
    shares = [float(line.split()[0].rstrip("%")) for line in table if line.strip()]
    assert shares and max(shares) <= 100.0 and sum(shares) <= 100.5
