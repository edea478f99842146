"""Malformed and hostile pstats files: `fastprof view` and `fastprof compare` exit 2 with one
clear line on stderr naming the file, never a traceback; names holding escape sequences are
printed escaped; fastprof's marshal reader reads what marshal writes and nothing more."""

from __future__ import annotations

import marshal
import os
import random
import struct
import subprocess
import sys
from typing import Any, Dict, List, Tuple

import pytest

import fastprof
from fastprof import _marshal_reader, cli
from fastprof.compare import main as compare_main

KEY = ("/src/mod.py", 3, "work")
CALLER = ("/src/mod.py", 10, "main")
GOOD: Dict[Any, Any] = {
    KEY: (2, 3, 0.25, 0.5, {CALLER: (3, 2, 0.25, 0.5)}),
    CALLER: (1, 1, 0.125, 0.625, {}),
}


def _good_bytes() -> bytes:
    return marshal.dumps(GOOD)


def _entry(value: Any) -> bytes:
    return marshal.dumps({KEY: value})


def _nested(depth: int) -> bytes:
    # a list in a list ... depth times, as the callers of an entry
    return (
        b"{"
        + marshal.dumps(KEY)
        + b"("
        + struct.pack("<i", 5)
        + marshal.dumps(1)
        + marshal.dumps(1)
        + marshal.dumps(0.5)
        + marshal.dumps(0.5)
        + b"[\x01\x00\x00\x00" * depth
        + b"N"
        + b"0"
    )


# name -> bytes of the file, or a callable making the path itself (given tmp_path)
CORPUS: List[Tuple[str, Any]] = [
    ("empty", b""),
    ("truncated", _good_bytes()[: len(_good_bytes()) // 2]),
    ("one byte", b"{"),
    ("text", b"hello, this is not a profile\n"),
    ("json", b'{"benchmarks": []}'),
    ("random bytes", bytes(random.Random(1).randrange(256) for _ in range(300))),
    ("a list", marshal.dumps([1, 2, 3])),
    ("an int", marshal.dumps(7)),
    ("None", marshal.dumps(None)),
    ("a code object", marshal.dumps(compile("import os; os.system('true')", "x", "exec"))),
    ("a code object as a value", marshal.dumps({KEY: compile("1", "x", "eval")})),
    ("a set of keys", marshal.dumps({frozenset({1}): (1, 1, 0.0, 0.0, {})})),
    ("bytes in a key", marshal.dumps({(b"/src/mod.py", 3, "work"): (1, 1, 0.0, 0.0, {})})),
    ("key is a string", marshal.dumps({"work": (1, 1, 0.0, 0.0, {})})),
    ("key of two", marshal.dumps({("/src/mod.py", 3): (1, 1, 0.0, 0.0, {})})),
    ("file is an int", marshal.dumps({(1, 3, "work"): (1, 1, 0.0, 0.0, {})})),
    ("line is a str", marshal.dumps({("/src/mod.py", "3", "work"): (1, 1, 0.0, 0.0, {})})),
    ("negative line", marshal.dumps({("/src/mod.py", -3, "work"): (1, 1, 0.0, 0.0, {})})),
    ("value is a list", _entry([1, 1, 0.0, 0.0, {}])),
    ("value of four", _entry((1, 1, 0.0, 0.0))),
    ("calls are a str", _entry(("1", 1, 0.0, 0.0, {}))),
    ("calls are a float", _entry((1, 1.5, 0.0, 0.0, {}))),
    ("negative calls", _entry((-1, 1, 0.0, 0.0, {}))),
    ("negative time", _entry((1, 1, -0.5, 0.0, {}))),
    ("NaN time", _entry((1, 1, float("nan"), 0.0, {}))),
    ("infinite time", _entry((1, 1, 0.0, float("inf"), {}))),
    ("callers are a list", _entry((1, 1, 0.0, 0.0, [CALLER]))),
    ("caller key is None", _entry((1, 1, 0.0, 0.0, {None: (1, 1, 0.0, 0.0)}))),
    ("caller of three", _entry((1, 1, 0.0, 0.0, {CALLER: (1, 1, 0.0)}))),
    ("caller NaN", _entry((1, 1, 0.0, 0.0, {CALLER: (1, 1, float("nan"), 0.0)}))),
    ("caller negative count", _entry((1, 1, 0.0, 0.0, {CALLER: -4}))),
    ("huge nesting", _nested(100000)),
    ("size bomb tuple", b"{(" + struct.pack("<i", 0x7FFFFFFF) + b"N"),
    ("size bomb list", b"[" + struct.pack("<i", 0x7FFFFFFF)),
    ("size bomb str", b"{u" + struct.pack("<i", 0x7FFFFFFF) + b"abc"),
    ("bad reference", b"{r" + struct.pack("<i", 99) + b"N0"),
    ("a directory", lambda tmp: _mkdir(tmp)),
    ("missing", lambda tmp: str(tmp / "nowhere.prof")),
    ("unreadable", lambda tmp: _unreadable(tmp)),
]


def _mkdir(tmp: Any) -> str:
    (tmp / "adir.prof").mkdir()
    return str(tmp / "adir.prof")


def _unreadable(tmp: Any) -> str:
    path = tmp / "locked.prof"
    path.write_bytes(b"not a profile either")  # refused even where root can read it
    path.chmod(0)
    return str(path)


def _corpus_path(tmp: Any, name: str, content: Any) -> str:
    if callable(content):
        return str(content(tmp))
    path = tmp / (name.replace(" ", "_") + ".prof")
    path.write_bytes(content)
    return str(path)


def _one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("name,content", CORPUS, ids=[c[0] for c in CORPUS])
def test_view_refuses_with_one_line(name: str, content: Any, tmp_path: Any, capsys: Any) -> None:
    path = _corpus_path(tmp_path, name, content)
    assert cli.main(["view", path]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    line = _one_line(err)
    assert line.startswith("fastprof view: ") and path in line


@pytest.mark.parametrize("name,content", CORPUS, ids=[c[0] for c in CORPUS])
def test_compare_refuses_with_one_line(name: str, content: Any, tmp_path: Any, capsys: Any) -> None:
    good = tmp_path / "good.prof"
    good.write_bytes(_good_bytes())
    path = _corpus_path(tmp_path, name, content)
    assert compare_main([str(good), path]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    line = _one_line(err)
    assert line.startswith("fastprof compare: ") and path in line


def test_a_pipe_is_refused_without_blocking(tmp_path: Any, capsys: Any) -> None:
    fifo = tmp_path / "pipe.prof"
    os.mkfifo(fifo)
    assert cli.main(["view", str(fifo)]) == 2
    assert "not a regular file" in _one_line(capsys.readouterr().err)
    assert compare_main([str(fifo), str(fifo)]) == 2
    assert "not a regular file" in _one_line(capsys.readouterr().err)


def test_view_as_a_process_exits_2_with_one_line(tmp_path: Any) -> None:
    for name in ("truncated", "NaN time", "huge nesting"):
        path = _corpus_path(tmp_path, name, dict(CORPUS)[name])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        r = subprocess.run(
            [sys.executable, "-m", "fastprof", "view", path],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert r.returncode == 2 and r.stdout == ""
        _one_line(r.stderr)


def test_stats_load_names_the_file_and_the_entry(tmp_path: Any) -> None:
    path = tmp_path / "neg.prof"
    path.write_bytes(_entry((1, 1, -0.5, 0.0, {})))
    with pytest.raises(ValueError, match=r"neg\.prof.*'/src/mod\.py', 3, 'work'.*non-negative"):
        fastprof.Stats(str(path))
    good = tmp_path / "good.prof"
    good.write_bytes(_good_bytes())
    assert fastprof.Stats(str(good)).to_dict() == GOOD


# --- escape sequences in names ----------------------------------------------------------------

EVIL_FILE = "/src/\x1b[2J\x1b[31mred\rback\nnew.py"
EVIL_NAME = "f\x1b]0;title\x07\u202eevil"
EVIL: Dict[Any, Any] = {
    (EVIL_FILE, 1, EVIL_NAME): (1, 1, 0.5, 0.5, {}),
    ("~", 0, "<built-in \x1b[5m blink>"): (
        2,
        2,
        0.25,
        0.25,
        {(EVIL_FILE, 1, EVIL_NAME): (2, 2, 0.25, 0.25)},
    ),
}


def _harmless(text: str) -> None:
    assert "\x1b" not in text and "\r" not in text and "\x07" not in text
    assert "\u202e" not in text


def test_view_escapes_names(tmp_path: Any, capsys: Any) -> None:
    path = tmp_path / "evil.prof"
    path.write_bytes(marshal.dumps(EVIL))
    assert cli.main(["view", str(path), "--full-paths"]) == 0
    out = capsys.readouterr().out
    _harmless(out)
    assert "/src/\\x1b[2J\\x1b[31mred\\rback\\nnew.py:1(f\\x1b]0;title\\x07\\u202eevil)" in out
    assert "{built-in \\x1b[5m blink}" in out  # builtins print as pstats prints them
    rows = out.split("function\n", 1)[1].splitlines()
    assert len(rows) == 2  # one line per function: no newline got through


def test_view_escapes_the_file_name_in_its_title_and_errors(tmp_path: Any, capsys: Any) -> None:
    path = tmp_path / "bad\x1b[31mname\n.prof"
    path.write_bytes(marshal.dumps(GOOD))
    assert cli.main(["view", str(path)]) == 0
    out = capsys.readouterr().out
    _harmless(out)
    assert "bad\\x1b[31mname\\n.prof" in out
    path.write_bytes(b"junk")
    assert cli.main(["view", str(path)]) == 2
    err = capsys.readouterr().err
    _harmless(err)
    assert "bad\\x1b[31mname\\n.prof" in _one_line(err)


def test_compare_of_profiles_escapes_names(tmp_path: Any, capsys: Any) -> None:
    a, b = tmp_path / "a.prof", tmp_path / "b.prof"
    a.write_bytes(marshal.dumps(EVIL))
    b.write_bytes(marshal.dumps(GOOD))
    assert compare_main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    _harmless(out)
    assert "f\\x1b]0;title\\x07\\u202eevil" in out


# --- compare A.prof B.prof --------------------------------------------------------------------

A_STATS: Dict[Any, Any] = {
    ("/p/m.py", 1, "steady"): (10, 10, 1.0, 2.0, {}),
    ("/p/m.py", 5, "slower"): (4, 4, 0.5, 0.5, {}),
    ("/p/m.py", 9, "gone"): (1, 1, 0.25, 0.25, {}),
    ("~", 0, "<built-in method builtins.len>"): (7, 7, 0.125, 0.125, {}),
}
B_STATS: Dict[Any, Any] = {
    ("/p/m.py", 1, "steady"): (10, 10, 1.0, 3.0, {}),
    ("/p/m.py", 5, "slower"): (8, 8, 2.5, 2.5, {}),
    ("/p/m.py", 12, "new"): (3, 3, 0.75, 0.75, {}),
    ("~", 0, "<built-in method builtins.len>"): (7, 7, 0.0625, 0.0625, {}),
}


@pytest.fixture
def two_profiles(tmp_path: Any) -> Tuple[str, str]:
    a, b = tmp_path / "A.prof", tmp_path / "B.prof"
    fastprof.Stats(A_STATS).dump(str(a))
    fastprof.Stats(B_STATS).dump(str(b))
    return str(a), str(b)


def _rows(out: str) -> List[List[str]]:
    body = out.split("function\n", 1)[1]
    return [line.split() for line in body.splitlines()]


def test_compare_two_profiles_sorted_by_the_largest_change(two_profiles: Any, capsys: Any) -> None:
    a, b = two_profiles
    assert cli.main(["compare", a, b]) == 0
    out = capsys.readouterr().out
    head = out.splitlines()
    assert head[0] == f"A: {a}: 22 function calls in 1.875000 seconds"
    assert head[1] == f"B: {b}: 28 function calls in 4.312500 seconds"
    assert head[2] == "5 functions, sorted by the change of own time"
    rows = _rows(out)
    assert [r[-1] for r in rows] == [
        "m.py:5(slower)",
        "m.py:12(new)",
        "m.py:9(gone)",
        "builtins.len}",  # pstats' label: {built-in method builtins.len}
        "m.py:1(steady)",
    ]
    assert rows[0][:9] == [
        "4",
        "8",
        "0.500000",
        "2.500000",
        "+2.000000",
        "+400.0%",
        "0.500000",
        "2.500000",
        "+2.000000",
    ]
    assert rows[1][:9] == [
        "-",
        "3",
        "-",
        "0.750000",
        "+0.750000",
        "new",
        "-",
        "0.750000",
        "+0.750000",
    ]
    assert rows[2][:9] == [
        "1",
        "-",
        "0.250000",
        "-",
        "-0.250000",
        "gone",
        "0.250000",
        "-",
        "-0.250000",
    ]
    assert rows[3][4:6] == ["-0.062500", "-50.0%"]
    assert rows[4][4:9] == ["+0.000000", "+0.0%", "2.000000", "3.000000", "+1.000000"]


def test_compare_two_profiles_by_total_time_and_top(two_profiles: Any, capsys: Any) -> None:
    a, b = two_profiles
    assert compare_main([a, b, "--by", "total", "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "2 of 5 functions, sorted by the change of total time" in out
    assert [r[-1] for r in _rows(out)] == ["m.py:5(slower)", "m.py:1(steady)"]


def test_compare_says_which_files_it_takes(two_profiles: Any, tmp_path: Any, capsys: Any) -> None:
    a, _ = two_profiles
    run = tmp_path / "run.json"
    run.write_text('{"benchmarks": []}')
    assert compare_main([a, str(run)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "is a profile but" in line and "is a benchmark run" in line
    assert "two benchmark runs (JSON) or two profiles (pstats)" in line
    assert compare_main([a, a, "--fail", "median:5%"]) == 2
    assert "--fail applies to benchmark runs" in _one_line(capsys.readouterr().err)


def test_compare_reads_cprofile_files(tmp_path: Any, capsys: Any) -> None:
    import cProfile

    paths = []
    for n in (10, 20):
        prof = cProfile.Profile()
        prof.runcall(sorted, list(range(n)))
        paths.append(str(tmp_path / f"c{n}.prof"))
        prof.dump_stats(paths[-1])
    assert compare_main(paths + ["--all"]) == 0
    out = capsys.readouterr().out
    assert "{built-in method builtins.sorted}" in out  # as pstats labels it


# --- the marshal reader -----------------------------------------------------------------------

VALUES: List[Any] = [
    {},
    GOOD,
    EVIL,
    [1, -5, 2**100, -(2**70), 0, "é\u202e", "a" * 300, ("t",) * 300, None, True, False, 1.5, -0.0],
]


@pytest.mark.parametrize("version", [2, 3, 4])
def test_marshal_reader_reads_what_marshal_writes(version: int) -> None:
    shared = ("shared", 1, "s")
    for value in VALUES + [{shared: (shared, shared), ("o", 2, "s"): [shared, shared]}]:
        data = marshal.dumps(value, version)
        assert repr(_marshal_reader.loads(data)) == repr(marshal.loads(data))


def test_marshal_reader_reads_real_profiles(tmp_path: Any) -> None:
    p = fastprof.Profile()
    p.runcall(sorted, [3, 1, 2], key=lambda x: -x)
    p.dump_stats(str(tmp_path / "p.prof"))
    data = (tmp_path / "p.prof").read_bytes()
    assert _marshal_reader.loads(data) == marshal.loads(data)


def test_marshal_reader_refuses_with_value_error_only() -> None:
    data = marshal.dumps(GOOD)
    rng = random.Random(7)
    for _ in range(2000):
        cut = bytearray(data[: rng.randrange(len(data) + 1)])
        for _ in range(rng.randrange(4)):
            if cut:
                cut[rng.randrange(len(cut))] = rng.randrange(256)
        try:
            _marshal_reader.loads(bytes(cut))
        except ValueError:
            pass
    for bad in (
        b"",
        b"c",
        marshal.dumps(b"bytes"),
        marshal.dumps({1, 2}),
        marshal.dumps(compile("1", "x", "eval")),
        marshal.dumps(1j),
    ):
        with pytest.raises(ValueError):
            _marshal_reader.loads(bad)


def test_files_of_profile_py_and_cprofile_still_load(tmp_path: Any, capsys: Any) -> None:
    import cProfile
    import profile

    def work() -> int:
        return sum(sorted([3, 1, 2]))

    for name, prof in (("pure", profile.Profile()), ("c", cProfile.Profile())):
        prof.runcall(work)
        path = str(tmp_path / f"{name}.prof")
        prof.dump_stats(path)
        assert cli.main(["view", path, "--all"]) == 0
        assert "(work)" in capsys.readouterr().out
        assert fastprof.Stats(path).row("work").ncalls == 1


def test_run_table_escapes_names(tmp_path: Any, capsys: Any) -> None:
    script = tmp_path / "evil.py"
    script.write_text(
        "def f():\n"
        "    return 1\n"
        "f.__code__ = f.__code__.replace(co_name='f\\x1b[2J\\r\\nx',\n"
        "                                co_filename='/a/\\x1b]0;t\\x07.py')\n"
        "f()\n"
    )
    assert cli.main(["run", "--all", str(script)]) == 0
    out = capsys.readouterr().out
    _harmless(out)
    assert ".py:1(f\\x1b[2J\\r\\nx)" in out


def test_a_sampling_profilers_unknown_counts_read_as_zero_with_a_warning(
    tmp_path: Any, capsys: Any
) -> None:
    """pyinstrument's pstats renderer stubs every count out as -1 (pstats reads them): the
    file is read, its times as written, its counts 0, with a warning that says so; other
    negative counts stay an error."""
    stats = {
        CALLER: (-1, -1, 0.5, 0.75, {}),
        KEY: (-1, -1, 0.25, 0.25, {CALLER: (-1, -1, 0.25, 0.25)}),
    }
    path = tmp_path / "pyi.prof"
    path.write_bytes(marshal.dumps(stats))
    with pytest.warns(UserWarning, match="has no call counts"):
        st = fastprof.Stats.load(str(path))
    assert st.to_dict()[KEY] == (0, 0, 0.25, 0.25, {CALLER: (0, 0, 0.25, 0.25)})
    with pytest.warns(UserWarning, match="has no call counts"):
        assert cli.main(["view", str(path)]) == 0
    assert "mod.py:3(work)" in capsys.readouterr().out
    stats[KEY] = (-2, -1, 0.25, 0.25, {})
    path.write_bytes(marshal.dumps(stats))
    with pytest.warns(UserWarning):
        assert cli.main(["view", str(path)]) == 2
    assert "must be non-negative" in capsys.readouterr().err
