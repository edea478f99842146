"""The HTML report: the data it inlines, and the page in a real browser (headless Chromium):
the top functions are on the page, zoom and search work, the console shows no error, and a
100,000-node profile loads (its time is printed; tests assert no wall-clock time)."""

from __future__ import annotations

import json
import re
from typing import Any, Dict

import pytest

from browser import chromium, probe
from fastprof.report.html import render_html, report_data
from fastprof.stats import Stats
from view_helpers import KEYS, big_tree, sample_stats, sample_tree


def _data(page: str) -> Dict[str, Any]:
    m = re.search(r'<script type="application/json" id="fastprof-data">(.*?)</script>', page, re.S)
    assert m is not None
    return json.loads(m.group(1))


def test_page_is_self_contained_and_inlines_the_data() -> None:
    page = render_html(Stats(sample_stats()), sample_tree(), title="t <b>&")
    assert "<title>t &lt;b&gt;&amp;</title>" in page
    # no network: nothing loaded from elsewhere
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "@import" not in page and "url(" not in page
    data = _data(page)
    assert [t["ident"] for t in data["threads"]] == [1001, 2002]
    t0 = data["threads"][0]
    assert len(t0["parent"]) == 12 - 2  # fib's two inner levels fold into the outer one
    assert sum(t0["calls"]) == 1 + 1 + 1 + 2 + 4 + 100 + 100 + 100 + 10 + 5 + 5 + 1000
    labels = {tuple(k[:3]): k[4] for k in data["keys"]}
    assert labels[KEYS[5]] == "{method 'reduce' of 'numpy.ufunc' objects}"
    locs = {tuple(k[:3]): k[5] for k in data["keys"]}
    assert locs[KEYS[6]] == "a/__init__.py:1" and locs[KEYS[7]] == "b/__init__.py:1"
    assert data["funcs"] and data["edges"]


def test_script_end_tags_in_names_cannot_break_out_of_the_data() -> None:
    from fastprof.tree import CallTree

    key = ("</script><script>alert(1)</script>.py", 1, "f\u2028")
    tree = CallTree.from_raw(1.0, [key], [(-1, 0, 0, 1, 1, 1)], [1])
    page = render_html(None, tree)
    assert page.count("</script>") == 2  # the data's and the page script's
    assert _data(page)["keys"][0][0] == key[0]


def test_the_thread_selector_names_each_thread_as_the_tree_view_does() -> None:
    tree = sample_tree()
    tree.names = {1001: "MainThread", 2002: "worker\x1b[31m"}
    labels = [t["label"] for t in report_data(None, tree)["threads"]]
    assert labels == ["MainThread: thread 1 (id 1001)", "worker\\x1b[31m: thread 2 (id 2002)"]
    tree.names = {}
    labels = [t["label"] for t in report_data(None, tree)["threads"]]
    assert labels == ["thread 1 (id 1001)", "thread 2 (id 2002)"]


def test_line_timings_are_inlined_with_their_source(tmp_path: Any) -> None:
    from fastprof.lines import LineStats

    src = tmp_path / "m.py"
    src.write_text("def f():\n    x = 1\n    return x\n")
    ls = LineStats({(str(src), 1, "f"): [(2, 3, 30), (3, 3, 10)]}, 1e-6)
    data = report_data(None, None, ls)
    assert data["lines"] == [
        {
            "file": str(src),
            "line": 1,
            "name": "f",
            "rows": [[2, 3, 30 * 1e-6, "    x = 1"], [3, 3, 10 * 1e-6, "    return x"]],
        }
    ]


_browser, _why = chromium()
needs_browser = pytest.mark.skipif(_browser is None, reason=f"no headless Chromium: {_why}")


@needs_browser
def test_page_in_a_browser_zoom_search_and_no_console_error(tmp_path: Any) -> None:
    page = render_html(Stats(sample_stats()), sample_tree(), title="sample")
    out = probe(
        _browser,
        page,
        """
        var s = {};
        s.options = Array.from(document.querySelectorAll('#thread option')).map(o => o.textContent);
        s.rows = Array.from(document.querySelectorAll('#funcs tbody tr')).map(
            tr => tr.children[0].textContent + ' ' + tr.children[1].textContent);
        var V = window.fastprof.view();
        s.before = window.fastprofState.focus;
        // a real click on the frame of main: merged view, depth 2 (root, <module>, main)
        var c = document.getElementById('flame'), r = c.getBoundingClientRect();
        c.dispatchEvent(new MouseEvent('click',
            {clientX: r.left + 5, clientY: r.top + 2 * 18 + 9, bubbles: true}));
        var f = window.fastprofState.focus;
        s.zoomed = f > 0 ? document.getElementById('zoom-info').textContent : null;
        s.zoomTotal = V.total[f];
        document.getElementById('reset').click();
        s.reset = window.fastprofState.focus;
        var box = document.getElementById('search');
        box.value = 'helper'; box.dispatchEvent(new Event('input'));
        s.search = document.getElementById('search-info').textContent;
        window.fastprof.selectThread('1');
        s.thread1 = window.fastprof.view().label;
        s.search1 = document.getElementById('search-info').textContent;
        var fl = document.getElementById('filter');
        fl.value = '__init__'; fl.dispatchEvent(new Event('input'));
        s.filtered = document.querySelectorAll('#funcs tbody tr').length;
        document.querySelector('#funcs tbody tr').click();
        s.detail = document.getElementById('detail').textContent;
        fl.value = ''; fl.dispatchEvent(new Event('input'));
        document.querySelectorAll('#funcs thead th')[2].click();  // sort by calls
        s.sortedFirst = document.querySelector('#funcs tbody tr td').textContent;
        return s;
    """,
        str(tmp_path),
    )
    assert out["errors"] == []
    s = out["result"]
    assert s["options"][0] == "all threads (summed by path)" and len(s["options"]) == 3
    # the top functions by own time are the table's first rows
    assert s["rows"][:3] == [
        "helper a/__init__.py:1",
        "fib app.py:20",
        "{method 'reduce' of 'numpy.ufunc' objects} ",
    ]
    assert s["before"] == 0
    assert s["zoomed"] == "zoomed on main (70.7% of the thread)"
    assert s["zoomTotal"] == pytest.approx(0.99)
    assert s["reset"] == 0
    # helper under main twice, under worker once; the time of the matches is 0.1+0.06+0.3 of 1.4
    assert s["search"] == "3 frames match, 32.9% of the thread"
    assert s["thread1"].startswith("thread 2")
    assert s["search1"] == "1 frames match, 75.0% of the thread"
    assert s["filtered"] == 2
    assert "callers" in s["detail"] and "main  app.py:10" in s["detail"]
    assert s["sortedFirst"] == "{built-in method builtins.len}"  # 1000 calls


@needs_browser
def test_a_100000_node_profile_loads_and_draws(tmp_path: Any, capsys: Any) -> None:
    tree = big_tree(100_000, seed=7)
    page = render_html(None, tree, title="big")
    out = probe(
        _browser,
        page,
        """
        var s = {drawn: window.fastprofState.drawn, n: window.fastprof.view().n};
        // the canvas is the visible box's size, whatever the graph's height; scrolling repaints
        var wrap = document.getElementById('flame-wrap'), c = document.getElementById('flame');
        s.graph = document.getElementById('flame-space').offsetHeight;
        wrap.scrollTop = 3000; wrap.dispatchEvent(new Event('scroll'));
        s.canvasTop = parseInt(c.style.top); s.canvasH = c.offsetHeight; s.boxH = wrap.clientHeight;
        var t = performance.now();
        window.fastprof.zoomTo(5);
        s.zoom_ms = performance.now() - t;
        t = performance.now();
        s.matches = window.fastprof.search('func_12');
        s.search_ms = performance.now() - t;
        return s;
    """,
        str(tmp_path),
    )
    assert out["errors"] == []
    s = out["result"]
    # every node is a frame, less the direct recursions folded into their outer call
    rows = len(report_data(None, tree)["threads"][0]["parent"])
    assert s["n"] == rows + 1 and 99_000 < rows <= 100_000 and s["drawn"] > 100
    assert s["graph"] > 3000 + s["boxH"] and s["canvasTop"] == 3000 and s["canvasH"] == s["boxH"]
    assert s["matches"] > 0
    with capsys.disabled():
        print(
            f"\n100,000-node report ({len(page) / 1e6:.1f} MB): loaded and drawn "
            f"{out['load_ms']:.0f} ms after navigation; zoom {s['zoom_ms']:.0f} ms, "
            f"search {s['search_ms']:.0f} ms"
        )


@needs_browser
def test_page_without_a_tree_shows_the_table_and_no_error(tmp_path: Any) -> None:
    page = render_html(Stats(sample_stats()), None, title="flat")
    out = probe(
        _browser,
        page,
        """
        window.fastprof.search('x');  // no tree: nothing to highlight, and no error
        return {rows: document.querySelectorAll('#funcs tbody tr').length,
                note: document.getElementById('legend').textContent};
    """,
        str(tmp_path),
    )
    assert out["errors"] == []
    assert out["result"]["rows"] == 11
    assert out["result"]["note"].startswith("No call tree in this profile")


@needs_browser
def test_page_of_an_empty_profile_says_nothing_was_recorded(tmp_path: Any) -> None:
    import cProfile

    prof = cProfile.Profile()
    prof.enable()
    prof.disable()  # a profile of its own disable() alone, as `fastprof view` reads it
    out = probe(
        _browser,
        render_html(Stats(prof), None, title="empty"),
        "return {note: document.getElementById('legend').textContent,"
        " summary: document.getElementById('summary').textContent};",
        str(tmp_path),
    )
    assert out["errors"] == []
    assert out["result"]["note"] == "Nothing was recorded: the profile holds no calls."


@needs_browser
def test_differential_page_and_line_timings_page(tmp_path: Any) -> None:
    from fastprof.diff import paths_of
    from fastprof.lines import LineStats

    tree = sample_tree()
    before = {p: (v[2] / 2, v[1] / 2, v[0]) for p, v in paths_of(tree.merged_threads()).items()}
    page = render_html(
        Stats(sample_stats()),
        tree,
        title="diff",
        before=before,
        before_funcs={k: (1, 0.0, 0.0) for k in KEYS},
    )
    out = probe(
        _browser,
        page,
        """
        var th = Array.from(document.querySelectorAll('#funcs thead th')).map(t => t.textContent);
        return {th: th, summary: document.getElementById('summary').textContent};
    """,
        str(tmp_path),
    )
    assert out["errors"] == []
    assert out["result"]["th"][3] == "\u0394 calls"
    assert "differential" in out["result"]["summary"]
    src = tmp_path / "m.py"
    src.write_text("def f():\n    x = 1\n    return x\n")
    ls = LineStats({(str(src), 1, "f"): [(2, 3, 30), (3, 3, 10)]}, 1e-6)
    out = probe(
        _browser,
        render_html(None, None, ls),
        """
        return {rows: Array.from(document.querySelectorAll('.lines tbody tr')).map(
            tr => Array.from(tr.children).map(td => td.textContent)),
          summary: document.getElementById('summary').textContent,
          note: document.getElementById('legend').textContent};
    """,
        str(tmp_path),
    )
    assert out["errors"] == []
    assert out["result"]["rows"] == [
        ["2", "3", "30.0 \u00b5s", "10.0 \u00b5s", "75.0%", "    x = 1"],
        ["3", "3", "10.0 \u00b5s", "3.3 \u00b5s", "25.0%", "    return x"],
    ]
    # a page of line timings alone says so (no "0 functions", no pstats file)
    assert out["result"]["summary"] == "line timings of 1 function"
    assert out["result"]["note"] == "Line timings only: they are below."


def test_direct_recursion_is_one_frame_with_its_depth() -> None:
    from fastprof.tree import CallTree

    keys = [("/p/m.py", 1, "f"), ("/p/m.py", 9, "g")]
    depth = 20_000
    nodes = [(i - 1, 0, 0, 1, depth - i, 1) for i in range(depth)] + [(depth - 1, 1, 0, 1, 1, 1)]
    data = report_data(None, CallTree.from_raw(1e-6, keys, nodes, [5]))
    (t,) = data["threads"]
    assert t["parent"] == [-1, 0] and t["levels"] == [depth, 1]
    assert t["calls"] == [depth, 1] and t["self"][0] == pytest.approx(depth * 1e-6)
    assert t["total"][0] == pytest.approx(depth * 1e-6)
    # the sample: fib -> fib -> fib under main is one frame of 3 levels and 7 calls
    t0 = report_data(None, sample_tree())["threads"][0]
    names = report_data(None, sample_tree())["keys"]
    fib = [i for i, k in enumerate(t0["key"]) if names[k][2] == "fib"]
    assert len(fib) == 1 and t0["levels"][fib[0]] == 3 and t0["calls"][fib[0]] == 7
