"""The notebook magics through IPython's own shell: %load_ext fastprof, %fastprof,
%%fastprof and %flprun, with exact counts; the result shows as text in a terminal and as the
HTML report in a notebook."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

IPython = pytest.importorskip("IPython", reason="IPython is not installed (the test extra has it)")

from fastprof.report import source  # noqa: E402
from view_helpers import sample_tree  # noqa: E402


@pytest.fixture(scope="module")
def ip() -> Iterator[Any]:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "fastprof")
    shell.run_cell(
        "def fprof_work(n):\n"
        "    total = 0\n"
        "    for i in range(n):\n"
        "        total += i\n"
        "    return total\n"
    )
    yield shell


def _row(result: Any, name: str) -> Any:
    (row,) = [r for r in result.stats.rows if r.name == name]
    return row


def test_line_magic_profiles_one_statement(ip: Any) -> None:
    r = ip.run_line_magic("fastprof", "[fprof_work(10) for _ in range(3)]")
    assert _row(r, "fprof_work").ncalls == 3
    text = repr(r)
    assert "fprof_work" in text
    import html
    import re

    m = re.match(r'<iframe srcdoc="([^"]*)"', r._repr_html_())
    assert m is not None and html.unescape(m.group(1)) == r.html()  # the report, inline
    assert "fastprof-data" in r.html()


def test_cell_magic_profiles_the_cell_with_its_options(ip: Any, tmp_path: Any) -> None:
    out = tmp_path / "cell.html"
    r = ip.run_cell_magic(
        "fastprof",
        f"-s cumulative --top 5 --html {out}",
        "fprof_work(5)\nfprof_work(6)\nx_from_cell = 1\n",
    )
    assert _row(r, "fprof_work").ncalls == 2
    assert ip.user_ns["x_from_cell"] == 1  # the cell ran in the user's namespace
    text = r.text()
    assert "sorted by cumulative" in text  # -s: cProfile's flat table
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_the_results_stats_keep_the_per_thread_data(ip: Any, tmp_path: Any) -> None:
    import threading

    r = ip.run_line_magic("fastprof", "fprof_work(3)")
    names = [t.name for t in r.stats.threads()]
    assert names == [threading.current_thread().name]
    assert r.stats.for_thread(names[0]).row("fprof_work").ncalls == 1
    r.stats.dump(str(tmp_path / "m.prof"))
    assert (tmp_path / "m.prof.tree.json").exists()  # view shows the tree of the saved file


def test_call_tree_shown_when_the_core_records_one(ip: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(source, "tree_of", lambda prof: sample_tree())
    r = ip.run_line_magic("fastprof", "--min-percent 0 --expand-libs fprof_work(3)")
    text = r.text()
    assert "fib (recursion, 3 levels)" in text and "_mean  [numpy]" in text
    assert "fprof_work" in text.split("top functions by own time")[1]


def test_bad_options_are_usage_errors(ip: Any) -> None:
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="unknown sort key 'bogus'"):
        ip.run_line_magic("fastprof", "-s bogus fprof_work(1)")
    with pytest.raises(UsageError, match="--min-percent: expected a number between 0 and 100"):
        ip.run_line_magic("fastprof", "--min-percent 200 fprof_work(1)")
    with pytest.raises(UsageError, match="give a statement"):
        ip.run_line_magic("fastprof", "")
    with pytest.raises(UsageError, match="at least one function"):
        ip.run_line_magic("flprun", "fprof_work(1)")
    with pytest.raises(UsageError, match="-f no_such_function: could not evaluate"):
        ip.run_line_magic("flprun", "-f no_such_function fprof_work(1)")


def test_an_error_in_the_statement_leaves_no_profiler_on(ip: Any) -> None:
    import sys

    before = sys.getprofile()
    with pytest.raises(ZeroDivisionError):
        ip.run_line_magic("fastprof", "1 / 0")
    assert sys.getprofile() is before
    if hasattr(sys, "monitoring"):
        assert sys.monitoring.get_tool(2) is None  # the profiler tool id is given back


def test_flprun_times_each_line(ip: Any) -> None:
    r = ip.run_line_magic("flprun", "-f fprof_work fprof_work(4)")
    ((key, rows),) = r.stats.timings.items()
    assert key[2] == "fprof_work"
    hits = {ln - key[1]: h for ln, h, _ in rows}
    assert hits == {1: 1, 2: 5, 3: 4, 4: 1}
    assert "total += i" in r.text()
    assert "fastprof-data" in r.html() and r._repr_html_().startswith("<iframe")


def test_flprun_m_imports_the_module_by_name_as_lprun(ip: Any) -> None:
    from IPython.core.error import UsageError

    # colorsys is not a name in the shell's namespace: -m imports it, as %lprun -m does
    assert "colorsys" not in ip.user_ns
    r = ip.run_line_magic("flprun", '-m colorsys __import__("colorsys").rgb_to_hsv(.1, .2, .3)')
    timed = {key[2] for key, rows in r.stats.timings.items() if rows}
    assert timed == {"rgb_to_hsv"}
    r = ip.run_line_magic("flprun", "-m email.utils __import__('email.utils').utils.formatdate(0)")
    assert "formatdate" in {key[2] for key, rows in r.stats.timings.items() if rows}
    with pytest.raises(UsageError, match="-m no_such_module_x: could not import it"):
        ip.run_line_magic("flprun", "-m no_such_module_x fprof_work(1)")


def test_cell_magic_runs_the_statement_on_its_line_first(ip: Any) -> None:
    ip.user_ns["order"] = []
    r = ip.run_cell_magic("fastprof", "order.append('line')", "order.append('cell')\n")
    assert ip.user_ns["order"] == ["line", "cell"]  # as %%prun
    (append,) = [row for row in r.stats.rows if "append" in row.name]
    assert append.ncalls == 2
    with pytest.raises(NameError):  # the line's statement is run, not dropped
        ip.run_cell_magic("fastprof", "no_such_name_here()", "pass\n")


def test_ipythons_own_syntax_runs_as_under_prun(ip: Any) -> None:
    r = ip.run_cell_magic(
        "fastprof", "", "    echoed = !echo hi\n    %time fprof_work(3)\n    fprof_work(2)\n"
    )
    assert list(ip.user_ns["echoed"]) == ["hi"]  # !cmd, a %magic line, an indented cell
    assert _row(r, "fprof_work").ncalls == 2
    ip.run_line_magic("fastprof", "listed = !echo a")
    assert list(ip.user_ns["listed"]) == ["a"]


@pytest.mark.parametrize("exc", ["KeyboardInterrupt", "SystemExit"])
def test_an_interrupt_still_shows_what_ran(ip: Any, capsys: Any, exc: str) -> None:
    """As %lprun: Ctrl-C or SystemExit in the profiled code ends the run, and the timings of
    what ran come back, with the line that says why.  %fastprof, as %prun, catches
    SystemExit; Ctrl-C shows what ran, then fails the cell (a notebook's queued cells are not
    run), and no fastprof frame is in the profile."""
    import sys

    ip.run_cell(f"def fprof_stop(n):\n    fprof_work(n)\n    raise {exc}()\n")
    r = ip.run_line_magic("flprun", "-f fprof_work fprof_stop(4)")
    ((key, rows),) = r.stats.timings.items()
    assert {ln - key[1]: h for ln, h, _ in rows} == {1: 1, 2: 5, 3: 4, 4: 1}
    shown: list = []
    import IPython.display

    real_display = IPython.display.display
    IPython.display.display = lambda obj: shown.append(obj)
    try:
        if exc == "KeyboardInterrupt":
            with pytest.raises(KeyboardInterrupt):
                ip.run_line_magic("fastprof", "fprof_stop(3)")
            (p,) = shown
        else:
            p = ip.run_line_magic("fastprof", "fprof_stop(3)")
            assert shown == []
    finally:
        IPython.display.display = real_display
    assert _row(p, "fprof_work").ncalls == 1 and _row(p, "fprof_stop").ncalls == 1
    names = {row.name for row in p.stats.rows}  # exec: as %prun's runctx shows it
    assert names == {"<built-in method builtins.exec>", "<module>", "fprof_stop", "fprof_work"}
    out = capsys.readouterr().out
    assert out.count(f"*** {exc} exception caught in code being profiled.") == 2
    assert sys.getprofile() is None or "fastprof" not in type(sys.getprofile()).__module__


def test_the_statement_runs_as_written_and_the_kernels_threads_stay_out(ip: Any) -> None:
    """No $name or {expr} expansion (as %prun), and by default the thread running the code
    alone: a thread already running (a kernel's I/O loop) is in --threads only."""
    import threading
    import time

    ip.user_ns["a"] = 7
    ip.user_ns["time"] = time
    ip.run_line_magic("fastprof", "s1 = {a, 1}; u1 = '{a} $a'.format(a='x')")
    assert ip.user_ns["s1"] == {7, 1} and ip.user_ns["u1"] == "x $a"
    stop = threading.Event()
    started = threading.Event()

    def kernel_loop() -> None:
        started.set()
        while not stop.is_set():
            time.sleep(0.001)

    t = threading.Thread(target=kernel_loop, name="kernel-io")
    t.start()
    started.wait()
    try:
        own = ip.run_line_magic("fastprof", "[time.sleep(0.01) for _ in range(3)]")
        every = ip.run_line_magic("fastprof", "--threads [time.sleep(0.01) for _ in range(3)]")
    finally:
        stop.set()
        t.join()
    assert [th.name for th in own.stats.threads()] == [threading.current_thread().name]
    assert "kernel-io" in [th.name for th in every.stats.threads()]
    sleeps = [r for r in own.stats.rows if "sleep" in r.name]
    assert sleeps[0].ncalls == 3


def test_titles_name_the_magic_and_flprun_prints_microseconds(ip: Any, tmp_path: Any) -> None:
    r = ip.run_cell_magic("fastprof", "", "import math\nfprof_work(2)\n")
    assert r.title == "%%fastprof"
    lines = ip.run_line_magic(
        "flprun",
        f"-f fprof_work -s -D {tmp_path / 'w.lprof'} -T {tmp_path / 'w.txt'} fprof_work(2)",
    )
    assert lines.title == "%flprun -f fprof_work fprof_work(2)"
    assert "Timer unit: 1e-06 s" in lines.text()
    assert (tmp_path / "w.txt").read_text() == lines.text()
    from fastprof.lines import load_stats

    assert load_stats(str(tmp_path / "w.lprof")).timings == lines.stats.timings
    ns = ip.run_line_magic("flprun", "-u 1e-9 -f fprof_work fprof_work(2)")
    assert "Timer unit: 1e-09 s" in ns.text()
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="-u: expected a number at least 0"):
        ip.run_line_magic("flprun", "-u -1 -f fprof_work fprof_work(2)")


def test_sort_keys_given_again_sort_by_each_in_turn(ip: Any) -> None:
    r = ip.run_line_magic("fastprof", "-s ncalls -s name [fprof_work(1) for _ in range(2)]")
    assert r._sort == ("ncalls", "name")
    text = r.text()
    assert "sorted by" in text
    r = ip.run_line_magic("fastprof", "--top 1 --top 3 fprof_work(1)")
    assert r._top == 3  # the later value, as on a command line


def test_prun_options_dump_text_quiet_return_and_limit(ip: Any, tmp_path: Any, capsys: Any) -> None:
    """%prun's -D, -T, -q, -r and -l, as a %prun user types them."""
    import pstats

    prof, txt = tmp_path / "p.prof", tmp_path / "p.txt"
    r = ip.run_line_magic("fastprof", f"-D {prof} -T {txt} fprof_work(5)")
    out = capsys.readouterr().out
    assert f"*** Profile stats marshalled to file {str(prof)!r}." in out
    assert f"*** Profile printout saved to text file {str(txt)!r}." in out
    (key,) = [k for k in pstats.Stats(str(prof)).stats if k[2] == "fprof_work"]
    assert pstats.Stats(str(prof)).stats[key][1] == 1
    assert txt.read_text() == r.text() and "fprof_work" in r.text()
    assert ip.run_line_magic("fastprof", "-q fprof_work(2)") is None
    kept = ip.run_line_magic("fastprof", "-q -r fprof_work(2)")
    assert _row(kept, "fprof_work").ncalls == 1
    code = "[sorted([3, 1]) for _ in range(2)]; [len('ab') for _ in range(3)]; fprof_work(2)"
    one = ip.run_line_magic("fastprof", f"-l 1 -s calls {code}")
    rows = [ln for ln in one.text().splitlines() if "builtins.len" in ln or "(fprof_work)" in ln]
    assert len(rows) == 1 and "builtins.len" in rows[0]  # the one row with the most calls
    half = ip.run_line_magic("fastprof", f"-l 0.5 -s calls {code}")
    assert half._top == -(-len(half.stats.rows) // 2)
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="-l: expected a number of rows or a fraction"):
        ip.run_line_magic("fastprof", "-l work fprof_work(1)")
