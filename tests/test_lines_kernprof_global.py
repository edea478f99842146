"""``from line_profiler import profile`` (line_profiler 4.1 and later) under ``fastprof run
--lines``: the script records what ``kernprof -l`` records (fastprof._kernprof_global)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any, Dict, List, Tuple

import pytest

line_profiler = pytest.importorskip(
    "line_profiler", reason="line_profiler is not installed (the test extra has it)"
)

from profile_helpers import env_with_package  # noqa: E402

SCRIPT = """\
from line_profiler import profile

@profile
def work(n):
    s = 0
    for i in range(n):
        s += i
    return s

def plain(n):
    return n

for k in (3, 5):
    work(k)
plain(1)
"""


def _hits(table: str) -> Dict[Tuple[str, int], int]:
    """{(function, line): hits} of a kernprof table (line_profiler's and fastprof's)."""
    out: Dict[Tuple[str, int], int] = {}
    func = ""
    for ln in table.splitlines():
        if ln.startswith("Function: "):
            func = ln.split()[1]
            continue
        parts = ln.split()
        if func and len(parts) > 2 and parts[0].isdigit() and parts[1].isdigit():
            out[(func, int(parts[0]))] = int(parts[1])
    return out


def _python(args: List[str], cwd: Any) -> str:
    """The standard output of ``python ARGS`` run in cwd with this fastprof importable."""
    r = subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=env_with_package(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_script_records_what_kernprof_records(tmp_path: Any) -> None:
    path = tmp_path / "s.py"
    path.write_text(SCRIPT)
    ours = _python(["-m", "fastprof", "run", "--lines", str(path)], tmp_path)
    theirs = _python(["-m", "kernprof", "-l", "-v", str(path)], tmp_path)
    hits = _hits(ours)
    assert hits == _hits(theirs), (ours, theirs)
    assert hits[("work", 6)] == 10 and hits[("work", 5)] == 2  # 3 + 5 loop tests, 2 calls
    assert not any(f == "plain" for f, _ in hits)


def test_without_lines_the_decorator_is_line_profilers_own(tmp_path: Any) -> None:
    """Only --lines points it: a plain run leaves line_profiler's profile as it is (off, so
    the function is returned as it is)."""
    path = tmp_path / "s.py"
    path.write_text(
        SCRIPT + "print('same', work.__code__ is work.__wrapped__.__code__ "
        "if hasattr(work, '__wrapped__') else 'plain')\n"
    )
    out = _python(["-m", "fastprof", "run", "-s", "calls", str(path)], tmp_path)
    assert "same plain" in out
    assert "Timer unit" not in out


def test_an_in_process_run_puts_line_profilers_state_back(tmp_path: Any) -> None:
    from fastprof import cli

    gp = line_profiler.profile
    before = (gp._profile, gp.enabled, list(sys.meta_path))
    path = tmp_path / "t.py"
    path.write_text(textwrap.dedent(SCRIPT))
    assert cli.main(["run", "--lines", "-o", str(tmp_path / "t.lprof"), str(path)]) == 0
    assert (gp._profile, gp.enabled, list(sys.meta_path)) == before
    from fastprof.lines import load_stats

    timings = load_stats(str(tmp_path / "t.lprof")).timings
    assert [k[2] for k in timings] == ["work"]


def test_a_finder_waits_for_the_import_when_line_profiler_is_not_imported_yet() -> None:
    from fastprof import _kernprof_global

    saved = sys.modules.pop("line_profiler")
    marker = object()
    try:
        undo = _kernprof_global.redirect(marker)
        assert any(isinstance(f, _kernprof_global._Finder) for f in sys.meta_path)
        undo()
        assert not any(isinstance(f, _kernprof_global._Finder) for f in sys.meta_path)
    finally:
        sys.modules["line_profiler"] = saved
    gp = saved.profile
    state = (gp._profile, gp.enabled)
    undo = _kernprof_global.redirect(marker)  # imported already: pointed at once
    assert gp._profile is marker and gp.enabled is True
    undo()
    assert (gp._profile, gp.enabled) == state
