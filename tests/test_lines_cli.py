"""The pieces the command line uses for line timing: the kernprof-style builtin `profile`,
"module:qualname" resolution, registration inside a compiled script, and the CLI itself."""

import builtins
import io
import subprocess
import sys
import textwrap

import pytest

from fastprof import LineProfiler
from fastprof.lines import kernprof_builtin, resolve_function
from profile_helpers import env_with_package

SCRIPT = textwrap.dedent("""\
    @profile
    def work(n):
        total = 0
        for i in range(n):
            total += i
        return total

    class Box:
        @profile
        def size(self):
            return 3

    def helper(k):
        return k * 2

    print(work(10), Box().size(), helper(4))
    """)


def _run_script_like_the_cli(path, lines_of=()):
    """What `fastprof run --lines script.py` does: compile, register, enable, exec."""
    lp = LineProfiler()
    with open(path) as f:
        code = compile(f.read(), path, "exec")
    for qualname in lines_of:
        assert lp.add_from_code(code, qualname) == 1
    old = getattr(builtins, "profile", None)
    builtins.profile = kernprof_builtin(lp)
    try:
        with lp:
            exec(code, {"__name__": "__main__", "__file__": path})
    finally:
        if old is None:
            del builtins.profile
        else:
            builtins.profile = old
    return lp


def _name(qualname):
    """The name line_profiler keys a function by: its qualified name on 3.11+, else bare."""
    return qualname if sys.version_info >= (3, 11) else qualname.rpartition(".")[2]


def _hits(stats, qualname):
    (rows,) = [v for k, v in stats.timings.items() if k[2] == _name(qualname)]
    return [h for _, h, _ in rows]


def test_builtin_profile_decorator_registers_and_wraps_the_function(tmp_path):
    path = tmp_path / "script.py"
    path.write_text(SCRIPT)
    lp = _run_script_like_the_cli(str(path))
    st = lp.get_stats()
    assert _hits(st, "work") == [1, 11, 10, 1]
    assert _hits(st, "Box.size") == [1]
    assert not any(k[2] == "helper" for k in st.timings)


def test_lines_of_selects_functions_without_editing_code(tmp_path):
    path = tmp_path / "script.py"
    path.write_text(SCRIPT)
    lp = _run_script_like_the_cli(str(path), lines_of=["helper", "Box.size"])
    st = lp.get_stats()
    assert _hits(st, "helper") == [1]
    assert _hits(st, "Box.size") == [1]


def test_builtin_works_when_profiling_is_off():
    lp = LineProfiler()
    prof = kernprof_builtin(lp)

    def f(x):
        return x + 1

    wrapped = prof(f)  # kernprof's @profile: a wrapper that profiles while it runs
    assert wrapped is not f and wrapped.__wrapped__ is f and wrapped(1) == 2
    assert lp.functions == [f]
    out = io.StringIO()
    prof.print_stats(stream=out)  # kernprof scripts may call profile.print_stats()
    assert f"Function: {_name(f.__qualname__)} at line" in out.getvalue()
    with pytest.raises(TypeError, match="fastprof.LineProfiler"):
        kernprof_builtin(object())


def test_resolve_function_module_and_file(tmp_path, monkeypatch):
    mod = tmp_path / "lines_resolve_mod.py"
    mod.write_text("class A:\n    def m(self):\n        return 1\n\ndef top():\n    return 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    top = resolve_function("lines_resolve_mod:top")
    assert top() == 2
    method = resolve_function("lines_resolve_mod:A.m")
    assert method.__qualname__ == "A.m"
    from_file = resolve_function(f"{mod}:top")
    assert from_file() == 2 and from_file is top  # already imported: the same module
    other = tmp_path / "lines_other_file.py"
    other.write_text("def g():\n    return 5\n")
    assert resolve_function(f"{other}:g")() == 5


@pytest.mark.parametrize(
    "spec,exc",
    [
        ("no_colon", ValueError),
        (":f", ValueError),
        ("os:", ValueError),
        ("os:no_such_name", AttributeError),
        ("no_such_module_xyz:f", ImportError),
        ("/no/such/file.py:f", ImportError),
        ("os:path.<locals>.x", ValueError),
    ],
)
def test_resolve_function_errors(spec, exc):
    with pytest.raises(exc):
        resolve_function(spec)


def _cli_has_lines():
    """Whether fastprof's command line (built separately) offers --lines-of yet."""
    import inspect

    from fastprof import cli

    try:
        return "--lines-of" in inspect.getsource(cli)
    except OSError:
        return False


@pytest.mark.skipif(not _cli_has_lines(), reason="fastprof's command line is not built yet")
def test_command_line_run_lines(tmp_path):
    path = tmp_path / "script.py"
    path.write_text(SCRIPT)
    env = env_with_package()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "fastprof",
            "run",
            "--lines",
            "--lines-of",
            "script.py:helper",
            str(path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "45 3 8" in out.stdout
    assert "Function: work at line 1" in out.stdout  # the decorator line, as kernprof says
    assert "Function: helper at line" in out.stdout


def test_lines_of_a_file_the_script_imports_later_times_that_module(tmp_path):
    # --lines-of proj/util.py:work imports the file under the name the script's own import
    # finds it by: its top level runs once and the script's calls are the ones timed
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "util.py").write_text(
        "print('util top level')\n\ndef work(n):\n    s = 0\n    for i in range(n):\n"
        "        s += i\n    return s\n"
    )
    (proj / "main.py").write_text("import util\nprint(util.work(1000))\n")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "fastprof",
            "run",
            "--lines-of",
            "proj/util.py:work",
            "proj/main.py",
        ],
        cwd=tmp_path,
        env=env_with_package(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("util top level") == 1
    rows = {
        line.split()[0]: line.split()[1] for line in out.stdout.splitlines() if "s += i" in line
    }
    assert rows == {"6": "1000"}
