"""fastprof's own call of ``disable()``, which ends a run's profile, is in none of what the run
gives back: not in ``run -o``'s call tree file (so neither in the speedscope and folded-stack
exports made from it), not in a job's merged tree, not in ``run --timeline``'s trace, not in
``%fastprof``'s ``stats`` and ``tree``; a call of it made by the profiled code is kept."""

from __future__ import annotations

import json
import textwrap
from typing import Any, List, Tuple

import pytest

from fastprof import cli
from fastprof._runstats import is_disable
from fastprof.stats import Stats
from fastprof.tree import CallTree, tree_path
from test_cli_run import load, run_cli

SCRIPT = textwrap.dedent("""
    def leaf(n):
        return sum(range(n))

    def work():
        for _ in range(50):
            leaf(2000)

    work()
""")

DISABLE = ("~", 0, "<method 'disable' of 'fastprof.Profile' objects>")


def _runner_keys(keys: Any) -> List[Any]:
    return [k for k in keys if is_disable(k)]


def _saved_run(tmp_path: Any, *extra: str) -> Tuple[Any, Any]:
    (tmp_path / "s.py").write_text(SCRIPT)
    r = run_cli(["run", *extra, "-o", "p.prof", "s.py"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return tmp_path / "p.prof", r


def test_run_o_saves_a_tree_without_the_runners_disable(tmp_path: Any) -> None:
    prof, _ = _saved_run(tmp_path)
    stats = load(prof)
    assert _runner_keys(stats) == []
    tree = CallTree.load(tree_path(str(prof)))
    assert _runner_keys(n.key for n in tree.nodes()) == []
    # the tree holds exactly the table's functions, with the same calls
    totals = tree.function_totals()
    assert set(totals) == set(stats)
    assert {k: v[0] for k, v in totals.items()} == {k: v[1] for k, v in stats.items()}


def test_exports_of_a_saved_run_leave_the_runner_out(tmp_path: Any, capsys: Any) -> None:
    prof, _ = _saved_run(tmp_path)
    capsys.readouterr()
    assert cli.main(["view", str(prof), "--format", "collapsed"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and not any("disable" in line for line in lines)
    # the folded stacks hold the profile's own time: pstats' total_tt, to the nanosecond
    # each line is rounded to
    total_ns = sum(int(line.rpartition(" ")[2]) for line in lines)
    assert abs(total_ns - Stats.load(str(prof)).total_tt * 1e9) <= 0.5 * len(lines) + 0.5
    assert cli.main(["view", str(prof), "--format", "speedscope"]) == 0
    frames = json.loads(capsys.readouterr().out)["shared"]["frames"]
    assert not any("disable" in f["name"] for f in frames)
    assert {f["name"] for f in frames} >= {"work", "leaf", "<built-in method builtins.sum>"}


def test_a_jobs_merged_tree_leaves_the_runner_out(tmp_path: Any) -> None:
    prof, _ = _saved_run(tmp_path, "--subprocesses")
    assert _runner_keys(load(prof)) == []
    tree = CallTree.load(tree_path(str(prof)))
    assert tree.processes
    assert _runner_keys(n.key for n in tree.nodes()) == []
    assert set(tree.function_totals()) == set(load(prof))


def test_run_timeline_leaves_the_runner_out(tmp_path: Any) -> None:
    (tmp_path / "s.py").write_text(SCRIPT)
    r = run_cli(["run", "--timeline", "t.json", "-o", "p.prof", "s.py"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert not any("disable" in e["name"] for e in spans)
    assert f"timeline of {len(spans)} calls written" in r.stderr
    # one span per call of the saved profile (exec, <module>, work, leaf x50, sum x50)
    assert len(spans) == sum(v[1] for v in load(tmp_path / "p.prof").values()) == 103


@pytest.mark.parametrize(
    "options, kept, dropped, too_short",
    [
        (["--timeline-buffer", "5"], 5, 98, 0),  # the last 5 of the script's 103 calls
        (["--timeline-min-us", "1000000"], 0, 0, 103),  # every one of the script's calls
    ],
)
def test_run_timeline_counts_leave_the_runner_out(
    tmp_path: Any, options: List[str], kept: int, dropped: int, too_short: int
) -> None:
    (tmp_path / "s.py").write_text(SCRIPT)
    r = run_cli(["run", "--timeline", "t.json", *options, "s.py"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    data = json.loads((tmp_path / "t.json").read_text())
    assert sum(e["ph"] == "X" for e in data["traceEvents"]) == kept
    other = data["otherData"]
    assert (other["dropped"], other["too_short"]) == (dropped, too_short)
    assert other["buffer_size"] == (5 if "--timeline-buffer" in options else 1_000_000)


def test_run_timeline_of_a_script_ending_in_os_exit_keeps_the_buffers_size(
    tmp_path: Any,
) -> None:
    """os._exit's gate stops the profile from C, with no call of disable() to take the
    ring's slot kept for it: the timeline still keeps the last N calls, and counts the rest."""
    (tmp_path / "s.py").write_text(SCRIPT + "import os\nos._exit(0)\n")
    r = run_cli(
        ["run", "--timeline", "t.json", "--timeline-buffer", "5", "-o", "p.prof", "s.py"],
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    data = json.loads((tmp_path / "t.json").read_text())
    spans = [e for e in data["traceEvents"] if e["ph"] == "X"]
    calls = sum(v[1] for v in load(tmp_path / "p.prof").values())
    assert len(spans) == 5 and data["otherData"]["dropped"] == calls - 5
    assert not any("disable" in e["name"] for e in spans)
    # the spans left stay in the trace's order: by thread, then start, parents first
    order = [(e["tid"], e["ts"], -e["dur"]) for e in spans]
    assert order == sorted(order)


def test_a_scripts_own_call_of_disable_is_kept(tmp_path: Any) -> None:
    """A call of disable made by the script (on a profiler of its own, never enabled) has a
    caller: kept in the table and the tree, as in the table before."""
    (tmp_path / "s.py").write_text(
        "import fastprof\ndef inner():\n    fastprof.Profile().disable()\ninner()\n"
    )
    r = run_cli(["run", "-o", "p.prof", "s.py"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    stats = load(tmp_path / "p.prof")
    (mine,) = _runner_keys(stats)
    assert [k[2] for k in stats[mine][4]] == ["inner"]
    tree = CallTree.load(str(tmp_path / "p.prof.tree.json"))
    (node,) = [n for n in tree.nodes() if n.key == mine]
    assert node.parent is not None and node.parent.key is not None
    assert node.parent.key[2] == "inner"


# -- the helpers, on records made by hand --------------------------------------------------

KEYS = [("/a.py", 1, "main"), DISABLE, ("/a.py", 5, "leaf")]


def test_own_records_renumber_the_parents_after_a_dropped_record() -> None:
    from fastprof._runstats import own_records

    # (parent, func, thread, ncalls, tt, it): disable ended thread 0 before thread 1's nodes
    nodes = [
        (-1, 0, 0, 1, 10, 5),
        (0, 2, 0, 3, 5, 5),
        (-1, 1, 0, 1, 1, 1),  # the runner's disable: top level, no children
        (-1, 0, 1, 1, 8, 4),
        (3, 2, 1, 2, 4, 4),
        (0, 1, 0, 1, 1, 1),  # disable called from main: kept
    ]
    out = own_records(KEYS, nodes)
    assert out == [
        (-1, 0, 0, 1, 10, 5),
        (0, 2, 0, 3, 5, 5),
        (-1, 0, 1, 1, 8, 4),
        (2, 2, 1, 2, 4, 4),
        (0, 1, 0, 1, 1, 1),
    ]
    tree = CallTree.from_raw(1.0, KEYS, out, [7, 8])
    assert tree.function_totals()[KEYS[2]][0] == 5
    # the common case: the runner's record is the last one, or there is none
    assert own_records(KEYS, nodes[:3]) == nodes[:2]
    two = nodes[:2]
    assert own_records(KEYS, two) is two
    assert own_records(KEYS[:1], [(-1, 0, 0, 1, 1, 1)]) == [(-1, 0, 0, 1, 1, 1)]


def test_own_tree_drops_only_a_top_level_disable_without_children() -> None:
    from fastprof._runstats import own_tree

    nodes = [(-1, 0, 0, 1, 10, 5), (0, 1, 0, 1, 1, 1), (-1, 1, 0, 1, 2, 2)]
    tree = own_tree(CallTree.from_raw(1.0, KEYS, nodes, [7]))
    assert tree is not None
    (root,) = tree.roots()
    assert [c.key for c in root.children] == [KEYS[0]]
    assert root.cumtime == 10.0
    assert [n.key for n in tree.nodes()] == [KEYS[0], DISABLE]  # the one main called
    assert own_tree(None) is None


# -- %fastprof ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ip() -> Any:
    pytest.importorskip("IPython", reason="IPython is not installed (the test extra has it)")
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "fastprof")
    shell.run_cell(
        "import sys\n"
        "def fprof_rf(n):\n"
        "    return n if n < 2 else fprof_rf(n - 1) + fprof_rf(n - 2)\n"
        "def fprof_quits(code):\n"
        "    fprof_rf(5)\n"
        "    sys.exit(code)\n"
    )
    return shell


def test_magic_stats_and_text_agree_without_the_disable_row(ip: Any) -> None:
    r = ip.run_line_magic("fastprof", "fprof_rf(8)")
    keys = {row.key for row in r.stats.rows}
    assert _runner_keys(keys) == []
    assert r.tree is not None and set(r.tree.function_totals()) == keys
    # the text's table counts the functions r.stats holds
    assert f"({len(keys)} of {len(keys)} functions)" in r.text()
    assert "disable" not in r.text() and "disable" not in r.html()


def test_magic_shows_the_profile_of_code_that_raised_system_exit(ip: Any, capsys: Any) -> None:
    r = ip.run_line_magic("fastprof", "fprof_quits(3)")
    out = capsys.readouterr().out
    assert "*** SystemExit exception caught in code being profiled." in out
    assert {row.name for row in r.stats.rows} >= {"fprof_quits", "fprof_rf"}
    assert "fprof_quits" in r.text()
