"""Exports of call-profile stats: the callgrind writer, checked by parsing its output back."""

from __future__ import annotations

import io
import re
from typing import Any, Dict, Tuple

import pytest

import fastprof
from fastprof import cli

T = [0]


def leaf() -> None:
    T[0] += 3


def mid() -> None:
    T[0] += 2
    leaf()
    leaf()


def top() -> None:
    T[0] += 1
    mid()
    leaf()
    sorted([3, 1, 2], key=lambda v: -v)
    sorted([3, 1], key=lambda v: v)


Parsed = Tuple[Dict[Any, int], Dict[Tuple[Any, Any], Tuple[int, int]], int]


def parse_callgrind(text: str) -> Parsed:
    """(self cost per function, (calls, inclusive cost) per edge, totals) from callgrind text."""
    names: Dict[str, str] = {}
    files: Dict[str, str] = {}

    def resolve(table: Dict[str, str], value: str) -> str:
        m = re.fullmatch(r"\((\d+)\)(?: (.*))?", value)
        assert m, value
        if m.group(2) is not None:
            assert m.group(1) not in table  # each id defined once
            table[m.group(1)] = m.group(2)
        return table[m.group(1)]

    self_cost: Dict[Any, int] = {}
    edges: Dict[Tuple[Any, Any], Tuple[int, int]] = {}
    cur = callee = None
    cfile = cur_file = None
    pending_calls = None
    totals = -1
    for line in text.splitlines():
        if line.startswith("fl="):
            cur_file = resolve(files, line[3:])
        elif line.startswith("fn="):
            cur = (cur_file, resolve(names, line[3:]))
        elif line.startswith("cfl="):
            cfile = resolve(files, line[4:])
        elif line.startswith("cfn="):
            callee = (cfile, resolve(names, line[4:]))
        elif line.startswith("calls="):
            pending_calls = int(line[6:].split()[0])
        elif line.startswith("totals:"):
            totals = int(line.split()[1])
        elif re.fullmatch(r"\d+ \d+", line):
            cost = int(line.split()[1])
            if pending_calls is not None:
                edges[(cur, callee)] = (pending_calls, cost)
                pending_calls = None
            else:
                self_cost[cur] = self_cost.get(cur, 0) + cost
    return self_cost, edges, totals


def test_callgrind_matches_the_stats() -> None:
    prof = fastprof.Profile(lambda: T[0], 1e-6)  # ticks of 1 microsecond
    prof.runcall(top)
    st = fastprof.Stats(prof)
    buf = io.StringIO()
    st.to_callgrind(buf)
    text = buf.getvalue()
    assert text.startswith("# callgrind format\n")
    self_cost, edges, totals = parse_callgrind(text)
    expected_self: Dict[Any, int] = {}
    for r in st.rows:
        name = r.name
        if sum(1 for o in st.rows if o.file == r.file and o.name == r.name) > 1:
            name = f"{r.name}:{r.line}"
        expected_self[(r.file, name)] = round(r.tottime * 1e9)
    assert self_cost == expected_self
    assert totals == sum(expected_self.values())
    leaf_self = next(v for (f, n), v in self_cost.items() if n == "leaf")
    assert leaf_self == 9000  # 3 calls x 3 us
    mid_leaf = next(v for ((_, a), (_, b)), v in edges.items() if (a, b) == ("mid", "leaf"))
    assert mid_leaf == (2, 6000)
    top_mid = next(v for ((_, a), (_, b)), v in edges.items() if (a, b) == ("top", "mid"))
    assert top_mid == (1, 8000)
    # the two lambdas of top() stay apart
    assert sum(1 for (_, n) in self_cost if n.startswith("<lambda>:")) == 2
    n_edges = sum(len(r.callers) for r in st.rows)
    assert len(edges) == n_edges


def test_view_writes_callgrind(tmp_path: Any, capsys: Any) -> None:
    prof = fastprof.Profile()
    prof.runcall(top)
    path = tmp_path / "t.prof"
    prof.dump_stats(str(path))
    out = tmp_path / "t.callgrind"
    assert cli.main(["view", str(path), "--callgrind", str(out)]) == 0
    assert str(out) in capsys.readouterr().err
    self_cost, edges, _ = parse_callgrind(out.read_text())
    assert any(n == "top" for (_, n) in self_cost)
    assert cli.main(["view", str(path), "--callgrind", str(tmp_path / "no" / "dir")]) == 2


def test_callgrind_reads_profile_py_callers() -> None:
    # profile.py's bare call counts in callers are accepted too
    d = {
        ("/a.py", 1, "f"): (1, 1, 0.5, 1.0, {}),
        ("/a.py", 5, "g"): (2, 2, 0.5, 0.5, {("/a.py", 1, "f"): 2}),
    }
    buf = io.StringIO()
    fastprof.Stats(d).to_callgrind(buf)
    self_cost, edges, totals = parse_callgrind(buf.getvalue())
    assert edges == {(("/a.py", "f"), ("/a.py", "g")): (2, 0)}
    assert totals == 10**9
    assert fastprof.Stats(d, d).to_dict()[("/a.py", 5, "g")][4] == {("/a.py", 1, "f"): 4}
    with pytest.raises(TypeError):
        fastprof.Stats(d).to_callgrind(42)  # type: ignore[arg-type]
