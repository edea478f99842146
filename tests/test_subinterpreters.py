"""fastprof._fastprof in subinterpreters (3.12+): refused with an ImportError in one with its
own GIL (the module keeps process-wide state: the clock calibration, the kernels' thread pool,
the CUDA state), usable in a legacy one that shares the main interpreter's GIL, where the call
profiler and the line profiler count exactly as in the main interpreter.

Each case runs in a fresh process, so that a crash shows as a failed exit status."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest


def _subinterpreters_module() -> str | None:
    """The name of the interpreter's low-level subinterpreters module, or None."""
    for name in ("_interpreters", "_xxsubinterpreters"):
        if importlib.util.find_spec(name) is not None:
            return name
    return None


pytestmark = [
    pytest.mark.skipif(
        sys.version_info < (3, 12),
        reason="per-interpreter GIL and Py_mod_multiple_interpreters are 3.12+",
    ),
    pytest.mark.skipif(
        sys.version_info >= (3, 12) and _subinterpreters_module() is None,
        reason="this interpreter has neither _interpreters nor _xxsubinterpreters",
    ),
]

# Runs in the child process: make(own_gil) creates a subinterpreter, run(i, src) runs src in
# it (raising when src raised).
_DRIVER = """
import sys
try:
    import _interpreters as xi  # 3.13+

    def make(own_gil):
        return xi.create("isolated" if own_gil else "legacy")

    def run(i, src):
        exc = xi.exec(i, src)
        if exc is not None:
            raise RuntimeError(getattr(exc, "formatted", exc))

except ImportError:
    import _xxsubinterpreters as xi  # 3.12

    def make(own_gil):
        return xi.create(isolated=own_gil)

    def run(i, src):
        xi.run_string(i, src)
"""

# Profiles three calls of f with the call profiler and the line profiler; prints the counts.
_PROFILE = """
import fastprof

def f(n):
    s = 0
    for i in range(n):
        s += i
    return s

prof = fastprof.Profile()
prof.enable()
for _ in range(3):
    f(4)
prof.disable()
calls = [e.callcount for e in prof.getstats() if getattr(e.code, "co_name", "") == "f"]
lp = fastprof.LineProfiler(f)
lp.enable()
for _ in range(3):
    f(4)
lp.disable()
(rows,) = lp.get_stats().timings.values()
first = f.__code__.co_firstlineno
print(WHERE, "calls", calls, "hits", [(line - first, hits) for line, hits, _ in rows], flush=True)
"""

_EXPECTED = "calls [3] hits [(1, 3), (2, 15), (3, 12), (4, 3)]"


def _run(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_DRIVER) + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_own_gil_subinterpreter_refuses_the_module() -> None:
    r = _run(
        """
        i = make(own_gil=True)
        run(i, '''
        try:
            import fastprof._fastprof
        except ImportError as e:
            print("ImportError:", e, flush=True)
        else:
            print("imported", flush=True)
        ''')
        xi.destroy(i)
        print("main goes on", flush=True)
        """
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[-1] == "main goes on"
    assert lines[0].startswith("ImportError:"), r.stdout
    assert "subinterpreter" in lines[0] or "interpreter" in lines[0], lines[0]


def test_legacy_subinterpreter_profiles_exactly() -> None:
    profile = textwrap.dedent(_PROFILE)
    r = _run(
        f"""
        WHERE = "main"
        exec({profile!r})
        i = make(own_gil=False)
        run(i, "WHERE = 'sub'\\n" + {profile!r})
        run(i, "WHERE = 'sub again'\\n" + {profile!r})
        xi.destroy(i)
        WHERE = "main again"
        exec({profile!r})
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        f"main {_EXPECTED}",
        f"sub {_EXPECTED}",
        f"sub again {_EXPECTED}",
        f"main again {_EXPECTED}",
    ], r.stdout + r.stderr
