"""The command line: python -m fastprof [run] ..., view, compare; argv and exit codes kept."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any, List

import pytest

import fastprof
from fastprof import cli

SCRIPT = textwrap.dedent("""
    import sys

    def helper(n):
        return sum(range(n))

    def main():
        print("argv=" + repr(sys.argv))
        print("name=" + __name__)
        for _ in range(3):
            helper(10)
        code = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 0
        sys.exit(code)

    if __name__ == "__main__":
        main()
""")


@pytest.fixture
def script(tmp_path: Any) -> str:
    path = tmp_path / "prog.py"
    path.write_text(SCRIPT)
    return str(path)


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def run_fastprof(args: List[str], cwd: Any = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fastprof"] + args,
        capture_output=True,
        text=True,
        env=_env(),
        cwd=cwd,
        timeout=120,
    )


# -- in-process (quick) ---------------------------------------------------------------------


def test_run_keeps_argv_and_exit_status(script: str, capsys: Any) -> None:
    saved = sys.argv[:]
    assert cli.main(["run", script, "7", "--top", "x", "-o"]) == 7
    out = capsys.readouterr().out
    assert f"argv={[script, '7', '--top', 'x', '-o']!r}" in out
    assert "name=__main__" in out
    assert "prog.py:4(helper)" in out
    assert sys.argv == saved  # restored


def test_run_is_the_default_command(script: str, capsys: Any) -> None:
    assert cli.main(["-s", "calls", "--top", "3", script]) == 0
    out = capsys.readouterr().out
    assert "argv=" in out and "sorted by calls" in out
    body = out.split("ncalls", 1)[1].strip().splitlines()[1:]
    assert len(body) == 3


def test_output_file_then_view(script: str, tmp_path: Any, capsys: Any) -> None:
    prof = str(tmp_path / "prog.prof")
    assert cli.main(["-o", prof, script]) == 0
    captured = capsys.readouterr()
    assert "helper" not in captured.out  # saved, not printed (as cProfile)
    assert prof in captured.err
    st = fastprof.Stats(prof)
    assert st.row("helper").ncalls == 3
    assert cli.main(["view", prof, "-s", "calls", "--filter", "helper"]) == 0
    out = capsys.readouterr().out
    assert "prog.py:4(helper)" in out and "1 functions" in out


def test_no_builtins(script: str, tmp_path: Any, capsys: Any) -> None:
    with_b, without = str(tmp_path / "a.prof"), str(tmp_path / "b.prof")
    cli.main(["run", "-o", with_b, script])
    cli.main(["run", "--no-builtins", "-o", without, script])
    capsys.readouterr()
    assert any(r.is_builtin for r in fastprof.Stats(with_b).rows)
    assert not any(r.is_builtin for r in fastprof.Stats(without).rows)


def test_module_mode(tmp_path: Any, monkeypatch: Any, capsys: Any) -> None:
    pkg = tmp_path / "fp_cli_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "tool.py").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "--all", "-m", "fp_cli_pkg.tool", "5"]) == 5
    out = capsys.readouterr().out
    assert "argv=" in out and "tool.py" in out and "'5'" in out
    assert "tool.py:4(helper)" in out


def test_script_exception_exits_1_with_traceback(tmp_path: Any) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    raise KeyError('broken')\nf()\n")
    r = run_fastprof([str(bad)])
    assert r.returncode == 1
    assert "KeyError: 'broken'" in r.stderr
    assert "bad.py:1(f)" in r.stdout  # what ran is still reported


def test_errors(tmp_path: Any, capsys: Any) -> None:
    assert cli.main(["run", str(tmp_path / "nope.py")]) == 2
    assert "can't open file" in capsys.readouterr().err
    assert cli.main(["run"]) == 2
    assert "give a script" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "-s", "speed", "x.py"])
    assert e.value.code == 2
    assert "option -s: invalid choice: 'speed'" in capsys.readouterr().err  # cProfile's words
    with pytest.raises(SystemExit):
        cli.main(["run", "--top", "0", "x.py"])
    assert "positive integer" in capsys.readouterr().err
    junk = tmp_path / "junk.prof"
    junk.write_bytes(b"junk")
    assert cli.main(["view", str(junk)]) == 2
    assert "not a profile" in capsys.readouterr().err
    assert cli.main([]) == 2
    assert "usage" in capsys.readouterr().err


def test_help(capsys: Any) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "view" in out and "compare" in out
    assert "demo" in out  # every command offered exists (tests/test_demo.py runs it)
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out == f"fastprof {fastprof.__version__}\n"
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "-h"])
    assert e.value.code == 0
    assert "--no-builtins" in capsys.readouterr().out


def test_compare_is_dispatched(monkeypatch: Any) -> None:
    import types

    seen: list = []
    fake = types.ModuleType("fastprof.compare")
    fake.main = lambda argv: seen.append(argv) or 4  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fastprof.compare", fake)
    monkeypatch.setattr(fastprof, "compare", fake, raising=False)
    assert cli.main(["compare", "a", "--b"]) == 4
    assert seen == [["a", "--b"]]


def test_split_of_options_and_script_arguments() -> None:
    split = cli._run_args.split
    assert split(["-o", "x.prof", "s.py", "-o", "y"]) == (["-o", "x.prof"], ["s.py", "-o", "y"])
    assert split(["--top", "3", "-m", "mod", "--top"]) == (["--top", "3", "-m", "mod"], ["--top"])
    assert split(["-mmod", "a"]) == (["-m", "mod"], ["a"])
    assert split(["--no-builtins", "--", "-weird.py"]) == (["--no-builtins"], ["-weird.py"])


# -- as a real process ---------------------------------------------------------------------


def test_python_dash_m_fastprof(script: str, tmp_path: Any) -> None:
    r = run_fastprof(["run", "-s", "cumulative", script, "3", "extra"])
    assert r.returncode == 3, r.stderr
    assert f"argv={[script, '3', 'extra']!r}" in r.stdout
    assert "prog.py:4(helper)" in r.stdout
    # cProfile's spelling of the same command works too
    r = run_fastprof(["-o", str(tmp_path / "p.prof"), script])
    assert r.returncode == 0
    r = run_fastprof(["view", str(tmp_path / "p.prof"), "--top", "5"])
    assert r.returncode == 0 and "5 of" in r.stdout


LINES_SCRIPT = textwrap.dedent("""
    import json

    @profile
    def work():
        return json.dumps([1, 2])

    work()
""")


def test_lines_options_wire_the_line_profiler(tmp_path: Any, fake_lines: list, capsys: Any) -> None:
    import builtins

    path = tmp_path / "lines.py"
    path.write_text(LINES_SCRIPT)
    assert cli.main(["run", "--lines", "--lines-of", "json:loads", str(path)]) == 0
    (lp,) = fake_lines
    assert [f.__name__ for f in lp.funcs] == ["loads", "work"]
    assert lp.events == ["enable", "disable"]
    assert "LINE STATS loads,work" in capsys.readouterr().out
    assert not hasattr(builtins, "profile")  # taken away after the run
    out = tmp_path / "lines.lprof"
    assert cli.main(["run", "--lines", "-o", str(out), str(path)]) == 0
    assert out.read_text() == "work"
    assert cli.main(["run", "--lines-of", "json:no_such_function", str(path)]) == 2
    assert "--lines-of json:no_such_function" in capsys.readouterr().err


def test_table_printed_when_the_script_closes_or_replaces_stdout(tmp_path: Any) -> None:
    closer = tmp_path / "closer.py"
    closer.write_text("import sys\nprint('bye')\nsys.stdout.close()\n")
    r = run_fastprof([str(closer)])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("bye\n") and "function calls" in r.stdout
    swapper = tmp_path / "swapper.py"
    swapper.write_text(
        "import io, sys\nprint('visible')\nsys.stdout = io.StringIO()\nprint('hidden')\n"
    )
    r = run_fastprof([str(swapper)])
    assert r.returncode == 0, r.stderr
    assert "visible" in r.stdout and "hidden" not in r.stdout
    assert "function calls" in r.stdout


def test_console_script(script: str) -> None:
    exe = os.path.join(os.path.dirname(sys.executable), "fastprof")
    if not os.path.exists(exe):
        pytest.skip("the fastprof console script exists once the package is pip-installed")
    r = subprocess.run(
        [exe, "run", script, "4"], capture_output=True, text=True, env=_env(), timeout=120
    )
    assert r.returncode == 4, r.stderr
    assert "prog.py:4(helper)" in r.stdout


def test_script_runs_as_a_real_main_module(tmp_path: Any, capsys: Any) -> None:
    path = tmp_path / "pick.py"
    path.write_text(
        textwrap.dedent("""
        import pickle, sys

        class Point:
            def __init__(self, x):
                self.x = x

        p = pickle.loads(pickle.dumps(Point(3)))
        print("unpickled", p.x, sys.modules["__main__"].Point is Point)
    """)
    )
    main_before = sys.modules["__main__"]
    assert cli.main(["run", str(path)]) == 0
    assert "unpickled 3 True" in capsys.readouterr().out
    assert sys.modules["__main__"] is main_before


def test_compare_reaches_the_real_module(tmp_path: Any, capsys: Any) -> None:
    assert cli.main(["compare", "-h"]) == 0
    assert "A.json" in capsys.readouterr().out
    missing = str(tmp_path / "missing.json")
    assert cli.main(["compare", missing, missing]) == 2
    assert "fastprof compare" in capsys.readouterr().err
