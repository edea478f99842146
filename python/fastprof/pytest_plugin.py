"""fastprof's pytest plugin: the fastprof_benchmark and cuda_benchmark fixtures and the
--fastprof-* options (save, compare, fail on a regression, profile; disable, skip, only; a JSON
file of the run; session-wide rounds and times), pytest-benchmark's --benchmark-* under
fastprof's names.

Loaded through the pytest11 entry point; it works beside pytest-benchmark (distinct fixture and
option names, and its ``@pytest.mark.benchmark(...)`` marker is read, not registered twice).

Loaded in every pytest run of every user who installs fastprof, so it costs nothing until used:
the benchmark machinery (fastprof.bench) loads when a fixture is first requested or a
--fastprof-* option asks for it, never at plugin load. Its statistics need NumPy; the options'
checks and the reading and writing of saved runs do not.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import warnings
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional

import pytest

if TYPE_CHECKING:
    from types import ModuleType

    from .bench.fixture import BenchmarkFixture, CudaBenchmarkFixture
    from .bench.rules import Rule
    from .bench.runner import Options

#: Makes the profiler of --fastprof-profile's extra round; None means fastprof.Profile.
#: Tests may set a cProfile-compatible factory here.
_profiler_factory: Optional[Callable[[], Any]] = None

_XDIST_NOTE = (
    "{name} ran its function once, untimed: benchmarks are disabled on pytest-xdist workers "
    "(parallel workers compete for the CPU, and the results could not be saved or compared); "
    "time them apart with -p no:xdist or -n 0"
)
_SKIP_REASON = "a benchmark (--fastprof-skip)"
_ONLY_REASON = "not a benchmark (--fastprof-only)"
_FIXTURES = ("fastprof_benchmark", "cuda_benchmark")


_NEEDS_NUMPY = (
    "{what} NumPy, which could not be imported; install it with pip install 'fastprof[kernels]'"
)


def _numpy_module(name: str, what: str) -> ModuleType:
    """Return the module `name`, imported now.  Raises ImportError saying that `what` needs
    NumPy and naming ``fastprof[kernels]`` when NumPy is missing."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        if (exc.name or "").split(".")[0] != "numpy":
            raise
        raise ImportError(_NEEDS_NUMPY.format(what=what), name="numpy") from exc


def _fixture_module() -> ModuleType:
    """Return fastprof.bench.fixture, imported on the first benchmark.  Raises ImportError
    naming ``fastprof[kernels]`` when NumPy (which its statistics use) is missing."""
    return _numpy_module("fastprof.bench.fixture", "fastprof's benchmark fixtures need")


def _make_profiler() -> Any:
    """Return a new profiler for the profiled round."""
    if _profiler_factory is not None:
        return _profiler_factory()
    from .profile import Profile

    return Profile()


class _State:
    """What the plugin keeps for one pytest session.  Only the --fastprof-* options given load
    the benchmark machinery here (to check their values before any test runs)."""

    def __init__(self, config: pytest.Config) -> None:
        opt = config.option
        self.config = config
        self.results: List[Dict[str, Any]] = []
        self.prof_stats: Dict[str, Dict[Any, Any]] = {}
        self.cuda_used = False
        self.worker = hasattr(config, "workerinput")
        self.profile = bool(opt.fastprof_profile)
        # as pytest-benchmark: --fastprof-only wins over --fastprof-skip, cannot go with
        # --fastprof-disable, and --fastprof-enable undoes a --fastprof-disable from addopts
        self.only = bool(opt.fastprof_only)
        self.skip = bool(opt.fastprof_skip) and not self.only
        explicit_disable = bool(opt.fastprof_disable) and not opt.fastprof_enable
        if explicit_disable and self.only:
            raise pytest.UsageError(
                "--fastprof-only and --fastprof-disable contradict each other: the first runs "
                "only the benchmarks, the second runs them untimed"
            )
        self.disabled = explicit_disable or self.worker
        self.options = _session_options(opt)
        self.json_path: Optional[str] = opt.fastprof_json
        self._storage: Optional[str] = opt.fastprof_storage or None
        self.save_name = opt.fastprof_save
        self.keep_data = bool(opt.fastprof_save_data)
        if self.save_name is not None:
            from .bench import storage

            try:
                storage.check_name(self.save_name)
            except ValueError as exc:
                raise pytest.UsageError(str(exc)) from None
        self.rules: List[Rule] = []
        if opt.fastprof_compare_fail:
            from .bench import rules

            try:
                self.rules = [rules.parse_rule(r) for r in opt.fastprof_compare_fail]
            except ValueError as exc:
                raise pytest.UsageError(str(exc)) from None
        spec = opt.fastprof_compare
        if spec is None and self.rules:
            spec = "latest"
        self.baseline: Optional[Dict[str, Any]] = None
        self.baseline_path: Optional[str] = None
        if spec is not None and not self.worker:
            from .bench import storage

            try:
                self.baseline_path = storage.find(self.storage, spec)
                self.baseline = storage.check_baseline(
                    storage.load(self.baseline_path), self.baseline_path
                )
            except (OSError, ValueError) as exc:
                raise pytest.UsageError(str(exc)) from None
        self.summary: List[str] = []

    @property
    def storage(self) -> str:
        """The folder of saved runs: --fastprof-storage, else
        ROOTDIR/.fastprof/benchmarks/MACHINE."""
        if self._storage is None:
            from .bench import storage

            self._storage = os.path.join(
                str(self.config.rootpath), ".fastprof", "benchmarks", storage.machine_id()
            )
        return self._storage

    def record(self, result: Dict[str, Any], prof_stats: Optional[Dict[Any, Any]]) -> None:
        """Keep one benchmark's result (and its profiled round's pstats dict)."""
        self.results.append(result)
        if prof_stats is not None:
            self.prof_stats[result["fullname"]] = prof_stats


_STATE_KEY = pytest.StashKey[_State]()


def _session_options(opt: Any) -> Optional[Options]:
    """Return the benchmark Options of the session: the defaults with --fastprof-min-rounds,
    --fastprof-max-time and --fastprof-min-time applied (a marker's keys still win), or None
    when none is given (nothing is imported then).  Raises pytest.UsageError naming the
    option for a bad value."""
    given = {
        name: getattr(opt, f"fastprof_{name}")
        for name in ("min_rounds", "max_time", "min_time")
        if getattr(opt, f"fastprof_{name}") is not None
    }
    if not given:
        return None
    from .bench.runner import Options, options_from

    try:
        return options_from(Options(), given, "the --fastprof-* options")
    except (TypeError, ValueError) as exc:
        message = str(exc)
        for name in given:  # the option as typed
            option = "--fastprof-" + name.replace("_", "-")
            message = message.replace(f"benchmark option {name}", option)
        raise pytest.UsageError(message) from None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fastprof", "fastprof benchmarks")
    group.addoption(
        "--fastprof-save",
        metavar="NAME",
        default=None,
        help="save the benchmark results as NNNN_NAME.json in the storage folder",
    )
    group.addoption(
        "--fastprof-save-data",
        action="store_true",
        default=False,
        help="keep every raw sample in the saved run (stats.data); without it a benchmark of "
        "more than 1000 rounds keeps a summary of them, which comparisons read alike",
    )
    group.addoption(
        "--fastprof-compare",
        metavar="NAME",
        nargs="?",
        const="latest",
        default=None,
        help="compare with a saved run: NNNN, NAME or a path (the latest without "
        "a value; write --fastprof-compare=NAME)",
    )
    group.addoption(
        "--fastprof-compare-fail",
        metavar="STAT:N%",
        action="append",
        default=[],
        help="fail the session when the 95%% confidence interval of STAT's ratio "
        "(min, mean or median) lies beyond N%% slower; repeatable",
    )
    group.addoption(
        "--fastprof-profile",
        action="store_true",
        default=False,
        help="run one more round of each benchmark under the call profiler, keep "
        "its top rows and, on a regression, write its .prof file",
    )
    group.addoption(
        "--fastprof-storage",
        metavar="DIR",
        default=None,
        help="folder of saved runs (default: ROOTDIR/.fastprof/benchmarks/MACHINE)",
    )
    group.addoption(
        "--fastprof-json",
        metavar="PATH",
        default=None,
        help="also write the run, as --fastprof-save would save it, to PATH",
    )
    group.addoption(
        "--fastprof-disable",
        action="store_true",
        default=False,
        help="run each benchmarked function once, untimed, so the tests run fast and still "
        "check their results (pytest-benchmark's --benchmark-disable)",
    )
    group.addoption(
        "--fastprof-enable",
        action="store_true",
        default=False,
        help="undo --fastprof-disable (from addopts, say)",
    )
    group.addoption(
        "--fastprof-skip",
        action="store_true",
        default=False,
        help="skip the tests that use fastprof_benchmark or cuda_benchmark",
    )
    group.addoption(
        "--fastprof-only",
        action="store_true",
        default=False,
        help="run only the tests that use fastprof_benchmark or cuda_benchmark (wins over "
        "--fastprof-skip)",
    )
    group.addoption(
        "--fastprof-min-rounds",
        metavar="N",
        type=int,
        default=None,
        help="timed rounds at least (default 5; a test's @pytest.mark.benchmark wins)",
    )
    group.addoption(
        "--fastprof-max-time",
        metavar="SECONDS",
        type=float,
        default=None,
        help="seconds of timed rounds to aim for (default 1.0; the marker wins)",
    )
    group.addoption(
        "--fastprof-min-time",
        metavar="SECONDS",
        type=float,
        default=None,
        help="shortest round (default 5e-06; the marker wins)",
    )
    group.addoption(
        "--fastprof-sort",
        default="min",
        choices=["min", "max", "mean", "median", "stddev", "name"],
        help="column the summary table is sorted by (default: min)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if not (
        config.pluginmanager.hasplugin("benchmark")
        or config.pluginmanager.hasplugin("pytest_benchmark.plugin")
    ):
        config.addinivalue_line(
            "markers",
            "benchmark(group=None, min_rounds=5, min_time=5e-06, max_time=1.0, timer=..., "
            "disable_gc=True, warmup=True, warmup_iterations=100000, calibration_precision=10):"
            " options of the fastprof_benchmark fixture (pytest-benchmark's keys)",
        )
    config.stash[_STATE_KEY] = _State(config)


def _state(config: pytest.Config) -> _State:
    return config.stash[_STATE_KEY]


def _fixture_args(request: pytest.FixtureRequest, state: _State) -> Dict[str, Any]:
    """Return the keyword arguments shared by both fixtures' constructors."""
    node = request.node
    marker = node.get_closest_marker("benchmark")
    where = f"@pytest.mark.benchmark on {node.nodeid}"
    from .bench.runner import Options, options_from

    base = state.options if state.options is not None else Options()
    try:
        opts = options_from(base, dict(marker.kwargs) if marker else {}, where)
    except (TypeError, ValueError) as exc:
        raise pytest.UsageError(str(exc)) from None
    callspec = getattr(node, "callspec", None)
    return {
        "name": node.name,
        "fullname": node.nodeid,
        "options": opts,
        "record": state.record,
        "profiler_factory": _make_profiler if state.profile else None,
        "params": dict(callspec.params) if callspec else None,
        "param": callspec.id if callspec else None,
        "root": str(request.config.rootpath),
        "disabled": state.disabled,
    }


def _disabled_here(state: _State, name: str) -> None:
    """Skip the test under --fastprof-skip; on an xdist worker, where the fixture runs its
    function once untimed, warn so that the session's summary says so."""
    if state.skip:
        pytest.skip(_SKIP_REASON)
    if state.worker:
        warnings.warn(pytest.PytestWarning(_XDIST_NOTE.format(name=name)), stacklevel=2)


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    state = config.stash.get(_STATE_KEY, None)
    if state is None or not (state.skip or state.only):
        return
    for item in items:
        uses = any(name in _FIXTURES for name in getattr(item, "fixturenames", ()))
        if uses and state.skip:
            item.add_marker(pytest.mark.skip(reason=_SKIP_REASON))
        elif not uses and state.only:
            item.add_marker(pytest.mark.skip(reason=_ONLY_REASON))


@pytest.fixture
def fastprof_benchmark(request: pytest.FixtureRequest) -> Iterator[BenchmarkFixture]:
    """Time a callable: ``fastprof_benchmark(fn, *args, **kwargs)`` returns fn's result;
    ``fastprof_benchmark("label", fn, ...)`` for several benchmarks in one test;
    ``.pedantic(...)`` as in pytest-benchmark; options from ``@pytest.mark.benchmark(...)``."""
    state = _state(request.config)
    _disabled_here(state, "fastprof_benchmark")
    fixture: BenchmarkFixture = _fixture_module().BenchmarkFixture(**_fixture_args(request, state))
    yield fixture
    fixture.test_finished()


@pytest.fixture
def cuda_benchmark(request: pytest.FixtureRequest) -> Iterator[CudaBenchmarkFixture]:
    """Time GPU work with CUDA events around each round (one wait per round); the stats are
    device time, host time is kept beside them. Skipped with the reason when no GPU."""
    state = _state(request.config)
    _disabled_here(state, "cuda_benchmark")
    try:
        cuda = importlib.import_module("fastprof.cuda")
    except ImportError as exc:
        pytest.skip(f"cuda_benchmark: fastprof.cuda cannot be imported: {exc}")
    try:
        available = bool(cuda.is_available())
        reason = "" if available else str(cuda.status())
    except Exception as exc:  # a missing or broken CUDA layer is a reason to skip, not a crash
        available, reason = False, f"{type(exc).__name__}: {exc}"
    if not available:
        pytest.skip(f"cuda_benchmark: no usable GPU: {reason}")
    state.cuda_used = True
    fixture: CudaBenchmarkFixture = _fixture_module().CudaBenchmarkFixture(
        cuda=cuda, **_fixture_args(request, state)
    )
    yield fixture
    fixture.test_finished()


def _device_info(state: _State) -> Dict[str, Any]:
    """Return what the run knows of the GPU (only asked when a cuda_benchmark ran)."""
    if not state.cuda_used:
        return {"cuda": "not used"}
    info: Dict[str, Any] = {}
    try:
        cuda = importlib.import_module("fastprof.cuda")
        info["status"] = str(cuda.status())
        devices = getattr(cuda, "devices", None)
        if devices is not None:
            info["devices"] = [d if isinstance(d, (str, dict)) else repr(d) for d in devices()]
    except Exception as exc:  # the run is saved whatever the device layer says
        info["error"] = f"{type(exc).__name__}: {exc}"
    return {"cuda": info}


#: the most characters of the readable part of a .prof file's name (file names stop at 255)
_PROF_NAME_CHARS = 150


def _prof_path(folder: str, fullname: str) -> str:
    """Return the .prof path of a benchmark: its node id made safe for a file name (at most
    _PROF_NAME_CHARS characters of it), then 12 hex digits of the node id's SHA-1, so that
    two node ids that read alike once made safe (``t[a/b]``, ``t[a b]``) get two files, and a
    benchmark the same file in every run."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", fullname).strip("_.")[:_PROF_NAME_CHARS]
    data = fullname.encode("utf-8", "surrogatepass")
    digest = hashlib.sha1(data, usedforsecurity=False).hexdigest()[:12]  # a name, not a secret
    return os.path.join(folder, "profiles", f"{safe or 'benchmark'}-{digest}.prof")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(_STATE_KEY, None)
    if state is None or state.worker:
        return
    lines = state.summary
    if not state.results:
        why = (
            "the benchmarks were disabled (--fastprof-disable)"
            if state.disabled
            else "no benchmarks have been run"
        )
        if state.save_name is not None or state.json_path is not None:
            lines.append(f"fastprof: not saving anything, {why}")
        if state.baseline is not None:
            lines.append(f"fastprof: nothing compared with {state.baseline_path}, {why}")
        return
    from . import __version__
    from .bench import storage

    # the run as it is saved: a comparison now reads what a later one reads from the file
    doc = storage.make_document(
        storage.for_saving(state.results, state.keep_data),
        str(session.config.rootpath),
        _device_info(state),
        __version__,
    )
    if state.baseline is not None:
        try:
            _compare_with_baseline(session, state, doc)
        except (OSError, ValueError, ImportError) as exc:  # an error, never a pass nor a lost save
            lines.append(f"fastprof: cannot compare with {state.baseline_path}: {exc}")
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
    targets: List[Callable[[], str]] = []  # each gives its path when its turn comes
    if state.save_name is not None:
        name = state.save_name
        targets.append(lambda: storage.next_path(state.storage, name))
    if state.json_path is not None:
        json_path = state.json_path
        targets.append(lambda: json_path)
    for target in targets:
        try:
            path = storage.save(doc, target())
        except (OSError, TypeError, ValueError, RecursionError) as exc:
            # TypeError/ValueError: a value JSON cannot hold; the run is not half-written
            lines.append(
                f"fastprof: could not save the benchmark results: {type(exc).__name__}: {exc}"
            )
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        else:
            lines.append(f"saved {len(state.results)} benchmark(s) to {path}")


def _compare_with_baseline(session: pytest.Session, state: _State, doc: Dict[str, Any]) -> None:
    """Adds the comparison with the baseline to the summary and fails the session on a
    regression; raises ValueError when the baseline cannot be compared, OSError when a
    regression's .prof file cannot be written, ImportError naming fastprof[kernels] when
    NumPy is missing."""
    from .bench import profiling
    from .report.escape import printable

    regression = _numpy_module("fastprof.bench.regression", "comparing benchmark runs needs")
    assert state.baseline is not None
    lines = state.summary
    comps, only_old, only_new = regression.compare_runs(state.baseline, doc, state.rules)
    lines.append(
        f"compared with {state.baseline_path}"
        + (f" (fail on {', '.join(map(str, state.rules))})" if state.rules else "")
    )
    lines.extend(regression.format_comparison(comps, state.rules))
    if only_new:
        lines.append(f"new (no baseline): {printable(', '.join(only_new))}")
    if only_old:
        lines.append(f"not run (in the baseline only): {printable(', '.join(only_old))}")
    regressed = [c for c in comps if c.regressions]
    for c in regressed:
        stats = state.prof_stats.get(c.fullname)
        if stats is not None:
            path = profiling.write_prof(stats, _prof_path(state.storage, c.fullname))
            lines.append(f"profile of {c.fullname}: {path}")
    if regressed:
        lines.append(f"{len(regressed)} benchmark(s) regressed")
        if session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(_STATE_KEY, None)
    if state is None or not (state.results or state.summary):
        return
    tr = terminalreporter
    tr.write_sep("-", "fastprof benchmarks")
    if state.results:
        from .bench import tables

        for line in tables.results_table(state.results, config.option.fastprof_sort):
            tr.write_line(line)
        for line in tables.profile_tables(state.results):
            tr.write_line(line)
    for line in state.summary:
        tr.write_line(line)
