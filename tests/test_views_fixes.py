"""Fixes to the views: ``fastprof diff`` (and ``diff --html``) linear in a deep tree's depth
(call paths interned, not a tuple of keys per node), folded stacks with control characters
escaped as the text views write them, and a malformed ``node_cap`` in a tree file refused as
a malformed call tree (one line, status 2, from the command line)."""

from __future__ import annotations

import io
import json
import marshal
import tracemalloc
from typing import Any, Dict, List, Tuple

import pytest

from fastprof import cli
from fastprof.diff import CallPaths, format_diff, interned_paths_of, path_changes, paths_of
from fastprof.diff import main as diff_main
from fastprof.report.collapsed import collapsed_lines, frame_name, write_collapsed
from fastprof.report.escape import printable
from fastprof.report.html import report_data
from fastprof.tree import CallTree, FuncKey, Node, pstats_of
from view_helpers import big_tree, sample_stats, sample_tree

Figures = Tuple[int, float, float]

# ---- the definitions before the fix (a tuple of keys per path), to compare with ------------


def _old_paths_of(root: Node) -> Dict[Tuple[FuncKey, ...], Figures]:
    out: Dict[Tuple[FuncKey, ...], Figures] = {}
    stack: List[Tuple[Node, Tuple[FuncKey, ...]]] = [(c, ()) for c in root.children]
    while stack:
        n, up = stack.pop()
        assert n.key is not None
        p = up + (n.key,)
        prev = out.get(p, (0, 0.0, 0.0))
        out[p] = (prev[0] + n.ncalls, prev[1] + n.tottime, prev[2] + n.cumtime)
        stack.extend((c, p) for c in n.children)
    return out


def _old_path_changes(a: CallTree, b: CallTree) -> List[Any]:
    pa, pb = _old_paths_of(a.merged_threads()), _old_paths_of(b.merged_threads())
    zero: Figures = (0, 0.0, 0.0)
    out = [(p, (pa.get(p, zero), pb.get(p, zero))) for p in set(pa) | set(pb)]

    def size(c: Any) -> float:
        (_, ta, ca), (_, tb, cb) = c
        return round(max(abs(tb - ta), abs(cb - ca)), 9)

    out.sort(key=lambda kv: (-size(kv[1]), len(kv[0]), kv[0]))
    return out


def _old_path_text(p: Tuple[FuncKey, ...], paths: Dict[str, str], keep: int = 4) -> str:
    from fastprof.diff import _name

    parts: List[str] = []
    last = None
    count = 0
    for k in p:
        if k == last:
            count += 1
            parts[-1] = f"{_name(k, paths)} x{count}"
            continue
        last, count = k, 1
        parts.append(_name(k, paths))
    if len(parts) > keep:
        parts = ["..."] + parts[-keep:]
    return " > ".join(parts)


def _old_before(tree: CallTree) -> Dict[Tuple[FuncKey, ...], Tuple[float, float, int]]:
    return {k: (v[2], v[1], v[0]) for k, v in _old_paths_of(tree.merged_threads()).items()}


def _small_trees() -> List[Tuple[CallTree, CallTree]]:
    # few functions, two threads: equal keys side by side, paths in one tree only, ties
    a = big_tree(400, seed=1, funcs=3, threads=2)
    b = big_tree(400, seed=2, funcs=3, threads=2)
    return [(a, b), (b, a), (a, a), (sample_tree(), sample_tree()), (sample_tree(), a)]


def _chain(depth: int, own: int = 1) -> CallTree:
    """f -> f -> ... ``depth`` deep (direct recursion), then g below it."""
    keys = [("/p/m.py", 1, "f"), ("/p/m.py", 9, "g")]
    nodes = [(i - 1, 0 if i < depth - 1 else 1, 0, 1, own * (depth - i), own) for i in range(depth)]
    return CallTree.from_raw(1e-6, keys, nodes, [7])


# ---- diff: linear, same results -----------------------------------------------------------


def test_paths_of_equals_the_tuple_definition() -> None:
    for a, _ in _small_trees():
        paths = CallPaths()
        got = interned_paths_of(a.merged_threads(), paths)
        assert {paths.path(i): f for i, f in got.items()} == _old_paths_of(a.merged_threads())
        assert paths_of(a.merged_threads()) == _old_paths_of(a.merged_threads())
        # one entry per path, its depth its tuple's length
        assert len(paths.parent) == len(got)
        assert all(paths.depth[i] == len(paths.path(i)) for i in got)


def test_path_changes_equal_the_tuple_definition_in_the_same_order() -> None:
    for a, b in _small_trees():
        paths, got = path_changes(a, b)
        assert [(paths.path(i), c) for i, c in got] == _old_path_changes(a, b)


def test_the_text_diff_is_unchanged(monkeypatch: Any) -> None:
    import fastprof.diff as diff_mod

    def old(a: CallTree, b: CallTree) -> Tuple[CallPaths, List[Any]]:
        # the tuple definition's rows, handed to format_diff as interned paths
        paths = CallPaths()
        rows = []
        for p, c in _old_path_changes(a, b):
            i = -1
            for k in p:
                i = paths.intern(i, k)
            rows.append((i, c))
        return paths, rows

    def old_text(cp: CallPaths, i: int, paths: Dict[str, str], keep: int = 4) -> str:
        return _old_path_text(cp.path(i), paths, keep)

    texts = []
    for a, b in _small_trees() + [(_chain(50), _chain(60, own=2))]:
        fa, fb = a.function_totals(), b.function_totals()
        new_text = format_diff(fa, fb, a, b, top=1000)
        texts.append(new_text)
        with monkeypatch.context() as m:
            m.setattr(diff_mod, "path_changes", old)
            m.setattr(diff_mod, "_path_text", old_text)
            assert format_diff(fa, fb, a, b, top=1000) == new_text
        assert "call paths that changed most" in new_text
    assert "\n".join(texts).count("  ... > ") > 100
    assert "  m.py:1(f) x59 > m.py:9(g)\n" in texts[-1]


def test_path_text_shows_the_last_runs() -> None:
    import fastprof.diff as diff_mod

    f, g, h = ("/p/m.py", 1, "f"), ("/p/m.py", 2, "g"), ("~", 0, "<built-in method len>")
    cp = CallPaths()
    names = {"/p/m.py": "m.py"}
    for p in [(f,), (f, f, f), (f, g, g, h), (g, f, f, g, h, h, f), (f, g, f, g, f)]:
        i = -1
        for k in p:
            i = cp.intern(i, k)
        assert diff_mod._path_text(cp, i, names) == _old_path_text(p, names)
    assert diff_mod._path_text(cp, cp.intern(cp.intern(cp.intern(-1, f), f), f), names) == (
        "m.py:1(f) x3"
    )


def test_the_html_diff_data_is_unchanged() -> None:
    for a, b in _small_trees():
        cp = CallPaths()
        figures = interned_paths_of(a.merged_threads(), cp)
        interned = (cp.ids, {i: (v[2], v[1], v[0]) for i, v in figures.items()})
        new = report_data(None, b, before=interned)
        old = report_data(None, b, before=_old_before(a))  # the tuple form is still taken
        assert new == old
        assert new["diff"] and all("btotal" in t for t in new["threads"])
    # the figures of a path the earlier profile has, and zeros for one it lacks
    a, b = _chain(3), _chain(4, own=2)
    t = report_data(None, b, before=_old_before(a))["threads"][0]
    # f folds its 3 levels into row 0 (own: its levels' sum); g is row 1
    assert t["bself"] == [2.0e-6, 0.0] and t["btotal"] == [3.0e-6, 0.0]
    assert t["bcalls"] == [2, 0]


def _peak(fn: Any) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_diff_of_a_deep_chain_takes_memory_linear_in_its_depth() -> None:
    depth = 4000
    a, b = _chain(depth), _chain(depth, own=2)
    ma = a.merged_threads()  # made before measuring
    fa, fb = a.function_totals(), b.function_totals()

    def text() -> None:
        format_diff(fa, fb, a, b)

    def page() -> None:
        cp = CallPaths()
        figures = interned_paths_of(ma, cp)
        report_data(None, b, before=(cp.ids, {i: (v[2], v[1], v[0]) for i, v in figures.items()}))

    # a tuple of keys per path holds depth^2 / 2 references: 64 MB at this depth
    bound = 3000 * depth  # 12 MB
    assert _peak(text) < bound
    assert _peak(page) < bound


def _save(tmp_path: Any, name: str, tree: CallTree) -> str:
    path = str(tmp_path / name)
    with open(path, "wb") as f:
        marshal.dump(pstats_of(tree.merged_threads()), f)
    tree.save(path + ".tree.json")
    return path


def test_diff_of_a_20000_deep_recursion(tmp_path: Any, capsys: Any) -> None:
    depth = 20_000
    a, b = _chain(depth), _chain(depth, own=2)
    paths, changes = path_changes(a, b)
    assert len(changes) == len(paths.parent) == depth
    deepest = max((i for i, _ in changes), key=lambda i: paths.depth[i])
    assert paths.depth[deepest] == depth and len(paths.path(deepest)) == depth
    # every path's own time doubled: the outermost changed most
    first, change = changes[0]
    assert paths.path(first) == (("/p/m.py", 1, "f"),)
    assert change == ((1, 1e-6, depth * 1e-6), (1, 2e-6, 2 * depth * 1e-6))
    pa, pb = _save(tmp_path, "a.prof", a), _save(tmp_path, "b.prof", b)
    assert diff_main([pa, pb, "--top", str(depth)]) == 0
    out = capsys.readouterr().out.splitlines()
    i = out.index(f"call paths that changed most ({depth} of {depth})")
    rows = out[i + 2 :]
    assert len(rows) == depth
    assert rows[0].endswith("  m.py:1(f)") and rows[1].endswith("  m.py:1(f) x2")
    assert rows[-1].endswith("  m.py:1(f) x19999 > m.py:9(g)")
    html = str(tmp_path / "d.html")
    assert diff_main([pa, pb, "--html", html]) == 0
    capsys.readouterr()
    page = open(html, encoding="utf-8").read()
    assert '"bcalls":[19999,1]' in page


# ---- folded stacks ------------------------------------------------------------------------

EVIL = "e\x00\x1b[31m\t\n\r\x7f\x85\x9f;\u202a\u202e\u2066\u2069"


def test_frame_names_escape_control_characters_and_bidi_overrides() -> None:
    assert frame_name(("/p/m.py", 3, EVIL)) == (
        "e\\x00\\x1b[31m\\t\\n\\r\\x7f\\x85\\x9f,\\u202a\\u202e\\u2066\\u2069 (/p/m.py:3)"
    )
    assert frame_name(("~", 0, "<built-in\nlen;>")) == "<built-in\\nlen,>"
    # as the text views write them, less ";", the format's separator
    assert frame_name(("~", 0, EVIL)) == printable(EVIL).replace(";", ",")
    # a file name that is not UTF-8 keeps its bytes (surrogateescape), printable text is kept
    assert frame_name(("/p/m\udcff.py", 1, "f")) == "f (/p/m\udcff.py:1)"
    assert frame_name(("/p/\u00e9t\u00e9.py", 1, "caf\u00e9 \U0001f600")) == (
        "caf\u00e9 \U0001f600 (/p/\u00e9t\u00e9.py:1)"
    )


def test_folded_lines_hold_one_path_each_and_no_control_character() -> None:
    keys = [("/p/m.py", 1, "main"), ("/p/m.py", 2, EVIL), ("/p/m\udcfe.py", 3, "x\u2067y")]
    nodes = [(-1, 0, 0, 1, 30, 10), (0, 1, 0, 1, 20, 10), (1, 2, 0, 1, 10, 10)]
    tree = CallTree.from_raw(1e-6, keys, nodes, [7])
    buf = io.StringIO()
    write_collapsed(tree, buf)
    text = buf.getvalue()
    lines = text.split("\n")
    assert lines[-1] == "" and len(lines[:-1]) == 3 == len(list(collapsed_lines(tree)))
    for line in lines[:-1]:
        frames, value = line.rsplit(" ", 1)
        assert value == "10000"
        assert all(c.isprintable() or "\ud800" <= c <= "\udfff" for c in line)
    assert lines[2].split(";") == [
        "main (/p/m.py:1)",
        frame_name(keys[1]),
        "x\\u2067y (/p/m\udcfe.py:3) 10000",
    ]


# ---- a malformed node cap -----------------------------------------------------------------

GOOD: Dict[str, Any] = {
    "format": "fastprof-tree",
    "version": 1,
    "merged": 0,
    "node_cap": None,
    "keys": [["a.py", 1, "f"]],
    "threads": [{"ident": 7, "nodes": [[-1, 0, 1, 1.0, 1.0]]}],
}


@pytest.mark.parametrize("cap", [[], {}, "x", "12", float("inf"), 1.5, -1, True])
def test_a_node_cap_that_is_not_a_count_is_a_malformed_tree(cap: Any) -> None:
    with pytest.raises(ValueError, match="malformed call tree: node cap"):
        CallTree.from_dict({**GOOD, "node_cap": cap})


def test_a_count_that_overflows_is_a_malformed_tree() -> None:
    for bad in (
        {**GOOD, "merged": 1e400},
        {**GOOD, "threads": [{"ident": 7, "nodes": [[-1, 0, 1e400, 1.0, 1.0]]}]},
        {**GOOD, "threads": [{"ident": 7, "nodes": [[-1, 0, 1, 10**400, 1.0]]}]},
    ):
        with pytest.raises(ValueError, match="malformed call tree: OverflowError"):
            CallTree.from_dict(bad)


def test_a_good_node_cap_is_kept() -> None:
    assert CallTree.from_dict(GOOD).node_cap is None
    assert CallTree.from_dict({**GOOD, "node_cap": 5000}).node_cap == 5000
    assert CallTree.from_dict({**GOOD, "node_cap": 0}).node_cap == 0


@pytest.mark.parametrize("cap", ["[]", "{}", "1e400", '"x"'])
def test_view_of_a_tree_file_with_a_bad_node_cap_says_so_in_one_line(
    cap: str, tmp_path: Any, capsys: Any
) -> None:
    path = str(tmp_path / "a.prof")
    with open(path, "wb") as f:
        marshal.dump(sample_stats(), f)
    text = json.dumps(sample_tree().to_dict()).replace('"node_cap": null', f'"node_cap": {cap}')
    assert f'"node_cap": {cap}' in text
    with open(path + ".tree.json", "w", encoding="utf-8") as f:
        f.write(text)
    assert cli.main(["view", path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"fastprof view: {path}.tree.json: malformed call tree: node cap ")
