"""What the exports write, read the way other tools read them: a filtered pstats file holds
no caller it lacks, callgrind records stay one line each whatever a name holds, a path that is
not UTF-8 is written as its bytes, and the tree exports say what they cannot show."""

from __future__ import annotations

import io
import json
import marshal
import pstats
from typing import Any, Dict

import pytest

from fastprof import Profile, cli
from fastprof.stats import Stats

A = ("/p/app.py", 1, "main")
B = ("/p/app.py", 5, "work")
C = ("/p/lib.py", 9, "helper")


def _sample() -> Dict[Any, Any]:
    return {
        A: (1, 1, 0.1, 1.0, {}),
        B: (3, 3, 0.2, 0.9, {A: (3, 3, 0.2, 0.9)}),
        C: (6, 6, 0.7, 0.7, {B: (6, 6, 0.7, 0.7)}),
    }


def test_a_filtered_pstats_file_names_no_caller_it_lacks(tmp_path: Any, capsys: Any) -> None:
    src = tmp_path / "all.prof"
    Stats(_sample()).dump(str(src))
    out = tmp_path / "f.prof"
    assert (
        cli.main(
            ["view", str(src), "--filter", "work|helper", "--format", "pstats", "-o", str(out)]
        )
        == 0
    )
    with open(out, "rb") as f:
        data = marshal.load(f)
    assert set(data) == {B, C}
    assert data[B][4] == {} and data[C][4] == {B: (6, 6, 0.7, 0.7)}  # main is not in the file
    text = io.StringIO()
    pstats.Stats(str(out), stream=text).print_callers()  # looks each caller up
    assert "helper" in text.getvalue()
    assert not (tmp_path / "f.prof.tree.json").exists()  # the whole tree is not this file's
    filtered = Stats(_sample()).filter("work")
    assert filtered.row("work").callers  # in memory, a row's callers stay whole
    assert filtered.to_pstats().stats[B][4] == {}


@pytest.mark.parametrize("fmt", ["speedscope", "collapsed"])
def test_filter_with_a_tree_export_is_a_usage_error(tmp_path: Any, capsys: Any, fmt: str) -> None:
    src = tmp_path / "all.prof"
    Stats(_sample()).dump(str(src))
    with pytest.raises(SystemExit) as e:
        cli.main(["view", str(src), "--filter", "work", "--format", fmt])
    assert e.value.code == 2
    assert "--filter selects rows of the tables" in capsys.readouterr().err


def test_callgrind_records_stay_one_line_each(tmp_path: Any) -> None:
    odd = {
        ("<gen\nerated>", 1, "two\nlines"): (1, 1, 0.5, 0.5, {}),
        ("/p/app.py", 2, "ok\r"): (
            1,
            1,
            0.25,
            0.25,
            {("<gen\nerated>", 1, "two\nlines"): (1, 1, 0.25, 0.25)},
        ),
    }
    out = tmp_path / "c.out"
    Stats(odd).to_callgrind(str(out))
    lines = out.read_text().splitlines()
    body = [ln for ln in lines if ln and not ln.startswith("#")]
    header = ("version:", "creator:", "positions:", "events:", "summary:", "totals:")
    for ln in body:
        assert ln.startswith(header) or "=" in ln or ln.split()[0].isdigit(), repr(ln)
    assert "fn=(1) two lines" in lines or "fn=(2) two lines" in lines


def test_a_path_that_is_not_utf8_is_written_as_its_bytes(tmp_path: Any) -> None:
    path = "/p/caf\udce9.py"  # b"caf\xe9.py" as the file system decodes it
    data = {(path, 1, "f"): (1, 1, 0.5, 0.5, {})}
    src = tmp_path / "s.prof"
    Stats(data).dump(str(src))
    out = tmp_path / "o.callgrind"
    assert cli.main(["view", str(src), "--format", "callgrind", "-o", str(out)]) == 0
    assert b"caf\xe9.py" in out.read_bytes()
    script = str(tmp_path / "caf\udce9.py")
    with open(script, "w") as f:
        f.write("def f():\n    return 1\nf()\n")
    out = tmp_path / "o.folded"
    assert cli.main(["run", "--format", "collapsed", "-o", str(out), script]) == 0
    assert b"caf\xe9.py:1);f (" in out.read_bytes()


def _deep(n: int) -> int:
    return 0 if n == 0 else _deep(n - 1) + 1


def test_tree_exports_say_when_calls_were_merged_past_the_node_cap(
    tmp_path: Any, capsys: Any
) -> None:
    p = Profile(tree_nodes=4)
    p.enable()
    _deep(20)
    p.disable()
    saved = tmp_path / "p.prof"
    p.dump_stats(str(saved))
    capsys.readouterr()
    for fmt in ("speedscope", "collapsed"):
        assert cli.main(["view", str(saved), "--format", fmt, "-o", str(tmp_path / fmt)]) == 0
        assert "calls merged past the call tree's node cap" in capsys.readouterr().err


def test_speedscope_names_each_thread_as_the_other_views_do(tmp_path: Any, capsys: Any) -> None:
    import threading

    p = Profile()
    p.enable()
    _deep(3)
    p.disable()
    saved = tmp_path / "p.prof"
    p.dump_stats(str(saved))
    assert cli.main(["view", str(saved), "--format", "speedscope", "-o", str(tmp_path / "s")]) == 0
    (prof,) = json.loads((tmp_path / "s").read_text())["profiles"]
    assert prof["name"].startswith(threading.current_thread().name + ": thread 1 (id ")
