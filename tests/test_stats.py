"""fastprof.Stats: rows, sorting (compared with pstats' own order), filtering, tables, export."""

from __future__ import annotations

import cProfile
import io
import marshal
import os
import pstats
import random
from typing import Any, Dict

import pytest

import fastprof
from fastprof.stats import SORT_KEYS, Row


def synthetic(n: int = 25, seed: int = 1) -> Dict[Any, Any]:
    """A pstats dict with distinct values in every column (so every sort order is total)."""
    rng = random.Random(seed)
    files = [f"/src/pkg/mod{i}.py" for i in range(n)]
    names = [f"f{i:02d}" for i in range(n)]
    lines = rng.sample(range(1, 1000), n)
    nc = rng.sample(range(1, 5000), n)
    stats: Dict[Any, Any] = {}
    keys = []
    for i in range(n):
        rng.shuffle(files)
        key = (files[i], lines[i], names[(i * 7) % n])
        keys.append(key)
    tts = rng.sample(range(1, 10**6), n)
    cts = rng.sample(range(10**6, 2 * 10**6), n)
    for i, key in enumerate(keys):
        callers = {}
        for j in rng.sample(range(n), 3):
            if j != i:
                callers[keys[j]] = (j + 1, j + 1, (j + 1) * 1e-6, (j + 2) * 1e-6)
        cc = nc[i] - (i % 3)  # some recursive calls
        stats[key] = (cc, nc[i], tts[i] * 1e-6, cts[i] * 1e-6, callers)
    edge = (7, 7, 0.5e-6, 0.5e-6)
    stats[("~", 0, "<built-in method builtins.len>")] = edge + ({keys[0]: edge},)
    return stats


def test_rows_are_plain_data() -> None:
    d = synthetic()
    st = fastprof.Stats(d)
    assert len(st) == len(d)
    for r in st.rows:
        assert isinstance(r, Row)
        cc, nc, tt, ct, callers = d[r.key]
        assert (r.primcalls, r.ncalls, r.tottime, r.cumtime) == (cc, nc, tt, ct)
        assert {
            (c.file, c.line, c.name): (c.ncalls, c.primcalls, c.tottime, c.cumtime)
            for c in r.callers
        } == callers
        plain = r.as_dict()
        assert plain["name"] == r.name and isinstance(plain["callers"], (list, tuple))
    b = st.row("<built-in method builtins.len>")
    assert b.is_builtin and b.location == "{built-in method builtins.len}"  # as pstats shows it
    assert st.total_calls == sum(v[1] for v in d.values())
    assert st.prim_calls == sum(v[0] for v in d.values())
    assert st.total_tt == pytest.approx(sum(v[2] for v in d.values()))


@pytest.mark.parametrize(
    "key",
    [
        "calls",
        "ncalls",
        "pcalls",
        "cumulative",
        "cumtime",
        "time",
        "tottime",
        "line",
        "name",
        "nfl",
        "stdname",
        "file",
        "module",
    ],
)
def test_sort_matches_pstats(key: str) -> None:
    d = synthetic()
    ref = fastprof.Stats(d).to_pstats()
    ref.sort_stats(key)
    st = fastprof.Stats(d).sort(key)
    assert [r.key for r in st.rows] == list(ref.fcn_list)
    assert st.sort_keys == (key,)


@pytest.mark.parametrize("key", ["filename", "module", "nfl", "stdname"])
def test_sort_with_strip_dirs_matches_pstats_after_strip_dirs(key: str) -> None:
    # python -m cProfile -s filename strips the folders, then sorts: b/amod.py before a/zmod.py
    d: Dict[Any, Any] = {}
    for path, line, name in [("/a/zmod.py", 1, "zz"), ("/b/amod.py", 2, "aa"), ("/c/m.py", 3, "q")]:
        d[(path, line, name)] = (1, 1, 1e-6, 1e-6, {})
    ref = fastprof.Stats(d).to_pstats()
    ref.strip_dirs().sort_stats(key)
    st = fastprof.Stats(d).sort(key, strip_dirs=True)
    assert [(os.path.basename(r.file), r.line, r.name) for r in st.rows] == list(ref.fcn_list)


def test_sort_legacy_int_and_multiple_keys() -> None:
    d = synthetic()
    for legacy in (-1, 0, 1, 2):
        ref = fastprof.Stats(d).to_pstats().sort_stats(legacy)
        assert [r.key for r in fastprof.Stats(d).sort(legacy).rows] == list(ref.fcn_list)
    ref = fastprof.Stats(d).to_pstats().sort_stats("file", "tottime")
    assert [r.key for r in fastprof.Stats(d).sort("file", "tottime").rows] == list(ref.fcn_list)


def test_sort_bad_keys() -> None:
    st = fastprof.Stats(synthetic())
    with pytest.raises(ValueError, match="unknown key 'speed'"):
        st.sort("speed")
    with pytest.raises(ValueError, match="integer"):
        st.sort(7)
    with pytest.raises(TypeError):
        st.sort("name", 1.5)  # type: ignore[arg-type]
    assert "cumulative" in SORT_KEYS


def test_filter_by_regex() -> None:
    d = synthetic()
    st = fastprof.Stats(d).sort("tottime")
    sub = st.filter(r"mod1\d\.py")
    expected = [k for k in (r.key for r in st.rows) if __import__("re").search(r"mod1\d\.py", k[0])]
    assert [r.key for r in sub.rows] == expected
    assert 0 < len(sub) < len(st)
    assert [r.name for r in st.filter("^f0[1-3]$").rows] == [
        r.name for r in st.rows if r.name in ("f01", "f02", "f03")
    ]
    assert len(st.filter("builtins")) == 1
    # a filtered table keeps the whole profile's totals and shares
    text = sub.table()
    assert f"{st.total_calls} function calls" in text and "matching 'mod1\\\\d\\\\.py'" in text
    shares = [float(line.split()[5]) for line in text.splitlines()[4:]]
    assert sum(shares) == pytest.approx(100.0 * sub.total_tt / st.total_tt, abs=0.1 * len(shares))
    assert sum(shares) < 90.0
    with pytest.raises(ValueError, match="regular expression"):
        st.filter("(")
    with pytest.raises(TypeError):
        st.filter(3)  # type: ignore[arg-type]


def test_top_and_table() -> None:
    st = fastprof.Stats(synthetic()).sort("cumulative")
    top = st.top(5)
    assert [r.key for r in top] == [r.key for r in st.rows[:5]]
    text = st.table(top=5)
    lines = text.splitlines()
    assert "5 of 26 functions, sorted by cumulative" in text
    body = lines[lines.index(next(x for x in lines if x.lstrip().startswith("ncalls"))) + 1 :]
    assert len(body) == 5
    for line, r in zip(body, top):
        assert line.endswith(f"mod{r.file.split('mod')[1]}:{r.line}({r.name})")
        assert f"{r.cumtime:.6f}" in line
        ncol = line.split()[0]
        assert ncol == (str(r.ncalls) if r.ncalls == r.primcalls else f"{r.ncalls}/{r.primcalls}")
    full = st.table(strip_dirs=False)
    assert "/src/pkg/" in full and len(full.splitlines()) == len(lines) + 21
    buf = io.StringIO()
    st.print(top=2, stream=buf, title="hello")
    assert buf.getvalue().startswith("hello\n")
    with pytest.raises(ValueError):
        st.top(-1)
    with pytest.raises(ValueError):
        st.table(top=-2)


def test_percent_column_sums_to_100() -> None:
    st = fastprof.Stats(synthetic())
    body = st.table().splitlines()[4:]
    assert sum(float(line.split()[5]) for line in body) == pytest.approx(100.0, abs=0.1 * len(body))


def test_to_pstats_and_files(tmp_path: Any) -> None:
    d = synthetic()
    st = fastprof.Stats(d)
    ps = st.to_pstats()
    assert ps.stats == d
    assert ps.total_calls == st.total_calls
    path = tmp_path / "s.prof"
    st.dump(path)
    with open(path, "rb") as f:
        assert marshal.load(f) == d
    assert fastprof.Stats.load(path).to_dict() == d
    assert pstats.Stats(str(path)).stats == d


def test_a_python_m_profile_file_is_refused_with_the_way_to_read_it(tmp_path: Any) -> None:
    import subprocess
    import sys

    script = tmp_path / "s.py"
    script.write_text("def f():\n    return sum(range(9))\n\nf()\n")
    out = tmp_path / "p.prof"
    subprocess.run([sys.executable, "-m", "profile", "-o", str(out), str(script)], check=True)
    with pytest.raises(ValueError, match=r"code object.*fastprof\.Stats\(pstats\.Stats\(path\)\)"):
        fastprof.Stats(out)
    # the way the message gives reads it, with the script's rows
    names = {k[2] for k in fastprof.Stats(pstats.Stats(str(out))).to_dict()}
    assert {"f", "<module>", "sum"} <= names


def test_sources_and_merging() -> None:
    d = synthetic()
    twice = fastprof.Stats(d, d)
    k = next(iter(d))
    assert twice.to_dict()[k][:2] == (2 * d[k][0], 2 * d[k][1])
    caller, cv = next(iter(d[k][4].items()))
    assert twice.to_dict()[k][4][caller] == tuple(2 * x for x in cv)
    assert fastprof.Stats(fastprof.Stats(d)).to_dict() == d
    assert fastprof.Stats(fastprof.Stats(d).to_pstats()).to_dict() == d
    st = fastprof.Stats()
    assert len(st) == 0 and st.rows == []
    st.add(d)
    assert st.to_dict() == d


def test_from_cprofile_and_fastprof() -> None:
    def work() -> int:
        return sum(range(10))

    for prof in (cProfile.Profile(), fastprof.Profile()):
        prof.runcall(work)
        st = fastprof.Stats(prof)
        assert st.row("work").ncalls == 1


def test_bad_sources(tmp_path: Any) -> None:
    with pytest.raises(TypeError, match="Stats sources"):
        fastprof.Stats(42)
    junk = tmp_path / "junk.prof"
    junk.write_bytes(b"not a profile")
    with pytest.raises(ValueError, match="not a profile"):
        fastprof.Stats(str(junk))
    with pytest.raises(ValueError, match="not a pstats dictionary: entry"):
        fastprof.Stats({("a", 1, "f"): (1, 2)})
    with pytest.raises(OSError):
        fastprof.Stats(str(tmp_path / "missing.prof"))


def test_row_lookup_errors() -> None:
    d = {("/a.py", 1, "f"): (1, 1, 0.1, 0.1, {}), ("/b.py", 2, "f"): (1, 1, 0.2, 0.2, {})}
    st = fastprof.Stats(d)
    with pytest.raises(ValueError, match="2 functions named 'f'"):
        st.row("f")
    assert st.row("/b.py:2(f)").tottime == 0.2
    with pytest.raises(KeyError):
        st.row("g")


def _profiled() -> fastprof.Profile:
    p = fastprof.Profile()
    p.enable()
    sorted(str(i) for i in range(20))
    p.disable()
    return p


def test_a_tree_file_of_another_profile_gives_no_per_thread_tables(tmp_path: Any) -> None:
    """cProfile rewrote the file and left fastprof's tree beside it: Stats(path) does not
    take that tree for the file's (view already refused it)."""
    path = str(tmp_path / "out.prof")
    _profiled().dump_stats(path)
    assert len(fastprof.Stats(path).threads()) == 1
    cp = cProfile.Profile()
    cp.enable()
    len("x")
    cp.disable()
    cp.dump_stats(path)
    st = fastprof.Stats(path)
    with pytest.raises(ValueError, match="out.prof.tree.json is not this profile's call tree"):
        st.threads()
    assert st.call_tree() is None


def test_a_stats_made_from_a_filtered_one_has_no_tree() -> None:
    st = fastprof.Stats(_profiled())
    f = st.filter("genexpr")
    g = fastprof.Stats(f)
    assert g.call_tree() is None
    with pytest.raises(ValueError, match="no per-thread data"):
        g.for_thread(st.threads()[0].ident)


def test_adding_a_bad_dict_changes_nothing() -> None:
    st = fastprof.Stats(_profiled())
    before = (st.to_dict(), st.threads())
    bad = {("z.py", 1, "good"): (7, 7, 1.0, 1.0, {}), ("z.py", 2, "bad"): (1, 1, 0.1, 0.1, None)}
    with pytest.raises(ValueError, match="callers are a NoneType"):
        st.add(bad)
    assert (st.to_dict(), st.threads()) == before


def test_rows_alike_once_stripped_keep_what_tells_them_apart() -> None:
    helper = (1, 1, 0.5, 0.5, {})
    st = fastprof.Stats(
        {
            ("/pk/a/__init__.py", 1, "helper"): (100, 100, 0.002, 0.002, {}),
            ("/pk/b/__init__.py", 1, "helper"): (50, 50, 0.001, 0.001, {}),
            ("/pk/c.py", 3, "alone"): helper,
        }
    )
    table = st.sort("calls").table()
    assert "a/__init__.py:1(helper)" in table and "b/__init__.py:1(helper)" in table
    assert " c.py:3(alone)" in table  # no clash: the base name, as pstats prints it


def test_long_times_keep_six_decimals() -> None:
    st = fastprof.Stats({("/x/app.py", 10, "slow"): (3, 3, 1234.5678, 4321.98765, {})})
    row = [ln for ln in st.table().splitlines() if "slow" in ln][0].split()
    assert row[1:5] == ["1234.567800", "411.522600", "4321.987650", "1440.662550"]
