"""Malformed and hostile saved benchmark runs (--fastprof-save / --fastprof-compare files):
a clear error naming the file, never an INTERNALERROR, never a skipped save, never a silent
pass of --fastprof-compare-fail; `fastprof compare` exits 2 with one line."""

from __future__ import annotations

import copy
import json
from typing import Any, Dict, List, Tuple

import pytest

import fastprof.pytest_plugin as plugin
from fastprof.bench import regression, sample_stats, storage
from fastprof.compare import main as compare_main

pytest_plugins = ["pytester"]

PLUGIN_ARGS = [
    "-p",
    "no:fastprof",
    "-p",
    "fastprof.pytest_plugin",
    "-p",
    "no:cacheprovider",
    "-W",
    "ignore::pytest.PytestAssertRewriteWarning",
]


def _bench(name: str, samples: List[float]) -> Dict[str, Any]:
    return {
        "group": None,
        "name": name,
        "fullname": f"test_suite.py::{name}",
        "stats": sample_stats.compute_stats(samples, ci=False),
        "fastprof": {},
    }


def _doc(*benches: Dict[str, Any]) -> Dict[str, Any]:
    return {"benchmarks": list(benches)}


GOOD = _doc(_bench("test_a", [1e-3, 1.1e-3, 0.9e-3]))


def _with(path: Tuple[Any, ...], value: Any) -> str:
    """GOOD as JSON with the item at path (keys from the benchmark) replaced by value."""
    doc = copy.deepcopy(GOOD)
    target = doc["benchmarks"][0]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return json.dumps(doc)


ZERO = json.dumps(_doc(_bench("test_a", [0.0, 0.0, 0.0])))
BAD: List[Tuple[str, Any]] = [
    ("empty", b""),
    ("not JSON", b"{benchmarks: [1,"),
    ("truncated", json.dumps(GOOD)[:40].encode()),
    ("not UTF-8", b'{"benchmarks": ["\xff\xfe"]}'),
    ("a list", b"[1, 2]"),
    ("benchmarks not a list", b'{"benchmarks": {"a": 1}}'),
    ("benchmark is a str", b'{"benchmarks": ["test_a"]}'),
    ("no fullname", json.dumps(_doc({"stats": GOOD["benchmarks"][0]["stats"]}))),
    ("fullname is a list", _with(("fullname",), ["x"])),
    ("name is a dict", _with(("name",), {"a": 1})),
    ("stats is a list", _with(("stats",), [1, 2])),
    ("median is a str", _with(("stats", "median"), "fast")),
    ("median is NaN", _with(("stats", "median"), float("nan"))),
    ("mean is Infinity", _with(("stats", "mean"), float("inf"))),
    ("min is negative", _with(("stats", "min"), -1.0)),
    ("median is true", _with(("stats", "median"), True)),
    ("data is a str", _with(("stats", "data"), "1,2,3")),
    ("data holds a str", _with(("stats", "data"), [1e-3, "x"])),
    ("data holds a negative", _with(("stats", "data"), [1e-3, -1e-3])),
    ("fastprof is a list", _with(("fastprof",), [1])),
    ("profile rows are wrong", _with(("fastprof",), {"profile": {"rows": [{"func": 1}]}})),
    ("deep nesting", b'{"benchmarks": ' + b"[" * 100000 + b"]" * 100000 + b"}"),
    ("huge integer", b'{"benchmarks": [], "x": ' + b"9" * 5000 + b"}"),
]
# Readable, but no ratio to them means anything: refused as the baseline only.
ZERO_BASELINES: List[Tuple[str, Any]] = [
    ("all-zero samples", ZERO),
    (
        "zero median, no samples",
        json.dumps(
            _doc(
                {
                    "name": "test_a",
                    "fullname": "test_suite.py::test_a",
                    "stats": {"min": 0, "mean": 0, "median": 0},
                }
            )
        ),
    ),
]


def _write(tmp: Any, name: str, content: Any) -> str:
    path = tmp / (name.replace(" ", "_") + ".json")
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(path)


def _one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("name,content", BAD, ids=[b[0] for b in BAD])
def test_load_refuses_naming_the_file(name: str, content: Any, tmp_path: Any) -> None:
    path = _write(tmp_path, name, content)
    with pytest.raises(ValueError) as err:
        storage.load(path)
    assert str(err.value).startswith(path + ": ") and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "name,content", BAD + ZERO_BASELINES, ids=[b[0] for b in BAD + ZERO_BASELINES]
)
def test_compare_command_exits_2_with_one_line(
    name: str, content: Any, tmp_path: Any, capsys: Any
) -> None:
    bad = _write(tmp_path, name, content)
    good = _write(tmp_path, "good", json.dumps(GOOD))
    assert compare_main([bad, good, "--fail", "median:5%"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    line = _one_line(err)
    assert line.startswith("fastprof compare: ") and bad in line


def test_zero_baseline_is_an_error_but_a_zero_new_run_compares(tmp_path: Any, capsys: Any) -> None:
    zero, good = _write(tmp_path, "zero", ZERO), _write(tmp_path, "good", json.dumps(GOOD))
    assert compare_main([zero, good]) == 2
    assert "a zero baseline cannot be compared" in _one_line(capsys.readouterr().err)
    assert compare_main([good, zero, "--fail", "median:5%"]) == 0
    out = capsys.readouterr().out
    assert "0.000" in out and "REGRESSION" not in out


def test_compare_benchmark_refuses_a_zero_baseline() -> None:
    old = _bench("test_a", [0.0, 0.0])
    new = _bench("test_a", [1e-3, 1e-3])
    with pytest.raises(regression.ZeroBaselineError, match="test_a"):
        regression.compare_benchmark(old, new, [regression.parse_rule("median:5%")])
    del old["stats"]["data"]
    with pytest.raises(regression.ZeroBaselineError, match="median is 0"):
        regression.compare_benchmark(old, new, [])


def test_compare_table_escapes_names(tmp_path: Any, capsys: Any) -> None:
    doc = copy.deepcopy(GOOD)
    doc["benchmarks"][0]["name"] = "test_\x1b[2Jx\ny"
    path = _write(tmp_path, "evil", json.dumps(doc))
    assert compare_main([path, path]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "test_\\x1b[2Jx\\ny" in out


# --- through pytest ----------------------------------------------------------------------------

SUITE = """
import pytest
from fakeclock import CLOCK

@pytest.mark.benchmark(timer=CLOCK.now, max_time=0.01, warmup=False)
def test_a(fastprof_benchmark):
    fastprof_benchmark(CLOCK.spend, 1e-3)
"""

FAKECLOCK = """
class FakeClock:
    def __init__(self):
        self.t = 0.0
    def now(self):
        self.t += 1e-9
        return self.t
    def spend(self, seconds):
        self.t += seconds

CLOCK = FakeClock()
"""


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makepyfile(fakeclock=FAKECLOCK, test_suite=SUITE)
    pytester.syspathinsert()
    monkeypatch.setattr(plugin, "_profiler_factory", None)
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess(*PLUGIN_ARGS, "--fastprof-storage=runs", *args)


def _no_internal_error(result: pytest.RunResult) -> None:
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text


BASELINES = [
    b
    for b in BAD
    if b[0]
    in (
        "median is a str",
        "deep nesting",
        "not JSON",
        "data holds a negative",
        "fastprof is a list",
    )
]
BASELINES += ZERO_BASELINES


@pytest.mark.parametrize("name,content", BASELINES, ids=[b[0] for b in BASELINES])
def test_bad_baseline_is_a_usage_error_naming_the_file(
    inner: pytest.Pytester, name: str, content: Any
) -> None:
    path = _write(inner.path, "baseline", content)
    result = _run(inner, f"--fastprof-compare={path}", "--fastprof-compare-fail=median:5%")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    _no_internal_error(result)
    assert path in result.stderr.str()


def test_a_comparison_error_neither_skips_the_save_nor_passes(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _run(inner, "--fastprof-save=base").assert_outcomes(passed=1)

    def refuse(*args: Any) -> Any:
        raise regression.ZeroBaselineError("baseline of 'test_suite.py::test_a': median is 0")

    monkeypatch.setattr(regression, "compare_runs", refuse)
    result = _run(
        inner,
        "--fastprof-compare=base",
        "--fastprof-compare-fail=median:5%",
        "--fastprof-save=next",
    )
    _no_internal_error(result)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(
        [
            "fastprof: cannot compare with *0001_base.json: baseline of "
            "'test_suite.py::test_a': median is 0",
            "saved 1 benchmark(s) to *0002_next.json",
        ]
    )
    assert (inner.path / "runs" / "0002_next.json").is_file()


def test_a_failed_save_is_reported(inner: pytest.Pytester) -> None:
    (inner.path / "runs").write_text("a file where the folder should be")
    result = _run(inner, "--fastprof-save=base")
    _no_internal_error(result)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["fastprof: could not save the benchmark results: *runs*"])
