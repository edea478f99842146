"""CPython's own cProfile tests, run against fastprof.

The running interpreter's Lib/test/test_cprofile.py (``CProfileTest``, which extends
test_profile's ``ProfileTest``: pstats' printed tables under a fake timer, run/runctx, the
command line, evil timers, generators, sys.monitoring tool ids) and its ``TestCommandLine``, with
``fastprof.Profile`` as the profiler class, ``fastprof`` as the profiler module and
``python -m fastprof`` where they run ``python -m cProfile``.  The tests are CPython's, as this
interpreter ships them; only these substitutions are made, each keeping the assertion it feeds:

- ``profilerclass = fastprof.Profile``, ``profilermodule = fastprof`` (the class attributes
  test_profile provides for exactly this).
- ``import _lsprof`` inside a test gets a stand-in module whose ``Profiler`` is
  ``fastprof.Profile`` (test_bad_counter_during_dealloc, test_evil_external_timer).
- The string constant ``"cProfile"`` in a test's code becomes ``"fastprof"``: the module run by
  ``python -m`` (TestCommandLine) and the name of the sys.monitoring tool that holds
  ``PROFILER_ID`` while the profiler is enabled (3.12+).
- The child interpreters of the command-line tests start without ``-I`` and with this
  checkout's package on PYTHONPATH, so that ``python -m fastprof`` can be imported; their
  arguments and the assertions on their output are unchanged.

Deselected (an implementation detail of _lsprof with no meaning for fastprof):

- test_bad_counter_during_dealloc on 3.9-3.11 only: its 3.11-and-earlier text builds
  ``_lsprof.Profiler(1)``, a timer that is not callable, which _lsprof accepts and fastprof
  refuses at construction with a TypeError naming the ``timer`` argument.  The 3.12+ text of
  the same test (a timer returning a non-number, reported when it is read) runs everywhere:
  see test_bad_counter_3_12_text_on_every_version.
"""

from __future__ import annotations

import os
import sys
import types
import unittest
from typing import Any, Callable, Dict

import pytest

import fastprof

try:
    from test import test_cprofile as _cpy
    from test import test_profile as _cpy_profile
    from test.support import script_helper as _script_helper
except ImportError as _e:  # an interpreter built or packaged without its test suite
    pytest.skip(
        f"this interpreter ships without CPython's test package ({_e})", allow_module_level=True
    )

_PY312 = sys.version_info >= (3, 12)
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(fastprof.__file__)))


# -- substitutions ----------------------------------------------------------------------------


def _renamed(func: Callable[..., Any], old: str, new: str) -> Callable[..., Any]:
    """``func`` with the string constant ``old`` in its code replaced by ``new``."""
    code = func.__code__
    if old not in code.co_consts:
        raise AssertionError(f"{func.__qualname__} no longer uses {old!r}: review the adapter")
    consts = tuple(new if c == old else c for c in code.co_consts)
    out = types.FunctionType(
        code.replace(co_consts=consts),
        func.__globals__,
        func.__name__,
        func.__defaults__,
        func.__closure__,
    )
    out.__qualname__ = func.__qualname__
    out.__doc__ = func.__doc__
    return out


def _child_env() -> Dict[str, Any]:
    """Keyword arguments for script_helper that let the child import this fastprof."""
    path = [_PACKAGE_DIR] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {"__isolated": False, "PYTHONPATH": os.pathsep.join(path)}


def _with_child_env(helper: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **env: Any) -> Any:
        return helper(*args, **{**_child_env(), **env})

    run.__name__ = helper.__name__
    return run


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class _Substitutions(unittest.TestCase):
    """setUp puts the stand-ins in place for one test; cleanups take them away again."""

    def setUp(self) -> None:
        super().setUp()
        lsprof = types.ModuleType("_lsprof", "fastprof standing in for _lsprof")
        lsprof.Profiler = fastprof.Profile  # type: ignore[attr-defined]
        saved_lsprof = sys.modules.get("_lsprof")
        sys.modules["_lsprof"] = lsprof

        def put_back_lsprof() -> None:
            if saved_lsprof is None:
                sys.modules.pop("_lsprof", None)
            else:
                sys.modules["_lsprof"] = saved_lsprof

        self.addCleanup(put_back_lsprof)
        # fastprof's dump_stats writes the call tree beside the file; the tests remove the file
        self.addCleanup(_remove, _cpy_profile.TESTFN + ".tree.json")
        for mod in (_cpy, _cpy_profile):
            for name in ("assert_python_ok", "assert_python_failure"):
                if name in vars(mod):
                    saved = vars(mod)[name]
                    setattr(mod, name, _with_child_env(getattr(_script_helper, name)))
                    self.addCleanup(setattr, mod, name, saved)


# -- the tests --------------------------------------------------------------------------------


class TestFastprofCProfile(_Substitutions, _cpy.CProfileTest):  # type: ignore[misc]
    profilerclass = fastprof.Profile
    profilermodule = fastprof

    if _PY312:
        test_profile_enable_disable = _renamed(
            _cpy.CProfileTest.test_profile_enable_disable, "cProfile", "fastprof"
        )
        test_profile_as_context_manager = _renamed(
            _cpy.CProfileTest.test_profile_as_context_manager, "cProfile", "fastprof"
        )
    else:
        test_bad_counter_during_dealloc = unittest.skip(
            "this interpreter's text builds _lsprof.Profiler(1), a non-callable timer that "
            "fastprof refuses with a TypeError (see the module docstring)"
        )(_cpy.CProfileTest.test_bad_counter_during_dealloc)


class TestFastprofCommandLine(_Substitutions, _cpy.TestCommandLine):  # type: ignore[misc]
    test_sort = _renamed(_cpy.TestCommandLine.test_sort, "cProfile", "fastprof")


# -- checks of the adapter itself --------------------------------------------------------------


def test_adapter_runs_fastprof_not_cprofile() -> None:
    """The substituted tests really profile with fastprof (the stats come from its class)."""
    results = TestFastprofCProfile.do_profiling()
    assert results[0] == 1000
    assert "profilee.py:25(testfunc)" in results[1]
    assert TestFastprofCProfile.profilerclass is fastprof.Profile


def test_bad_counter_3_12_text_on_every_version() -> None:
    """3.12's text of test_bad_counter_during_dealloc: a timer returning a type is reported
    through sys.unraisablehook as a TypeError, and disable() returns."""
    from test import support

    with support.catch_unraisable_exception() as cm:
        obj = fastprof.Profile(lambda: int)
        obj.enable()
        obj.disable()
        obj.clear()
        assert cm.unraisable is not None
        assert cm.unraisable.exc_type is TypeError


def _profilee_stats(profilerclass: Any) -> Any:
    """pstats.Stats of CPython's profilee workload run under its fake timer."""
    import pstats

    from test.profilee import testfunc, timer

    prof = profilerclass(timer, 0.001)
    prof.runctx("testfunc()", {"testfunc": testfunc}, {})
    return pstats.Stats(prof).strip_dirs()


def test_name_column_as_wide_as_cprofiles() -> None:
    """The profiler's own disable() is named as long as cProfile's, so pstats pads every
    table to the same width, and the names are the same but for that one."""
    import cProfile

    mine, theirs = _profilee_stats(fastprof.Profile), _profilee_stats(cProfile.Profile)
    assert mine.max_name_len == theirs.max_name_len
    own = ("~", 0, "<method 'disable' of 'fastprof.Profile' objects>")
    assert own in mine.stats
    assert set(mine.stats) - {own} == set(theirs.stats) - {
        ("~", 0, "<method 'disable' of '_lsprof.Profiler' objects>")
    }


def test_fastprof_table_names_builtins_as_pstats() -> None:
    """fastprof's own table shows each function as pstats does: {built-in method ...}."""
    import pstats

    st = fastprof.Stats(_profilee_stats(fastprof.Profile))
    assert {r.location for r in st.rows} == {pstats.func_std_string(k) for k in st.to_dict()}
    table = st.sort("stdname").table()
    assert "{built-in method builtins.hasattr}" in table
    assert "<built-in method" not in table


@pytest.mark.skipif(not _PY312, reason="sys.monitoring tool ids exist on 3.12+")
def test_one_fastprof_profile_at_a_time_even_beside_cprofile() -> None:
    """With cProfile holding the profiler's tool id, a Profile still runs (on another id), and
    a second Profile is refused as CPython's test_second_profiler wants, naming the id."""
    import cProfile

    cp, a, b = cProfile.Profile(), fastprof.Profile(), fastprof.Profile()
    cp.enable()
    try:
        a.enable()
        try:
            assert a.tool_id not in (None, sys.monitoring.PROFILER_ID)
            with pytest.raises(ValueError, match=f"tool id {a.tool_id}"):
                b.enable()
            assert not b.enabled
        finally:
            a.disable()
    finally:
        cp.disable()
    b.enable()  # free again once a is off
    b.disable()
    assert all(sys.monitoring.get_tool(i) != "fastprof" for i in range(6))
