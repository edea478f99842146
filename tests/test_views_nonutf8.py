"""Names that are not UTF-8 (a file at ``m\\xff.py``, which Python sees as ``'m\\udcff.py'``)
in every writer: the HTML page, its title and its file; speedscope and the Chrome trace; and
the folded stacks and callgrind written to a strict UTF-8 standard output.  A page, a view and
a JSON export show such a name as the terminal views do (``m\\udcff.py``); the byte-exact
exports (folded stacks, callgrind) keep its bytes, on the standard output as with -o."""

from __future__ import annotations

import io
import json
import marshal
import os
import re
import subprocess
import sys
from types import SimpleNamespace
from typing import Any, Dict, Iterator, List

import pytest

from browser import chromium, probe
from fastprof import cli
from fastprof.report import html as html_mod
from fastprof.report.escape import printable, without_surrogates
from fastprof.report.html import render_html, write_html
from fastprof.stats import Stats
from fastprof.tree import CallTree

ODD = "/p/m4\udcff.py"  # b"/p/m4\xff.py" as the file system decodes it
SHOWN = "m4\\udcff.py"  # as the terminal views print it
KEY = (ODD, 1, "f\udcfe")
MAIN = ("/p/app.py", 1, "<module>")


def _tree() -> CallTree:
    t = CallTree.from_raw(1e-3, [MAIN, KEY], [(-1, 0, 0, 1, 10, 2), (0, 1, 0, 4, 8, 8)], [7])
    t.names = {7: "w\udcfd"}
    return t


def _stats() -> Stats:
    return Stats(
        {
            MAIN: (1, 1, 0.002, 0.01, {}),
            KEY: (4, 4, 0.008, 0.008, {MAIN: (4, 4, 0.008, 0.008)}),
        }
    )


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value, keys too."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _no_surrogate(value: Any) -> None:
    for s in _strings(value):
        assert not re.search("[\ud800-\udfff]", s), ascii(s)


def _page_data(page: str) -> Dict[str, Any]:
    m = re.search(r'<script type="application/json" id="fastprof-data">(.*?)</script>', page, re.S)
    assert m is not None
    data: Dict[str, Any] = json.loads(m.group(1))
    return data


def _check_page_file(path: str, shown: str) -> Dict[str, Any]:
    """The page at ``path``: valid UTF-8, its data without a lone surrogate, ``shown`` in it."""
    with open(path, "rb") as f:
        page = f.read().decode("utf-8")  # strict: the page is valid UTF-8
    data = _page_data(page)
    _no_surrogate(data)
    assert any(shown in s for s in _strings(data)), data["keys"]
    return data


# ---- the escape rule ----------------------------------------------------------------------


def test_one_escape_rule_for_lone_surrogates() -> None:
    assert printable(ODD) == "/p/" + SHOWN
    assert without_surrogates(ODD) == printable(ODD)
    # without_surrogates keeps what a JSON file can hold: control characters, pairs, emoji
    assert without_surrogates("a\nb\U0001f600") == "a\nb\U0001f600"
    text = "plain"
    assert without_surrogates(text) is text


# ---- the HTML page ------------------------------------------------------------------------


def test_the_pages_data_has_no_lone_surrogate_and_shows_the_escaped_name() -> None:
    page = render_html(_stats(), _tree(), title="fastprof: s\udcff.py")
    page.encode("utf-8")  # strict
    assert "<title>fastprof: s\\udcff.py</title>" in page
    data = _page_data(page)
    _no_surrogate(data)
    assert data["title"] == "fastprof: s\\udcff.py"
    row = next(k for k in data["keys"] if k[1] == 1 and k[2] == "f\\udcfe")
    # [file, line, name, library, label, location]
    assert row == ["/p/" + SHOWN, 1, "f\\udcfe", "", "f\\udcfe", SHOWN + ":1"]
    assert data["threads"][0]["label"] == "w\\udcfd: thread 1 (id 7)"


def test_line_timings_of_a_file_that_is_not_utf8(tmp_path: Any) -> None:
    from fastprof.lines import LineStats

    src = os.path.join(str(tmp_path), "l\udcff.py")
    with open(src, "w", encoding="utf-8") as f:
        f.write("def f():\n    return 1\t# \x1b[31m\n")
    ls = LineStats({(src, 1, "f\udcfe"): [(2, 1, 5)]}, 1e-6)
    data = html_mod.report_data(None, None, ls, title="t")
    _no_surrogate(data)
    (fn,) = data["lines"]
    assert fn["file"].endswith("l\\udcff.py") and fn["name"] == "f\\udcfe"
    assert fn["rows"][0][3] == "    return 1\t# \\x1b[31m"  # as the lines view: tabs kept


def test_write_html_with_a_title_that_is_not_utf8_writes_the_whole_page(tmp_path: Any) -> None:
    path = os.path.join(str(tmp_path), "o\udcff.html")
    write_html(path, _stats(), _tree(), title="fastprof: s\udcff.py")
    data = _check_page_file(path, SHOWN)
    assert data["title"] == "fastprof: s\\udcff.py"


def test_write_html_leaves_no_file_when_the_page_cannot_be_made(tmp_path: Any) -> None:
    class Broken:
        @property
        def rows(self) -> List[Any]:
            raise ValueError("no rows")

    path = tmp_path / "o.html"
    with pytest.raises(ValueError, match="no rows"):
        write_html(str(path), Broken(), None)
    assert not path.exists()


def test_write_html_removes_a_partly_written_file(tmp_path: Any, monkeypatch: Any) -> None:
    real_open = open

    class Full(io.FileIO):
        def write(self, data: Any) -> int:
            super().write(bytes(data)[:100])
            raise OSError(28, "No space left on device")

    def fake_open(path: Any, mode: str = "r", *a: Any, **kw: Any) -> Any:
        if mode == "wb":
            return Full(path, "w")
        return real_open(path, mode, *a, **kw)

    monkeypatch.setattr(html_mod, "open", fake_open, raising=False)
    path = tmp_path / "o.html"
    with pytest.raises(OSError, match="No space left"):
        write_html(str(path), _stats(), _tree())
    assert not path.exists()


def _run_script(tmp_path: Any) -> str:
    """A script at a path that is not UTF-8 that calls a function of a module at another."""
    d = str(tmp_path)
    with open(os.path.join(d, "m4\udcff.py"), "w") as f:
        f.write("def f():\n    return sum(range(1000))\n")
    script = os.path.join(d, "s\udcff.py")
    with open(script, "w") as f:
        f.write(
            "import importlib.util, os\n"
            "p = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'm4\\udcff.py')\n"
            "spec = importlib.util.spec_from_file_location('m4', p)\n"
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
            "m.f()\n"
        )
    return script


def test_run_view_and_diff_html_with_paths_that_are_not_utf8(tmp_path: Any, capsys: Any) -> None:
    script = _run_script(tmp_path)
    page = os.path.join(str(tmp_path), "run.html")
    saved = os.path.join(str(tmp_path), "p.prof")
    assert cli.main(["run", "--html", page, "-o", saved, script]) == 0
    data = _check_page_file(page, SHOWN)
    assert "s\\udcff.py" in data["title"]
    assert any(k[5] == SHOWN + ":1" for k in data["keys"])
    capsys.readouterr()
    prof = os.path.join(str(tmp_path), "p\udcff.prof")  # (run's note on -o would print it)
    os.rename(saved, prof)
    os.rename(saved + ".tree.json", prof + ".tree.json")
    page = os.path.join(str(tmp_path), "view.html")
    assert cli.main(["view", prof, "--html", page]) == 0
    data = _check_page_file(page, SHOWN)
    assert "p\\udcff.prof" in data["title"]
    page = os.path.join(str(tmp_path), "diff.html")
    assert cli.main(["diff", prof, prof, "--html", page]) == 0
    data = _check_page_file(page, SHOWN)
    assert data["diff"] and "p\\udcff.prof -> " in data["title"]


def test_the_table_only_page_of_a_cprofile_file(tmp_path: Any, capsys: Any) -> None:
    import cProfile

    code = compile("def f():\n    return 1\nf()\n", ODD, "exec")
    p = cProfile.Profile()
    p.enable()
    exec(code, {})
    p.disable()
    prof = os.path.join(str(tmp_path), "c\udcff.prof")
    p.dump_stats(prof)
    assert not os.path.exists(prof + ".tree.json")
    page = os.path.join(str(tmp_path), "c.html")
    assert cli.main(["view", prof, "--html", page]) == 0
    data = _check_page_file(page, SHOWN)
    assert data["threads"] == [] and any(k[5] == SHOWN + ":1" for k in data["keys"])


_browser, _why = chromium()


@pytest.mark.skipif(_browser is None, reason=f"no headless Chromium: {_why}")
def test_the_page_renders_a_name_that_is_not_utf8_in_a_browser(tmp_path: Any) -> None:
    assert _browser is not None
    page = render_html(_stats(), _tree(), title="fastprof: s\udcff.py")
    out = probe(
        _browser,
        page,
        """
        return {
          title: document.title,
          h1: document.getElementById('title').textContent,
          options: Array.from(document.querySelectorAll('#thread option')).map(o => o.textContent),
          rows: Array.from(document.querySelectorAll('#funcs tbody tr')).map(
            tr => tr.children[0].textContent + ' ' + tr.children[1].textContent),
        };
        """,
        str(tmp_path),
    )
    assert out["errors"] == []
    r = out["result"]
    assert r["title"] == r["h1"] == "fastprof: s\\udcff.py"
    assert r["options"] == ["w\\udcfd: thread 1 (id 7) \u2014 100.0%"]
    assert "f\\udcfe " + SHOWN + ":1" in r["rows"]


# ---- the JSON exports ---------------------------------------------------------------------


def test_speedscope_holds_no_lone_surrogate(tmp_path: Any) -> None:
    from fastprof.report.speedscope import write_speedscope

    buf = io.StringIO()
    write_speedscope(_tree(), buf, name="s\udcff.py")
    doc = json.loads(buf.getvalue())
    _no_surrogate(doc)
    frames = doc["shared"]["frames"]
    assert {"name": "f\\udcfe", "file": "/p/" + SHOWN, "line": 1} in frames
    assert doc["name"] == "s\\udcff.py"
    assert doc["profiles"][0]["name"] == "w\\udcfd: thread 1 (id 7)"


def _timeline() -> Any:
    return SimpleNamespace(
        spans=[(0, 5000, MAIN, 0, 0), (1000, 4000, KEY, 0, 1)],
        threads=[SimpleNamespace(order=0, ident=7, native_id=70, name="w\udcfd")],
        dropped=0,
        filtered=0,
        too_short=0,
        capacity=16,
        min_duration=0.0,
        include=("m4\udcff",),
        exclude=(),
        name_of=lambda key: key[2],
    )


def test_the_chrome_trace_holds_no_lone_surrogate(tmp_path: Any) -> None:
    from fastprof.report.chrome import chrome_trace, chrome_trace_text, write_chrome_trace

    tl = _timeline()
    text = chrome_trace_text(tl, pid=1, process_name="python s\udcff.py")
    doc = json.loads(text)
    assert doc == json.loads(json.dumps(chrome_trace(tl, pid=1, process_name="python s\udcff.py")))
    _no_surrogate(doc)
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert spans[1]["name"] == "f\\udcfe" and spans[1]["args"]["file"] == "/p/" + SHOWN
    meta = {
        e["name"]: e["args"]["name"]
        for e in doc["traceEvents"]
        if e["ph"] == "M" and e["name"] in ("process_name", "thread_name")
    }
    assert meta == {"process_name": "python s\\udcff.py", "thread_name": "w\\udcfd"}
    assert doc["otherData"]["include"] == ["m4\\udcff"]
    out = write_chrome_trace(str(tmp_path / "t.json"), text)
    _no_surrogate(json.loads(open(out, "rb").read().decode("utf-8")))


# ---- folded stacks and callgrind on a strict UTF-8 standard output -----------------------


@pytest.fixture
def odd_prof(tmp_path: Any) -> str:
    path = str(tmp_path / "r.prof")
    with open(path, "wb") as f:
        marshal.dump(_stats().to_dict(), f)
    _tree().save(path + ".tree.json")
    return path


@pytest.mark.parametrize("fmt", ["collapsed", "callgrind", "speedscope"])
def test_stdout_gets_the_bytes_of_o(
    odd_prof: str, tmp_path: Any, monkeypatch: Any, capsys: Any, fmt: str
) -> None:
    out = tmp_path / f"o.{fmt}"
    assert cli.main(["view", odd_prof, "--format", fmt, "-o", str(out)]) == 0
    raw = io.BytesIO()
    strict = io.TextIOWrapper(raw, encoding="utf-8", errors="strict", write_through=True)
    strict.write("before\n")  # what the text layer holds is written first
    monkeypatch.setattr(sys, "stdout", strict)
    assert cli.main(["view", odd_prof, "--format", fmt]) == 0
    monkeypatch.undo()
    assert raw.getvalue() == b"before\n" + out.read_bytes()
    if fmt != "speedscope":
        assert b"m4\xff.py" in raw.getvalue()  # the file's bytes, as -o writes them


def test_run_format_collapsed_to_a_strict_stdout(tmp_path: Any) -> None:
    script = _run_script(tmp_path)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
        PYTHONIOENCODING="utf-8:strict",
    )
    cmd = [sys.executable, "-m", "fastprof", "run", "--format", "collapsed"]
    r = subprocess.run(cmd + [script], env=env, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    leaves = [line.split(b";")[-1] for line in r.stdout.splitlines()]
    assert any(x.startswith(b"f (") and b"m4\xff.py:1) " in x for x in leaves), r.stdout


def test_run_o_to_a_path_that_is_not_utf8_under_a_strict_stderr(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """The "profile written to" note names an -o path that is not UTF-8 with its escape, as
    the views name files: a strict UTF-8 stderr (a notebook's, a test's capture) failed on it
    after the run."""
    script = _run_script(tmp_path)
    out = os.path.join(str(tmp_path), "o\udcff.prof")
    raw = io.BytesIO()
    strict = io.TextIOWrapper(raw, encoding="utf-8", errors="strict", write_through=True)
    monkeypatch.setattr(sys, "stderr", strict)
    assert cli.main(["run", "-o", out, script]) == 0
    monkeypatch.undo()
    assert b"profile written to " in raw.getvalue(), raw.getvalue()
    assert b"o\\udcff.prof" in raw.getvalue()
    assert os.path.exists(out)
