"""`import fastprof` costs what the profilers need: NumPy, the kernels, CUDA, NVTX and traces load
on first use (in `python -m fastprof run`, and in pytest runs that load the plugin but use no
fixture, too), the NumPy C API is imported by the first kernel call, a missing NumPy is a clear
ImportError on the kernel side while profiling still works, and the package has no import cycle.

Each check runs in a fresh interpreter, since this test process has long loaded everything.
"""

from __future__ import annotations

import ast
import os
import pstats
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, List, Optional, Set

import pytest

import fastprof

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = Path(fastprof.__file__).resolve().parent

#: Modules that `import fastprof`, the CLI and an unused plugin must leave unloaded.
HEAVY = (
    "numpy",
    "ctypes",
    "fastprof.kernels",
    "fastprof.kernels.gpu",
    "fastprof.kernels.expr",
    "fastprof.cuda",
    "fastprof.cuda._base",
    "fastprof.cuda.cupti",
    "fastprof.cuda.runtime",
    "fastprof.cuda.nvtx",
    "fastprof.bench",
)

#: Prepended to a child's code: makes `import numpy` fail as if NumPy were not installed.
HIDE_NUMPY = textwrap.dedent("""
    import sys

    class _HideNumpy:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "numpy":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, _HideNumpy())
""")

#: A child's code ends with this to print which HEAVY modules it loaded.
SHOW_HEAVY = f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"


def _env() -> Dict[str, str]:
    """The child's environment: this checkout's package first on the path, no plugin autoload."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(PACKAGE.parent)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def _python(*args: str, cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
    """Runs a fresh interpreter; fails the test, with its output, when it fails."""
    proc = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=str(cwd or ROOT),
        timeout=300,
    )
    assert proc.returncode == 0, f"{args}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def _code(source: str) -> str:
    """The last line a child running `source` prints."""
    return _python("-c", source).stdout.strip().splitlines()[-1]


# --- import fastprof ----------------------------------------------------------------------------


def test_import_fastprof_loads_only_the_profilers() -> None:
    before = _code("import sys\n" + SHOW_HEAVY)
    assert before == "[]"  # the interpreter alone loads none of them
    assert _code("import sys, fastprof\n" + SHOW_HEAVY) == "[]"
    loaded = _code(
        "import sys, fastprof\nprint(sorted(m for m in sys.modules if m.startswith('fastprof')))"
    )
    # the call profiler only: each process of a `run --subprocesses` job imports this at start
    assert eval(loaded) == [
        "fastprof",
        "fastprof._fastprof",
        "fastprof._quiet",
        "fastprof._version",
        "fastprof.keys",
        "fastprof.profile",
    ]
    loaded = _code(
        "import sys, fastprof\nprint([m in sys.modules for m in ('inspect', 'json', 'pickle')])"
    )
    assert loaded == "[False, False, False]"


def test_lazy_names_load_on_first_use() -> None:
    out = _code(
        textwrap.dedent("""
        import sys, fastprof
        assert "numpy" not in sys.modules
        names = dir(fastprof)
        assert all(n in names for n in fastprof.__all__), names
        assert "fastprof.cuda.nvtx" not in sys.modules  # dir() lists without loading
        assert "fastprof.lines" not in sys.modules and "fastprof.stats" not in sys.modules
        from fastprof import LineProfiler
        assert LineProfiler is sys.modules["fastprof.lines"].LineProfiler
        assert fastprof.Stats is sys.modules["fastprof.stats"].Stats
        assert fastprof.nvtx is sys.modules["fastprof.cuda.nvtx"]
        assert "numpy" not in sys.modules and "fastprof.cuda.runtime" not in sys.modules
        assert fastprof.cuda_trace is sys.modules["fastprof.cuda.cupti"].cuda_trace
        assert "numpy" not in sys.modules and "fastprof.cuda.runtime" not in sys.modules
        assert "DeviceArray" in dir(fastprof.cuda)  # listed, not loaded
        assert "fastprof.cuda.runtime" not in sys.modules
        assert fastprof.cuda_timer is fastprof.cuda.cuda_timer
        assert fastprof.cuda.cuda_trace is fastprof.cuda_trace
        from fastprof import kernels
        assert kernels is fastprof.kernels is sys.modules["fastprof.kernels"]
        assert "kernels" in vars(fastprof)  # kept: later reads skip __getattr__
        try:
            fastprof.no_such_name
        except AttributeError as exc:
            assert "no_such_name" in str(exc)
        else:
            raise AssertionError("no AttributeError")
        print("ok")
    """)
    )
    assert out == "ok"


def test_lazy_names_are_public_and_typed() -> None:
    assert set(fastprof._LAZY) <= set(fastprof.__all__)
    assert set(fastprof.__all__) <= set(dir(fastprof))
    # a type checker sees each lazy name imported under TYPE_CHECKING
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    guarded: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    guarded.update(a.asname or a.name for a in stmt.names)
    assert guarded == set(fastprof._LAZY)


# --- kernels from a fresh process ---------------------------------------------------------------


def test_a_kernel_call_imports_the_numpy_c_api_on_first_use() -> None:
    out = _code(
        textwrap.dedent("""
        import sys
        import fastprof
        from fastprof import _fastprof
        assert "numpy" not in sys.modules
        import numpy as np  # the caller's own import; the C API is not loaded yet
        x = np.arange(6.0)
        out = np.empty_like(x)
        # the compiled entry point straight away: it must load the C API itself
        _fastprof._correlate_separable(x, out, [np.ones(3)], [2], 0.0, [0])
        assert out.tolist() == [1.0, 3.0, 6.0, 9.0, 12.0, 14.0], out  # "nearest" edges
        y = fastprof.kernels.evaluate("2 * x + 1", local_dict={"x": x})
        assert y.tolist() == [1.0, 3.0, 5.0, 7.0, 9.0, 11.0], y
        print("ok")
    """)
    )
    assert out == "ok"


def test_without_numpy_kernels_raise_a_clear_importerror_and_profiling_works() -> None:
    out = _code(
        HIDE_NUMPY
        + textwrap.dedent("""
        import fastprof
        from fastprof import _fastprof

        def hint(call):
            try:
                call()
            except ImportError as exc:
                assert "pip install 'fastprof[kernels]'" in str(exc), exc
                assert isinstance(exc.__cause__, ModuleNotFoundError), repr(exc.__cause__)
                return type(exc).__name__
            raise AssertionError("no ImportError")

        # the compiled kernels check for NumPy before touching an array
        assert hint(lambda: _fastprof._correlate_separable(1, 2, [], [], 0.0, [])) == "ImportError"
        assert hint(lambda: _fastprof._correlate_general(1, 2, 3, [], 0.0, [])) == "ImportError"
        assert hint(lambda: _fastprof._evaluate_program([], [], [], 1, 0, None)) == "ImportError"
        # and so do the Python names that need NumPy
        assert hint(lambda: fastprof.kernels.convolve) == "ImportError"
        # the module itself, imported by name, says so too
        assert hint(lambda: __import__("fastprof.kernels")) == "ImportError"
        assert hint(lambda: exec("from fastprof.kernels import convolve")) == "ImportError"
        assert hint(lambda: fastprof.cuda_timer) == "ImportError"
        assert hint(lambda: fastprof.cuda.DeviceArray) == "ImportError"
        assert _fastprof._get_num_threads() >= 1  # what needs no NumPy still works

        def leaf():
            return 1

        def caller():
            return leaf() + leaf()

        p = fastprof.Profile()
        p.enable()
        caller()
        p.disable()
        calls = {e.code.co_name: e.callcount for e in p.getstats()
                 if hasattr(e.code, "co_name")}
        assert calls["leaf"] == 2 and calls["caller"] == 1, calls
        lp = fastprof.LineProfiler(leaf)
        with lp:
            leaf()
        assert sum(n for _, n, _ in next(iter(lp.get_stats().timings.values()))) == 1
        with fastprof.nvtx.range("r"):
            pass
        print("ok")
    """)
    )
    assert out == "ok"


# --- python -m fastprof ---------------------------------------------------------------------------


def test_cli_run_of_a_trivial_script_loads_nothing_heavy(tmp_path: Path) -> None:
    script = tmp_path / "trivial.py"
    script.write_text("import sys\n" + SHOW_HEAVY)
    out = _python("-m", "fastprof", "run", str(script), cwd=tmp_path).stdout
    assert out.splitlines()[0] == "[]", out


@pytest.mark.parametrize("profiler", ["fastprof", "cProfile"])
def test_a_scripts_import_of_numpy_shows_in_its_profile(tmp_path: Path, profiler: str) -> None:
    pytest.importorskip("numpy")
    script = tmp_path / "uses_numpy.py"
    script.write_text("import numpy\n")
    prof = tmp_path / "out.prof"
    args = ["run"] if profiler == "fastprof" else []
    _python("-m", profiler, *args, "-o", str(prof), str(script), cwd=tmp_path)
    stats = pstats.Stats(str(prof)).stats  # type: ignore[attr-defined]
    numpy_init = [
        (f, n) for (f, _line, n) in stats if f.replace(os.sep, "/").endswith("numpy/__init__.py")
    ]
    assert "<module>" in {n for _f, n in numpy_init}, sorted(stats)[:20]
    (key,) = [
        k
        for k in stats
        if k[2] == "<module>" and k[0].replace(os.sep, "/").endswith("numpy/__init__.py")
    ]
    assert stats[key][1] == 1  # primitive calls: numpy's __init__ ran once, under the profiler


# --- the pytest plugin ---------------------------------------------------------------------------


def _run_pytest(tmp_path: Path, test_source: str) -> str:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_inner.py").write_text(test_source)
    proc = _python(
        "-m",
        "pytest",
        "-p",
        "fastprof.pytest_plugin",
        "-p",
        "no:cacheprovider",
        "-q",
        "-s",
        str(tmp_path / "test_inner.py"),
        cwd=tmp_path,
    )
    return proc.stdout


def test_pytest_with_the_plugin_and_no_fixture_loads_nothing_heavy(tmp_path: Path) -> None:
    out = _run_pytest(
        tmp_path,
        "import sys\n\n\ndef test_nothing():\n"
        f"    print('HEAVY', sorted(m for m in {HEAVY!r} if m in sys.modules))\n",
    )
    assert "HEAVY []" in out, out
    assert "1 passed" in out, out


def test_pytest_fixture_still_loads_the_benchmark_machinery(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    out = _run_pytest(
        tmp_path,
        textwrap.dedent("""
        import sys

        def test_bench(fastprof_benchmark):
            assert fastprof_benchmark.pedantic(lambda: 7, rounds=2, iterations=1) == 7
            print("BENCH", "fastprof.bench" in sys.modules)
    """),
    )
    assert "BENCH True" in out and "1 passed" in out, out


# --- import cycles --------------------------------------------------------------------------------


def _modules() -> Dict[str, Path]:
    """Every module of the package: dotted name -> file."""
    found: Dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, known: Set[str]) -> Set[str]:
    """The package's modules that `name` imports anywhere in its file (functions included),
    less its own ancestors (always loaded before it) and the compiled core."""
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    out: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: List[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                anchor = base[: len(base) - node.level + 1]
                mod = ".".join(anchor + ([mod] if mod else []))
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name and not name.startswith(t + "."):
                out.add(t)
    return out


def test_the_package_has_no_import_cycle() -> None:
    mods = _modules()
    graph = {name: _imports(name, path, set(mods)) for name, path in mods.items()}
    state: Dict[str, int] = {}
    cycles: List[List[str]] = []

    def visit(node: str, stack: List[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []


@pytest.mark.parametrize("name", sorted(_modules()))
def test_each_module_imports_alone(name: str) -> None:
    if name == "fastprof.pytest_plugin":
        pytest.importorskip("pytest")
    _python("-c", f"import importlib; importlib.import_module({name!r})")
