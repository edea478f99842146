"""Line timings files (.lprof): read without running code (a restricted unpickler), line
profiler's files read, fastprof's read by line_profiler, `fastprof view FILE.lprof`."""

from __future__ import annotations

import builtins
import io
import os
import pickle
import subprocess
import sys
import textwrap
from typing import Any, List, Tuple

import pytest

from fastprof import cli
from fastprof.lines import LineProfiler, LineStats, load_stats

# --- crafted pickles that would run code ------------------------------------------------------


class _Reduce:
    """Pickles as a call of func(*args)."""

    def __init__(self, func: Any, *args: Any) -> None:
        self.func, self.args = func, args

    def __reduce__(self) -> Tuple[Any, ...]:
        return self.func, self.args


def _crafted(marker: str) -> List[Tuple[str, bytes]]:
    """(name, pickle) of files that, unpickled by pickle.load, create marker."""
    touch = f"open({marker!r}, 'w').close()"
    stats = {"timings": {("a.py", 1, "f"): [(2, 1, 5)]}, "unit": 1e-6}
    return [
        ("os.system", pickle.dumps(_Reduce(os.system, f"touch {marker}"))),
        ("builtins.exec", pickle.dumps(_Reduce(builtins.exec, touch))),
        ("builtins.eval", pickle.dumps(_Reduce(builtins.eval, f"exec({touch!r})"), protocol=0)),
        (
            "inside the timings",
            pickle.dumps(
                {"timings": {("a.py", 1, "f"): [_Reduce(builtins.exec, touch)]}, "unit": 1e-6}
            ),
        ),
        ("as the unit", pickle.dumps(dict(stats, unit=_Reduce(builtins.exec, touch)))),
        ("GLOBAL opcode, protocol 0", f"cos\nsystem\n(Vtouch {marker}\ntR.".encode()),
        ("INST opcode", f"(Vtouch {marker}\nios\nsystem\n.".encode()),
        ("getattr chain", b"\x80\x04cbuiltins\ngetattr\n\x8c\x08builtins\x8c\x04exec\x86R."),
        ("subprocess", pickle.dumps(_Reduce(subprocess.call, ["touch", marker]))),
        (
            "reconstructor of another class",
            b"ccopy_reg\n_reconstructor\n(cos\nsystem\nc__builtin__\nobject\nNtR.",
        ),
    ]


def test_crafted_pickles_run_nothing(tmp_path: Any) -> None:
    marker = str(tmp_path / "ran")
    # each one does run code when unpickled by pickle.load (what load_stats did)
    for name, data in _crafted(marker)[:2]:
        try:
            pickle.loads(data)
        except Exception:
            pass
        assert os.path.exists(marker), name
        os.remove(marker)
    for name, data in _crafted(marker):
        path = tmp_path / "evil.lprof"
        path.write_bytes(data)
        with pytest.raises(ValueError, match=r"evil\.lprof") as err:
            load_stats(path)
        assert not os.path.exists(marker), name
        assert "\n" not in str(err.value)


def test_refused_globals_are_named(tmp_path: Any) -> None:
    path = tmp_path / "evil.lprof"
    path.write_bytes(pickle.dumps(_Reduce(os.system, "true")))
    with pytest.raises(
        ValueError,
        match=r"evil\.lprof: not a line timings file .*names "
        r"posix\.system; only LineStats and plain data",
    ):
        load_stats(path)


def test_view_of_a_crafted_lprof_runs_nothing(tmp_path: Any, capsys: Any) -> None:
    marker = str(tmp_path / "ran")
    path = tmp_path / "evil.lprof"
    path.write_bytes(pickle.dumps(_Reduce(os.system, f"touch {marker}")))
    assert cli.main(["view", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"fastprof view: {path}: ")
    assert not os.path.exists(marker)


# --- malformed files ---------------------------------------------------------------------------

KEY = ("/src/mod.py", 3, "work")
BAD = [
    ("empty", b""),
    ("not a pickle", b"hello"),
    ("truncated", pickle.dumps({"timings": {KEY: [(4, 1, 2)]}, "unit": 1e-6})[:20]),
    ("a list", pickle.dumps([1, 2])),
    ("no unit", pickle.dumps({"timings": {}})),
    ("unit is a str", pickle.dumps({"timings": {}, "unit": "1e-6"})),
    ("unit is zero", pickle.dumps({"timings": {}, "unit": 0.0})),
    ("unit is NaN", pickle.dumps({"timings": {}, "unit": float("nan")})),
    ("timings are a list", pickle.dumps({"timings": [], "unit": 1e-6})),
    ("key is a str", pickle.dumps({"timings": {"f": []}, "unit": 1e-6})),
    ("key line negative", pickle.dumps({"timings": {("a", -1, "f"): []}, "unit": 1e-6})),
    ("rows are a dict", pickle.dumps({"timings": {KEY: {}}, "unit": 1e-6})),
    ("row of two", pickle.dumps({"timings": {KEY: [(4, 1)]}, "unit": 1e-6})),
    ("negative hits", pickle.dumps({"timings": {KEY: [(4, -1, 2)]}, "unit": 1e-6})),
    ("NaN time", pickle.dumps({"timings": {KEY: [(4, 1, float("nan"))]}, "unit": 1e-6})),
    ("huge line", pickle.dumps({"timings": {KEY: [(10**18, 1, 2)]}, "unit": 1e-6})),
    ("deep nesting", b"\x80\x04" + b"]" * 100000 + b"."),
    ("deep row", pickle.dumps({"timings": {KEY: [[[[[[[[[[[1]]]]]]]]]]]}, "unit": 1e-6})),
    ("persistent id", b"\x80\x04\x8c\x01x\x94Q."),
]


@pytest.mark.parametrize("name,data", BAD, ids=[b[0] for b in BAD])
def test_malformed_lprof_gives_one_line(name: str, data: bytes, tmp_path: Any, capsys: Any) -> None:
    path = tmp_path / "bad.lprof"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=r"bad\.lprof"):
        load_stats(path)
    assert cli.main(["view", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"fastprof view: {path}")


def test_directory_and_missing_lprof(tmp_path: Any, capsys: Any) -> None:
    (tmp_path / "d.lprof").mkdir()
    for path in (tmp_path / "d.lprof", tmp_path / "missing.lprof"):
        assert cli.main(["view", str(path)]) == 2
        assert capsys.readouterr().err.count("\n") == 1


# --- line_profiler's files and fastprof's, both ways -------------------------------------------


def _work(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def test_line_profiler_files_load(tmp_path: Any) -> None:
    line_profiler = pytest.importorskip("line_profiler")
    lp = line_profiler.LineProfiler(_work)
    lp.runcall(_work, 5)
    path = tmp_path / "theirs.lprof"
    lp.dump_stats(str(path))
    ours = load_stats(path)
    theirs = lp.get_stats()
    assert ours.timings == theirs.timings and ours.unit == theirs.unit
    hits = {ln: h for ln, h, _ in ours.timings[(__file__, _work.__code__.co_firstlineno, "_work")]}
    first = _work.__code__.co_firstlineno
    assert hits[first + 1] == 1 and hits[first + 3] == 5 and hits[first + 4] == 1


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_line_profiler_stats_of_every_protocol_load(protocol: int, tmp_path: Any) -> None:
    line_profiler = pytest.importorskip("line_profiler")
    stats = line_profiler.LineStats({("a.py", 1, "f"): [(2, 3, 4)]}, 1e-6)
    path = tmp_path / "p.lprof"
    path.write_bytes(pickle.dumps(stats, protocol))
    assert load_stats(path) == LineStats({("a.py", 1, "f"): [(2, 3, 4)]}, 1e-6)


def test_fastprof_files_load_in_line_profiler_and_back(tmp_path: Any) -> None:
    line_profiler = pytest.importorskip("line_profiler")
    lp = LineProfiler(_work, _timer=iter(range(0, 10**6, 10)).__next__, _timer_unit=1e-6)
    with lp:
        _work(4)
    path = tmp_path / "ours.lprof"
    lp.dump_stats(path)
    theirs = line_profiler.load_stats(str(path))
    assert theirs.timings == lp.get_stats().timings and theirs.unit == 1e-6
    assert load_stats(path) == lp.get_stats()
    out = io.StringIO()
    line_profiler.show_text(theirs.timings, theirs.unit, stream=out)
    assert "Function: _work" in out.getvalue()


def test_view_shows_line_timings(tmp_path: Any, capsys: Any) -> None:
    src = tmp_path / "prog.py"
    src.write_text(
        textwrap.dedent("""\
        def f(n):
            s = 0
            for i in range(n):
                s += i
            return s
        """)
    )
    stats = LineStats({(str(src), 1, "f"): [(2, 1, 10), (3, 4, 20), (4, 3, 30), (5, 1, 40)]}, 1e-6)
    path = tmp_path / "prog.lprof"
    path.write_bytes(pickle.dumps(stats, 4))
    assert cli.main(["view", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Timer unit: 1e-06 s\n\nTotal time: 0.0001 s\n")
    assert f"File: {src}\nFunction: f at line 1\n" in out
    assert "     3         4         20.0      5.0     20.0      for i in range(n):" in out
    assert "     5         1         40.0     40.0     40.0      return s" in out
    assert cli.main(["view", str(path), "--unit", "1e-3", "--summarize"]) == 0
    out = capsys.readouterr().out
    assert "     3         4          0.0      0.0     20.0" in out
    assert out.rstrip().endswith(" - f")
    assert cli.main(["view", str(path), "--callgrind", str(tmp_path / "x")]) == 2
    assert "--callgrind needs a call profile" in capsys.readouterr().err


def test_view_finds_a_pickle_without_the_extension(tmp_path: Any, capsys: Any) -> None:
    path = tmp_path / "timings.out"
    path.write_bytes(pickle.dumps(LineStats({("nowhere.py", 1, "g"): [(2, 7, 70)]}, 1e-6), 4))
    assert cli.main(["view", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Could not find file nowhere.py" in out
    assert "     2         7         70.0     10.0    100.0  " in out


def test_a_source_shorter_than_the_function_keeps_the_header(tmp_path: Any, capsys: Any) -> None:
    """The file is there but ends before the function's lines (it was shortened since the
    run): the block still names the file and the function, as line_profiler's does, and
    lists the lines that ran."""
    src = tmp_path / "short.py"
    src.write_text("x = 1\n")
    path = tmp_path / "t.lprof"
    LineStats({(str(src), 40, "gone"): [(41, 3, 30)]}, 1e-6).to_file(path)
    assert cli.main(["view", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"File: {src}" in out and "Function: gone at line 40" in out
    assert "Could not find file" not in out
    assert "    41         3         30.0     10.0    100.0  " in out


def test_view_of_line_timings_escapes_names_and_reads_no_device(tmp_path: Any, capsys: Any) -> None:
    timings = {
        ("/dev/zero", 1, "z"): [(1, 1, 1)],
        ("evil\x1b[31m.py", 10**6, "f\x1b]0;t\x07\n"): [(10**6 + 5, 2, 3), (2**31 - 1, 1, 1)],
    }
    path = tmp_path / "evil.lprof"
    path.write_bytes(pickle.dumps(LineStats(timings, 1e-6), 4))
    assert cli.main(["view", str(path), "--summarize"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "Could not find file evil\\x1b[31m.py" in out and "f\\x1b]0;t\\x07\\n" in out
    assert "Could not find file /dev/zero" in out  # a device is never read
    assert len(out.splitlines()) < 60  # the rows that ran, not a block of 2**31 lines


def test_view_as_a_process(tmp_path: Any) -> None:
    path = tmp_path / "p.lprof"
    path.write_bytes(pickle.dumps(LineStats({("nowhere.py", 1, "g"): [(2, 7, 70)]}, 1e-6), 4))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run(
        [sys.executable, "-m", "fastprof", "view", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0 and "nowhere.py" in r.stdout


def test_fastprof_files_are_line_profilers_and_load_without_fastprof(tmp_path: Any) -> None:
    """The pickle names line_profiler's LineStats, as kernprof's files do: line_profiler reads
    it in a process without fastprof, and fastprof reads it without line_profiler."""
    import pickletools
    import subprocess

    lp = LineProfiler(_work, _timer=iter(range(0, 10**6, 10)).__next__, _timer_unit=1e-6)
    with lp:
        _work(3)
    path = tmp_path / "ours.lprof"
    lp.dump_stats(path)
    data = path.read_bytes()
    globals_named = [
        arg for op, arg, _ in pickletools.genops(data) if op.name in ("GLOBAL", "STACK_GLOBAL")
    ]
    assert globals_named == ["line_profiler.line_profiler LineStats"]
    assert load_stats(path) == lp.get_stats()  # fastprof's reader: no line_profiler needed
    pytest.importorskip("line_profiler")
    code = (
        "import sys, line_profiler\n"
        "st = line_profiler.load_stats(sys.argv[1])\n"
        "assert not any(m.startswith('fastprof') for m in sys.modules)\n"
        "print(sorted((k[2], rows) for k, rows in st.timings.items()), st.unit)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    site = os.path.dirname(os.path.dirname(pytest.importorskip("line_profiler").__file__))
    env["PYTHONPATH"] = site
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    want = sorted((k[2], rows) for k, rows in lp.get_stats().timings.items())
    assert done.stdout.strip() == f"{want} 1e-06"
