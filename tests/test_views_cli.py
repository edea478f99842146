"""The views on the command line: ``run`` prints the call tree when the profiler records one
(``-s`` keeps cProfile's flat table), ``-o`` saves the tree beside the pstats file, ``view``
reads it (or shows the flat views without it), ``--callers``/``--callees``, the exports
(speedscope, folded stacks, callgrind, HTML) and ``fastprof diff``."""

from __future__ import annotations

import json
import marshal
import os
import re
import subprocess
import sys
import textwrap
from typing import Any, Dict, List, Tuple

import pytest

from fastprof import cli
from fastprof.report import source
from fastprof.stats import Stats
from fastprof.tree import CallTree
from view_helpers import KEYS, sample_stats, sample_tree


@pytest.fixture
def saved(tmp_path: Any) -> str:
    """A saved profile of the sample, with its call tree beside it."""
    path = str(tmp_path / "a.prof")
    with open(path, "wb") as f:
        marshal.dump(sample_stats(), f)
    sample_tree().save(path + ".tree.json")
    return path


def _out(capsys: Any) -> str:
    return capsys.readouterr().out


def test_view_prints_the_call_tree_when_saved_beside_the_profile(saved: str, capsys: Any) -> None:
    assert cli.main(["view", saved, "--color", "always"]) == 0
    out = _out(capsys)
    assert "\x1b[" in out  # --color always, even into a pipe
    assert cli.main(["view", saved]) == 0
    out = _out(capsys)
    assert "\x1b[" not in out  # auto: not a terminal
    assert out.startswith(f"fastprof: {saved}\n1333 function calls in 1.400000 seconds (2 threads)")
    assert "fib (recursion, 3 levels)  app.py:20" in out
    assert "mean  [numpy] +2 frames  fromnumeric.py:3500" in out
    assert "top functions by own time" in out
    assert cli.main(["view", saved, "--expand-libs", "--min-percent", "0"]) == 0
    out = _out(capsys)
    assert "_mean  [numpy]  _methods.py:115" in out and "callback  app.py:50" in out


def test_view_with_a_sort_key_or_without_a_tree_prints_the_flat_table_as_before(
    saved: str, capsys: Any
) -> None:
    expected = Stats.load(saved).sort("cumulative").table(40, title=f"fastprof: {saved}")
    assert cli.main(["view", saved, "-s", "cumulative"]) == 0
    assert _out(capsys) == expected
    os.unlink(saved + ".tree.json")
    assert cli.main(["view", saved]) == 0
    assert _out(capsys) == Stats.load(saved).sort("tottime").table(40, title=f"fastprof: {saved}")


def test_view_callers_and_callees(saved: str, capsys: Any) -> None:
    assert cli.main(["view", saved, "--callers", r"__init__\.py", "--callees", r"\(main\)"]) == 0
    out = _out(capsys).splitlines()
    assert out[0] == "callers of a/__init__.py:1(helper): 8 calls, own 0.400000 s, total 0.400000 s"
    assert [" ".join(x.split()) for x in out[2:4]] == [
        "3 0.300000 0.300000 app.py:40(worker)",
        "5 0.100000 0.100000 app.py:10(main)",
    ]
    assert out[5] == "callers of b/__init__.py:1(helper): 5 calls, own 0.060000 s, total 0.060000 s"
    i = out.index("callees of app.py:10(main): 1 calls, own 0.025000 s, total 0.990000 s")
    callees = [x.split()[-1] for x in out[i + 2 : i + 7]]
    assert callees == [
        "fromnumeric.py:3500(mean)",
        "app.py:20(fib)",
        "a/__init__.py:1(helper)",
        "b/__init__.py:1(helper)",
        "builtins.len}",
    ]
    assert cli.main(["view", saved, "--callers", "nothing_like_it"]) == 0
    assert _out(capsys) == "no function matches 'nothing_like_it'\n"
    assert cli.main(["view", saved, "--callers", "("]) == 2
    assert "not a regular expression" in capsys.readouterr().err


def test_view_exports(saved: str, tmp_path: Any, capsys: Any) -> None:
    assert cli.main(["view", saved, "--format", "collapsed"]) == 0
    lines = _out(capsys).splitlines()
    app = KEYS[0][0]
    assert f"<module> ({app}:1);main ({app}:10) 25000000" in lines
    assert f"worker ({app}:40);helper (/home/user/proj/a/__init__.py:1) 300000000" in lines
    # every path's own time is there once: the total is the run's own time, in nanoseconds
    assert sum(int(x.rsplit(" ", 1)[1]) for x in lines) == 1_400_000_000
    out = str(tmp_path / "s.json")
    assert cli.main(["view", saved, "--format", "speedscope", "-o", out]) == 0
    assert "speedscope written to" in capsys.readouterr().err
    doc = json.load(open(out))
    assert len(doc["profiles"]) == 2 and doc["profiles"][0]["endValue"] == pytest.approx(1.0)
    cg = str(tmp_path / "cg.out")
    assert cli.main(["view", saved, "--format", "callgrind", "-o", cg]) == 0
    assert open(cg).read().startswith("# callgrind format")
    copy = str(tmp_path / "copy.prof")
    assert cli.main(["view", saved, "--format", "pstats", "-o", copy]) == 0
    assert Stats.load(copy).to_dict() == Stats.load(saved).to_dict()
    assert CallTree.load(copy + ".tree.json").to_dict() == sample_tree().to_dict()
    html = str(tmp_path / "r.html")
    assert cli.main(["view", saved, "--html", html]) == 0
    assert "fastprof-data" in open(html).read()
    with pytest.raises(SystemExit) as e:
        cli.main(["view", saved, "--format", "pstats"])
    assert e.value.code == 2 and "give -o FILE" in capsys.readouterr().err
    os.unlink(saved + ".tree.json")
    assert cli.main(["view", saved, "--format", "collapsed"]) == 2
    assert "needs the call tree" in capsys.readouterr().err


# The required fields of speedscope's published schema
# (https://www.speedscope.app/file-format-schema.json): File, Frame, EventedProfile, events.
_REQUIRED = {
    "file": ["$schema", "profiles", "shared"],
    "frame": ["name"],
    "evented": ["endValue", "events", "name", "startValue", "type", "unit"],
    "event": ["at", "frame", "type"],
}
_UNITS = {"none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"}


def check_speedscope(doc: Dict[str, Any]) -> None:
    """Checks a speedscope document against the schema's required fields and the format's
    rules: frames indexed, events balanced and in time order, closing what they opened."""
    assert all(k in doc for k in _REQUIRED["file"])
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = doc["shared"]["frames"]
    assert all(all(k in f for k in _REQUIRED["frame"]) for f in frames)
    for p in doc["profiles"]:
        assert all(k in p for k in _REQUIRED["evented"]) and p["type"] == "evented"
        assert p["unit"] in _UNITS
        stack: List[int] = []
        last = p["startValue"]
        for e in p["events"]:
            assert all(k in e for k in _REQUIRED["event"])
            assert 0 <= e["frame"] < len(frames) and e["at"] >= last
            last = e["at"]
            if e["type"] == "O":
                stack.append(e["frame"])
            else:
                assert e["type"] == "C" and stack.pop() == e["frame"]
        assert stack == [] and last <= p["endValue"]


def test_speedscope_document_follows_the_schema() -> None:
    from fastprof.report.speedscope import to_speedscope
    from view_helpers import big_tree

    doc = to_speedscope(sample_tree())
    check_speedscope(doc)
    names = [doc["shared"]["frames"][e["frame"]]["name"] for e in doc["profiles"][0]["events"]]
    assert names[:4] == ["<module>", "main", "fib", "fib"]
    ev = doc["profiles"][0]["events"]
    # <module> opens first and closes last, after its total time
    assert ev[0]["at"] == 0 and ev[-1]["frame"] == ev[0]["frame"]
    assert ev[-1]["at"] == pytest.approx(1.0)
    check_speedscope(to_speedscope(big_tree(5000, seed=5, threads=3)))
    # totals that round past their parent's still give time-ordered events
    keys = [("/p/m.py", 1, "f"), ("/p/m.py", 2, "g")]
    t = CallTree.from_raw(
        0.1, keys, [(-1, 0, 0, 1, 3, 0), (0, 1, 0, 1, 2, 2), (0, 1, 0, 1, 2, 2)], [1]
    )
    check_speedscope(to_speedscope(t))


PROG = textwrap.dedent("""
    def work(n):
        return sum(range(n))

    for _ in range(3):
        work(100)
""")


@pytest.fixture
def prog(tmp_path: Any) -> str:
    p = tmp_path / "prog.py"
    p.write_text(PROG)
    return str(p)


def _fake_tree(monkeypatch: Any) -> None:
    monkeypatch.setattr(source, "tree_of", lambda prof: sample_tree())


def test_run_prints_the_call_tree_when_there_is_one(
    prog: str, monkeypatch: Any, capsys: Any
) -> None:
    _fake_tree(monkeypatch)
    assert cli.main(["run", prog]) == 0
    out = _out(capsys)
    assert out.startswith(f"fastprof: {prog} (wall clock)\n")
    # the calls are the profile's (the script's), the time the (stand-in) tree's
    assert "function calls in 1.400000 seconds (2 threads)" in out
    assert "fib (recursion, 3 levels)" in out
    # the table under the tree is the profile's own (pstats) numbers: the script's work()
    assert "prog.py:2(work)" in out
    # -s keeps cProfile's meaning: the flat table
    assert cli.main(["run", "-s", "cumulative", prog]) == 0
    out = _out(capsys)
    assert "sorted by cumulative" in out and "ncalls" in out and "call tree" not in out


def test_the_flat_table_of_s_has_the_flat_tables_rows(tmp_path: Any, capsys: Any) -> None:
    """-s prints the flat table, whose default is 40 rows, not the 15 of the table under the
    call tree (which -s replaces)."""
    script = tmp_path / "many.py"
    script.write_text("".join(f"def f{i}():\n    pass\nf{i}()\n" for i in range(60)))
    assert cli.main(["run", "-s", "calls", str(script)]) == 0
    out = _out(capsys)
    shown = re.findall(r"many\.py:\d+\(f\d+\)", out)
    assert len(shown) == 40 - 2  # exec and <module> take two of the 40 rows
    assert re.search(r"\n40 of \d+ functions, sorted by calls", out)
    assert cli.main(["run", "-s", "calls", "--top", "7", str(script)]) == 0
    assert re.search(r"\n7 of \d+ functions", _out(capsys))


def test_run_without_a_tree_prints_the_flat_table(prog: str, monkeypatch: Any, capsys: Any) -> None:
    monkeypatch.setattr(source, "tree_of", lambda prof: None)
    assert cli.main(["run", prog]) == 0
    out = _out(capsys)
    assert "sorted by tottime" in out and "prog.py:2(work)" in out


def test_run_saves_the_tree_beside_the_profile(
    prog: str, tmp_path: Any, monkeypatch: Any, capsys: Any
) -> None:
    from fastprof import _tree_file

    out = str(tmp_path / "p.prof")
    html = str(tmp_path / "p.html")
    assert cli.main(["run", "-o", out, "--html", html, prog]) == 0
    err = capsys.readouterr().err
    assert f"its call tree to {out}.tree.json" in err and f"HTML report written to {html}" in err
    saved = CallTree.load(out + ".tree.json")
    assert isinstance(saved.wall, float)  # the run's wall time, for view --threads
    (root,) = saved.threads.values()
    (ex,) = root.children  # the runner's own disable is not in it
    (mod,) = ex.children
    (work,) = [c for c in mod.children if c.key[2] == "work"]
    assert (work.ncalls, [(c.key[2], c.ncalls) for c in work.children]) == (
        3,
        [("<built-in method builtins.sum>", 3)],
    )
    st = Stats.load(out)
    assert saved.describes({r.key: r.ncalls for r in st.rows})  # view shows it with this file
    assert any(k[0] == prog and k[2] == "work" for k in st.to_dict())
    assert "fastprof-data" in open(html).read()
    # a later run without a tree leaves no stale tree beside the new file
    monkeypatch.setattr(_tree_file, "tree_text", lambda prof, **kw: None)
    assert cli.main(["run", "-o", out, prog]) == 0
    assert not os.path.exists(out + ".tree.json")


def test_run_formats(prog: str, tmp_path: Any, monkeypatch: Any, capsys: Any) -> None:
    _fake_tree(monkeypatch)
    assert cli.main(["run", "--format", "collapsed", prog]) == 0
    lines = _out(capsys).splitlines()
    assert sum(int(x.rsplit(" ", 1)[1]) for x in lines) == 1_400_000_000
    sp = str(tmp_path / "x.speedscope.json")
    assert cli.main(["run", "--format", "speedscope", "-o", sp, prog]) == 0
    check_speedscope(json.load(open(sp)))
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "--min-percent", "101", prog])
    assert e.value.code == 2 and "between 0 and 100, got '101'" in capsys.readouterr().err


def test_run_html_with_line_timings(tmp_path: Any, capsys: Any) -> None:
    p = tmp_path / "lp.py"
    p.write_text(
        "@profile\ndef f():\n    x = 0\n    for i in range(10):\n        x += i\n"
        "    return x\n\nf()\n"
    )
    html = str(tmp_path / "l.html")
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert cli.main(["run", "--lines", "--html", html, str(p)]) == 0
    assert [str(w.message) for w in seen] == []
    text = open(html).read()
    import re

    data = json.loads(re.search(r'id="fastprof-data">(.*?)</script>', text, re.S).group(1))
    (fn,) = data["lines"]
    assert fn["name"] == "f" and [r[0] for r in fn["rows"]] == [3, 4, 5, 6]
    assert [r[1] for r in fn["rows"]] == [1, 11, 10, 1]


def _save(path: str, stats: Dict[Any, Any], tree: CallTree) -> None:
    with open(path, "wb") as f:
        marshal.dump(stats, f)
    tree.save(path + ".tree.json")


def test_diff_per_function_and_per_path(saved: str, tmp_path: Any, capsys: Any) -> None:
    from view_helpers import NODES, SPT, THREADS

    nodes: List[Tuple[int, ...]] = [list(n) for n in NODES]  # type: ignore[misc]
    nodes[9][4] += 300  # a/__init__ helper under main: 300 ms slower
    nodes[9][5] += 300
    for i in (1, 0):
        nodes[i][4] += 300
    b_tree = CallTree.from_raw(SPT, KEYS, [tuple(n) for n in nodes], THREADS)
    b_stats = dict(sample_stats())
    cc, nc, tt, ct, callers = b_stats[KEYS[6]]
    b_stats[KEYS[6]] = (cc, nc, tt + 0.3, ct + 0.3, callers)
    for k in (KEYS[1], KEYS[0]):
        cc, nc, tt, ct, callers = b_stats[k]
        b_stats[k] = (cc, nc, tt, ct + 0.3, callers)
    b = str(tmp_path / "b.prof")
    _save(b, b_stats, b_tree)
    assert cli.main(["diff", saved, b, "--top", "3"]) == 0
    out = [" ".join(x.split()) for x in _out(capsys).splitlines()]
    i = out.index("calls d calls tottime d tottime cumtime d cumtime function")
    assert out[i + 1 : i + 4] == [
        "8 +0 0.700000 +0.300000 0.700000 +0.300000 a/__init__.py:1(helper)",
        "1 +0 0.010000 +0.000000 1.300000 +0.300000 app.py:1(<module>)",
        "1 +0 0.025000 +0.000000 1.290000 +0.300000 app.py:10(main)",
    ]
    j = out.index("calls d calls tottime d tottime cumtime d cumtime path")
    # equal changes: the shorter path first
    assert out[j + 1 : j + 4] == [
        "1 +0 0.010000 +0.000000 1.300000 +0.300000 app.py:1(<module>)",
        "1 +0 0.025000 +0.000000 1.290000 +0.300000 app.py:1(<module>) > app.py:10(main)",
        "5 +0 0.400000 +0.300000 0.400000 +0.300000 app.py:1(<module>) > app.py:10(main) > "
        "a/__init__.py:1(helper)",
    ]
    html = str(tmp_path / "d.html")
    assert cli.main(["diff", saved, b, "--html", html]) == 0
    text = open(html).read()
    assert '"diff":true' in text
    assert cli.main(["diff", saved, str(tmp_path / "missing.prof")]) == 2
    assert "missing.prof" in capsys.readouterr().err


def test_run_export_errors_are_reported_after_the_run(
    prog: str, tmp_path: Any, monkeypatch: Any, capsys: Any
) -> None:
    monkeypatch.setattr(source, "tree_of", lambda prof: None)
    assert cli.main(["run", "--format", "speedscope", prog]) == 2  # the export failed
    assert "--format speedscope needs the call tree" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:  # found before the script runs
        cli.main(["run", "--format", "pstats", prog])
    assert e.value.code == 2 and "give -o FILE" in capsys.readouterr().err


def test_text_format_to_a_file(saved: str, tmp_path: Any, capsys: Any) -> None:
    out = tmp_path / "tree.txt"
    assert cli.main(["view", saved, "--format", "text", "-o", str(out)]) == 0
    assert _out(capsys) == ""
    assert "fib (recursion, 3 levels)" in out.read_text()


def test_parsing_run_loads_none_of_the_views(tmp_path: Any) -> None:
    """The views load when they print, after the script ran: a script's own imports of json
    or sysconfig show in its profile, as under cProfile."""
    import subprocess
    import sys

    code = (
        "import sys, fastprof.cli as c; c._run_parser().parse_args(['--html', 'x', 'p.py']);"
        "print(sorted(m for m in ('json', 'sysconfig', 'fastprof.tree', "
        "'fastprof.report.tree_text', 'fastprof.report.display', 'fastprof.report.html') "
        "if m in sys.modules))"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_diff_matches_files_named_two_ways() -> None:
    """A file that only one profile names is matched to the other's by the longest common
    path ending, when unique and holding a function of the same line and name."""
    from fastprof.diff import match_files

    a = [("s.py", 1, "f"), ("s.py", 5, "g"), ("/x/lib/util.py", 3, "h"), ("~", 0, "<len>")]
    b = [
        ("/home/u/proj/s.py", 1, "f"),  # cProfile's "s.py" run from /home/u/proj
        ("/y/lib/util.py", 3, "h"),  # another checkout
        ("/y/other/util.py", 3, "h"),  # ... beside a file of the same name: lib/ decides
        ("~", 0, "<len>"),
    ]
    assert match_files(a, b) == {"s.py": "/home/u/proj/s.py", "/x/lib/util.py": "/y/lib/util.py"}
    # no function in common, or two equal candidates: left apart
    assert match_files([("s.py", 2, "q")], [("/p/s.py", 1, "f")]) == {}
    assert match_files([("s.py", 1, "f")], [("/p/s.py", 1, "f"), ("/q/s.py", 1, "f")]) == {}


def test_diff_of_a_cprofile_run_and_a_fastprof_run(tmp_path: Any) -> None:
    """python -m cProfile -o records the script as typed (s.py), fastprof run -o by its
    absolute path: the diff shows the script's functions as one row each, not gone and new."""
    (tmp_path / "s.py").write_text("def work():\n    return sum(range(1000))\n\nwork()\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    for cmd in (
        [sys.executable, "-m", "cProfile", "-o", "c.prof", "s.py"],
        [sys.executable, "-m", "fastprof", "run", "-o", "f.prof", "s.py"],
    ):
        subprocess.run(cmd, cwd=tmp_path, env=env, check=True, capture_output=True, timeout=120)
    r = subprocess.run(
        [sys.executable, "-m", "fastprof", "diff", "c.prof", "f.prof", "--top", "1000"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if "s.py:1(work)" in line]
    assert rows and not any("(new)" in x or "(gone)" in x for x in rows), r.stdout
