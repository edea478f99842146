"""What the views check before they draw: ``run --html`` is checked (and resolved) before the
script runs, as ``-o`` is, and a report that cannot be written after the run fails the
command; ``view --threads`` refuses a job's merged profile; a call tree beside a pstats file
that was rewritten since is not used; ``compare`` of two call profiles needs no NumPy and
labels builtins as pstats does."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
import textwrap
from typing import Any, List, Tuple

import pytest

from fastprof import Stats, cli
from fastprof.tree import CallTree
from test_cli_run import CHDIR_SCRIPT, run_cli
from view_helpers import KEYS, sample_stats, sample_tree

# -- run --html ------------------------------------------------------------------------------


def _unwritable(tmp_path: Any) -> List[Tuple[str, str]]:
    (tmp_path / "afile").write_text("")
    return [
        (str(tmp_path / "no_such_dir" / "r.html"), "no such directory"),
        (str(tmp_path), "is a directory"),
        (str(tmp_path / "afile" / "r.html"), "not a directory"),
    ]


@pytest.mark.parametrize("which", [0, 1, 2])
def test_unwritable_html_fails_before_the_script_runs(tmp_path: Any, which: int) -> None:
    script = tmp_path / "side.py"
    script.write_text("print('script ran')\nopen('ran.txt', 'w').close()\n")
    target, why = _unwritable(tmp_path)[which]
    r = run_cli(["run", "--html", target, str(script)], cwd=tmp_path)
    assert r.returncode == 2
    assert "script ran" not in r.stdout and not (tmp_path / "ran.txt").exists()
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"fastprof run: error: --html {target}: cannot write the HTML")
    assert why in lines[0]


def test_html_is_resolved_before_the_script_changes_directory(tmp_path: Any) -> None:
    (tmp_path / "mover.py").write_text(CHDIR_SCRIPT)
    r = run_cli(["run", "--html", "r.html", "mover.py"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert not (tmp_path / "elsewhere" / "r.html").exists()


@pytest.mark.parametrize("extra", [[], ["-o", "p.prof"]])
def test_a_report_that_cannot_be_written_after_the_run_fails(tmp_path: Any, extra: Any) -> None:
    """The folder checked before the run is gone when the report is written: one line on
    stderr, and a nonzero exit status (the script's own, else 2)."""
    (tmp_path / "out").mkdir()
    (tmp_path / "s.py").write_text(
        textwrap.dedent("""
            import shutil, sys
            shutil.rmtree("out")
            if sys.argv[1:]:
                sys.exit(int(sys.argv[1]))
        """)
    )
    r = run_cli(["run", *extra, "--html", "out/r.html", "s.py"], cwd=tmp_path)
    assert r.returncode == 2
    assert "fastprof: could not write the report:" in r.stderr and "r.html" in r.stderr
    assert "Traceback" not in r.stderr
    (tmp_path / "out").mkdir()
    r = run_cli(["run", *extra, "--html", "out/r.html", "s.py", "3"], cwd=tmp_path)
    assert r.returncode == 3 and "could not write the report" in r.stderr


@pytest.mark.skipif(
    not os.path.exists("/dev/full"), reason="no /dev/full (a device whose writes fail)"
)
@pytest.mark.parametrize("option", ["--timeline", "--html", "-o"])
def test_a_failed_write_names_the_output_it_was_for(tmp_path: Any, option: str) -> None:
    (tmp_path / "s.py").write_text("print('ran')\n")
    r = run_cli(["run", option, "/dev/full", "s.py"], cwd=tmp_path)
    assert r.returncode == 2 and "ran" in r.stdout
    assert f"could not write the report ({option} /dev/full): [Errno 28]" in r.stderr


# -- view --threads on a job's merged profile -----------------------------------------------


def _save(path: str, stats: Any, tree: CallTree) -> str:
    with open(path, "wb") as f:
        marshal.dump(stats, f)
    tree.save(path + ".tree.json")
    return path


def test_view_threads_refuses_a_merged_profile(tmp_path: Any, capsys: Any) -> None:
    tree = sample_tree()
    tree.processes = True  # as fastprof merge writes it: one root per process
    path = _save(str(tmp_path / "merged.prof"), sample_stats(), tree)
    assert cli.main(["view", path, "--threads"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(f"fastprof view: {path}: --threads reads one process's profile")
    assert "merged over its processes" in line
    assert cli.main(["view", path]) == 0  # its tree, one root per process
    assert "process 1 (pid 1001)" in capsys.readouterr().out


# -- a stale tree beside a rewritten pstats file --------------------------------------------


def test_a_tree_of_another_profile_is_not_used(tmp_path: Any, capsys: Any) -> None:
    path = _save(str(tmp_path / "p.prof"), sample_stats(), sample_tree())
    other = {("/other.py", 1, "<module>"): (1, 1, 0.5, 0.5, {})}
    with open(path, "wb") as f:  # rewritten (by cProfile, say); the tree stays
        marshal.dump(other, f)
    assert cli.main(["view", path]) == 0
    captured = capsys.readouterr()
    (note,) = captured.err.strip().splitlines()
    assert note.startswith(f"fastprof: {path}.tree.json is not the call tree of {path}")
    assert "other.py:1(<module>)" in captured.out and "fib" not in captured.out
    assert "call tree" not in captured.out  # the flat table
    assert cli.main(["view", path, "--format", "collapsed"]) == 2
    assert "needs the call tree" in capsys.readouterr().err
    assert cli.main(["view", path, "--threads"]) == 2
    assert cli.main(["diff", path, path]) == 0
    assert "per call path" not in capsys.readouterr().out


def test_a_tree_of_the_same_functions_with_other_counts_is_not_used(
    tmp_path: Any, capsys: Any
) -> None:
    """pstats.Stats(a).add(b).dump_stats(a), two runs of one script summed in place: the same
    functions, twice the calls; the tree of one run is not the file's."""
    import pstats

    script = tmp_path / "app.py"
    script.write_text("def leaf():\n    return 1\n\nfor _ in range(7):\n    leaf()\n")
    a, b = str(tmp_path / "a.prof"), str(tmp_path / "b.prof")
    for out in (a, b):
        assert cli.main(["run", "-o", out, str(script)]) == 0
    capsys.readouterr()
    assert cli.main(["view", a]) == 0
    assert capsys.readouterr().err == ""  # its own tree
    pstats.Stats(a).add(b).dump_stats(a)
    assert cli.main(["view", a, "-s", "calls"]) == 0
    captured = capsys.readouterr()
    (note,) = captured.err.strip().splitlines()
    assert "functions, call counts or own times differ" in note
    (row,) = [ln for ln in captured.out.splitlines() if "(leaf)" in ln]
    assert row.split()[0] == "14"


def test_a_tree_of_the_same_calls_with_other_times_is_not_used(tmp_path: Any, capsys: Any) -> None:
    """Another run's table written over the file (pstats.Stats(b).dump_stats(a)): the same
    functions and calls, other times; a's tree would show a's times beside b's table."""
    import pstats

    script = tmp_path / "app.py"
    script.write_text("def leaf():\n    return sum(range(50))\n\nfor _ in range(7):\n    leaf()\n")
    a, b = str(tmp_path / "a.prof"), str(tmp_path / "b.prof")
    for out in (a, b):
        assert cli.main(["run", "-o", out, str(script)]) == 0
    capsys.readouterr()
    st = pstats.Stats(b)
    # the same calls, b's times made surely unlike a's
    st.stats = {
        k: (cc, nc, tt * 3 + 1e-3, ct * 3 + 1e-3, callers)
        for k, (cc, nc, tt, ct, callers) in st.stats.items()
    }
    st.dump_stats(a)
    assert cli.main(["view", a]) == 0
    (note,) = capsys.readouterr().err.strip().splitlines()
    assert "own times differ" in note
    stats = Stats(a)
    assert stats.call_tree() is None


def test_a_matching_tree_is_used_with_or_without_an_older_runner_frame(
    tmp_path: Any, capsys: Any
) -> None:
    """Files of earlier versions kept the runner's disable call in the tree only; a tree
    capped by its node limit (merged > 0) holds fewer functions than the table."""
    disable = ("~", 0, "<method 'disable' of 'fastprof.Profile' objects>")
    nodes = [(-1, 0, 0, 1, 1000, 10), (0, 1, 0, 1, 990, 990), (-1, 2, 0, 1, 1, 1)]
    keys = [KEYS[0], KEYS[1], disable]
    old = CallTree.from_raw(0.001, keys, nodes, [1001])
    stats = {
        KEYS[0]: (1, 1, 0.01, 1.0, {}),
        KEYS[1]: (1, 1, 0.99, 0.99, {KEYS[0]: (1, 1, 0.99, 0.99)}),
    }
    path = _save(str(tmp_path / "old.prof"), stats, old)
    assert cli.main(["view", path]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "call tree" in captured.out and "main" in captured.out
    capped = CallTree.from_raw(0.001, keys[:1], nodes[:1], [1001], merged=1)
    path = _save(str(tmp_path / "capped.prof"), stats, capped)
    assert cli.main(["view", path]) == 0
    assert capsys.readouterr().err == ""
    assert not capped.describes({KEYS[1]: 1})  # never more functions than the table
    assert capped.describes({KEYS[0]: 5, KEYS[1]: 1})  # nor more calls
    assert not capped.describes({KEYS[0]: 0, KEYS[1]: 1})


# -- compare of two call profiles -----------------------------------------------------------

_NO_NUMPY = (
    "import sys, runpy\n"
    "sys.modules['numpy'] = None\n"
    "sys.argv = ['fastprof', 'compare'] + sys.argv[1:]\n"
    "runpy.run_module('fastprof', run_name='__main__')\n"
)


def _profile(path: Any, calls: int) -> str:
    stats = {
        ("/app.py", 1, "main"): (1, 1, 0.5, 0.75, {}),
        ("~", 0, "<built-in method builtins.sum>"): (
            calls,
            calls,
            0.25,
            0.25,
            {("/app.py", 1, "main"): (calls, calls, 0.25, 0.25)},
        ),
    }
    with open(path, "wb") as f:
        marshal.dump(stats, f)
    return str(path)


def test_compare_profiles_without_numpy(tmp_path: Any) -> None:
    a, b = _profile(tmp_path / "a.prof", 2), _profile(tmp_path / "b.prof", 5)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    cmd = [sys.executable, "-c", _NO_NUMPY]
    r = subprocess.run(cmd + [a, b], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "{built-in method builtins.sum}" in r.stdout and "app.py:1(main)" in r.stdout
    (tmp_path / "a.json").write_text('{"benchmarks": []}')
    (tmp_path / "b.json").write_text('{"benchmarks": []}')
    j = [str(tmp_path / "a.json"), str(tmp_path / "b.json")]
    r = subprocess.run(cmd + j, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("fastprof compare: comparing benchmark runs (JSON) needs NumPy:")
    assert "pip install fastprof[kernels]" in line


def test_compare_labels_builtins_as_pstats_does(tmp_path: Any, capsys: Any) -> None:
    a, b = _profile(tmp_path / "a.prof", 2), _profile(tmp_path / "b.prof", 5)
    assert cli.main(["compare", a, b, "--by", "calls"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[-2].endswith("  {built-in method builtins.sum}")  # the largest change of calls
    assert "<built-in" not in "\n".join(rows)
    assert cli.main(["view", a, "-s", "calls"]) == 0  # the same label as view's
    assert "{built-in method builtins.sum}" in capsys.readouterr().out


def test_compare_pairs_a_script_cprofile_named_as_typed(tmp_path: Any, capsys: Any) -> None:
    """cProfile keeps the script's path as typed (app.py), fastprof its absolute path: compare
    pairs them, as diff does, one row a function."""
    import cProfile

    script = tmp_path / "app.py"
    script.write_text("def leaf():\n    return 1\n\nfor _ in range(3):\n    leaf()\n")
    old, new = str(tmp_path / "c.prof"), str(tmp_path / "f.prof")
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        cProfile.run(compile(script.read_text(), "app.py", "exec"), old)
    finally:
        os.chdir(here)
    assert cli.main(["run", "-o", new, str(script)]) == 0
    capsys.readouterr()
    assert cli.main(["compare", old, new, "--all"]) == 0
    rows = [r for r in capsys.readouterr().out.splitlines() if "app.py:1(leaf)" in r]
    assert len(rows) == 1 and rows[0].split()[:2] == ["3", "3"]
    assert "gone" not in rows[0] and "new" not in rows[0]


def test_compare_offers_the_statistics_the_benchmarks_compute() -> None:
    pytest.importorskip("numpy")
    from fastprof import compare
    from fastprof.bench.sample_stats import COMPARABLE

    assert compare._STATS == COMPARABLE


def test_diff_and_compare_match_c_functions_named_with_an_address(
    tmp_path: Any, capsys: Any
) -> None:
    """cProfile names some C functions with their object's address ('<built-in method
    __new__ of type object at 0x...>', mypyc's '<function f at 0x...>'), another in every
    run: the same function of two runs is one row, not 'gone' and 'new'."""
    script = tmp_path / "addr.py"
    script.write_text("class C:\n    pass\n\nfor _ in range(9):\n    object.__new__(C)\n")
    a, b = str(tmp_path / "a.prof"), str(tmp_path / "b.prof")
    for out in (a, b):
        assert cli.main(["run", "-o", out, str(script)]) == 0
    import marshal

    with open(b, "rb") as fh:  # the other run's address, as a new process gets another
        stats = marshal.load(fh)
    moved = {}
    for (file, line, name), v in stats.items():
        if " at 0x" in name:
            name = name[: name.index(" at 0x")] + " at 0xdeadbeef>"
        moved[(file, line, name)] = v
    with open(b, "wb") as fh:
        marshal.dump(moved, fh)
    capsys.readouterr()
    assert cli.main(["diff", "--top", "10000", a, b]) == 0  # every row, whatever the noise
    out = capsys.readouterr().out
    assert "(gone)" not in out and "(new)" not in out
    assert "{built-in method __new__ of type object}" in out
    assert cli.main(["compare", a, b]) == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if "__new__" in ln]
    assert len(rows) == 1 and rows[0].split()[:2] == ["9", "9"]
