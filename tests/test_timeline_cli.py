"""`python -m fastprof run --timeline OUT.json`: the Chrome trace beside the usual report, its
structure, its counts against the saved profile, the ring's and the minimum duration's
options, and the usage errors."""

from __future__ import annotations

import collections
import json
import os
import textwrap
import time
from typing import Any, Dict

import pytest

from test_cli_run import load, run_cli
from timeline_helpers import chrome_trace_problems

SCRIPT = textwrap.dedent("""
    import sys
    import threading

    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    def work():
        fib(6)

    t = threading.Thread(target=work, name="worker")
    t.start()
    t.join()
    fib(8)
    if sys.argv[1:] == ["raise"]:
        raise ValueError("the script failed")
    if len(sys.argv) > 1:
        raise SystemExit(int(sys.argv[1]))
""")


def _x_counts(data: Dict[str, Any], file: str) -> Dict[str, int]:
    """Calls per function of file among the trace's spans."""
    c: Dict[str, int] = collections.Counter()
    for e in data["traceEvents"]:
        if e["ph"] == "X" and e.get("args", {}).get("file", "").endswith(file):
            c[e["name"]] += 1
    return dict(c)


def test_timeline_file_beside_the_report(tmp_path: Any) -> None:
    (tmp_path / "s.py").write_text(SCRIPT)
    r = run_cli(["run", "--timeline", "t.json", "-o", "p.prof", "s.py"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "timeline of" in r.stderr and "t.json" in r.stderr
    data = json.loads((tmp_path / "t.json").read_text())
    assert chrome_trace_problems(data) == []
    tracks = {e["tid"] for e in data["traceEvents"] if e["ph"] == "X"}
    assert len(tracks) == 2
    assert data["otherData"]["dropped"] == 0
    # the timeline's calls are the saved profile's
    prof = {
        k[2]: v[1] for k, v in load(tmp_path / "p.prof").items() if k[0].endswith(os.sep + "s.py")
    }
    assert _x_counts(data, os.sep + "s.py") == prof
    assert prof["fib"] == 25 + 67


def test_timeline_still_prints_the_table(tmp_path: Any) -> None:
    (tmp_path / "s.py").write_text(SCRIPT)
    r = run_cli(["run", "--timeline", "t.json", "-s", "calls", "s.py"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "fib" in r.stdout and "function calls" in r.stdout


def test_timeline_buffer_and_min(tmp_path: Any) -> None:
    (tmp_path / "s.py").write_text(SCRIPT)
    r = run_cli(["run", "--timeline", "t.json", "--timeline-buffer", "7", "s.py"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    data = json.loads((tmp_path / "t.json").read_text())
    assert sum(e["ph"] == "X" for e in data["traceEvents"]) == 7
    assert data["otherData"]["dropped"] > 0
    assert "fastprof: timeline of 7 calls written to " in r.stderr and "t.json; " in r.stderr
    assert " calls dropped, the oldest: see --timeline-buffer" in r.stderr
    r = run_cli(["run", "--timeline", "m.json", "--timeline-min-us", "1e9", "s.py"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    data = json.loads((tmp_path / "m.json").read_text())
    assert sum(e["ph"] == "X" for e in data["traceEvents"]) == 0
    assert data["otherData"]["too_short"] > 90


BACKGROUND = """\
import threading, time
started = threading.Event()
def leaf():
    time.sleep(0.3)
def worker():
    started.set()
    leaf()
threading.Thread(target=worker, name="bg").start()
started.wait()
def f():
    pass
f()
"""


def test_kept_and_dropped_add_up_with_a_thread_open_at_the_end(tmp_path: Any) -> None:
    """A thread still in leaf() when the script ends has its open calls closed after the
    runner's disable(): the counts of a small ring add up to a large ring's all the same."""
    (tmp_path / "s.py").write_text(BACKGROUND)
    seen = {}
    for buffer in (1_000_000, 1, 2):
        r = run_cli(
            ["run", "--timeline", "t.json", "--timeline-buffer", str(buffer), "s.py"],
            cwd=tmp_path,
        )
        assert r.returncode == 0, r.stderr
        other = json.loads((tmp_path / "t.json").read_text())["otherData"]
        seen[buffer] = (other["python_spans"], other["dropped"], other["filtered"])
    (kept, dropped, filtered) = seen[1_000_000]
    assert dropped == 0 and filtered == 0 and kept > 10
    assert seen[1] == (1, kept - 1, 0) and seen[2] == (2, kept - 2, 0)


@pytest.mark.parametrize("arg, status", [("3", 3), ("raise", 1)])
def test_timeline_written_when_the_script_fails(tmp_path: Any, arg: str, status: int) -> None:
    (tmp_path / "s.py").write_text(SCRIPT)
    r = run_cli(["run", "--timeline", "t.json", "s.py", arg], cwd=tmp_path)
    assert r.returncode == status
    if arg == "raise":
        assert "ValueError: the script failed" in r.stderr
    data = json.loads((tmp_path / "t.json").read_text())
    assert chrome_trace_problems(data) == []
    assert _x_counts(data, os.sep + "s.py")["fib"] == 92


@pytest.mark.parametrize(
    "args, words",
    [
        (["--timeline-buffer", "5"], "need --timeline"),
        (["--timeline-min-us", "5"], "need --timeline"),
        (["--timeline", "t.json", "--timeline-buffer", "0"], "--timeline-buffer"),
        (["--timeline", "t.json", "--timeline-min-us", "-1"], "--timeline-min-us"),
        (["--timeline", "t.json", "--clock", "cpu"], "wall clock"),
        (["--timeline", "t.json", "--lines"], "does not yet combine"),
        (["--timeline", "nowhere/t.json"], "--timeline nowhere/t.json: cannot write"),
        (
            ["--timeline", "t.json", "--timeline-buffer", str(2**40)],
            f"--timeline-buffer: expected at most {2**40 - 1} spans (2**40 - 1), got {2**40}",
        ),
    ],
)
def test_timeline_usage_errors(tmp_path: Any, args: Any, words: str) -> None:
    (tmp_path / "s.py").write_text("open('ran', 'w').close()\n")
    r = run_cli(["run", *args, "s.py"], cwd=tmp_path)
    assert r.returncode == 2
    assert words in r.stderr and "Traceback" not in r.stderr
    assert not os.path.exists(tmp_path / "ran")


@pytest.mark.skipif(
    "libasan" in os.environ.get("LD_PRELOAD", ""),
    reason="AddressSanitizer aborts on an allocation this large instead of failing it",
)
def test_timeline_buffer_beyond_memory_is_a_usage_error(tmp_path: Any) -> None:
    (tmp_path / "s.py").write_text("open('ran', 'w').close()\n")
    size = 2**40 - 1  # the most the core takes: tens of terabytes
    r = run_cli(
        ["run", "--timeline", "t.json", "--timeline-buffer", str(size), "s.py"], cwd=tmp_path
    )
    assert r.returncode == 2, r.stderr
    assert f"--timeline-buffer {size}: not enough memory for a ring of that many spans" in r.stderr
    assert "Traceback" not in r.stderr and not os.path.exists(tmp_path / "ran")


FORKS = """
import os, time

def parent_work():
    return sum(range(100))

def child_work():
    return sum(range(200))

pid = os.fork()
if pid == 0:
    child_work()
    time.sleep(0.3)  # ends after the parent: its write would come last
else:
    parent_work()
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_fork_child_that_runs_on_leaves_the_runs_timeline(tmp_path: Any) -> None:
    """A child of os.fork that runs on to the script's end no longer overwrites the file
    with its own trace: the file is the run's process's, as with multiprocessing's."""
    (tmp_path / "s.py").write_text(FORKS)
    r = run_cli(["run", "--timeline", "t.json", "s.py"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    time.sleep(0.6)  # the child outlives the run's process
    data = json.loads((tmp_path / "t.json").read_text())
    counts = _x_counts(data, os.sep + "s.py")
    assert counts.get("parent_work") == 1 and "child_work" not in counts, counts
    assert r.stderr.count("timeline of ") == 1, r.stderr
