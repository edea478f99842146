"""The object behind the fastprof_benchmark and cuda_benchmark fixtures."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import profiling, runner
from .runner import Options, Plan, Sampled
from .sample_stats import CI_LEVEL, KEEP_SAMPLES, compute_stats, summarize

#: the resolution assumed for CUDA events (the CUDA docs give about half a microsecond)
CUDA_EVENT_RESOLUTION = 5e-7

Record = Callable[[Dict[str, Any], Optional[Dict[Any, Any]]], None]
ProfilerFactory = Callable[[], Any]
#: each call's (args, kwargs) in one round
Calls = List[Tuple[Tuple, Dict]]


class FixtureUsageError(TypeError):
    """The fixture was called in a way it does not support."""


def _json_safe(value: Any, _active: Optional[set] = None) -> Any:
    """Return a copy of value made of plain JSON data, for params and extra_info: lists for
    tuples, str keys, a NumPy scalar's Python value, and pytest-benchmark's
    "UNSERIALIZABLE[repr]" for anything else (a container inside itself included)."""
    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, str):
        return str.__str__(value)  # subclasses as their base type
    if isinstance(value, (int, float)):  # IntEnum, np.float64, ...
        return float(value) if isinstance(value, float) else int(value)
    if type(value).__module__ == "numpy" and getattr(value, "shape", None) == ():
        item = value.item()  # a NumPy scalar or 0-d array: its Python value
        if item is not value and type(item).__module__ != "numpy":
            return _json_safe(item, _active)
    if isinstance(value, (list, tuple, dict)):
        active = set() if _active is None else _active
        if id(value) in active:
            return f"UNSERIALIZABLE[<{type(value).__name__} containing itself>]"
        active.add(id(value))
        try:
            if isinstance(value, dict):
                return {str(k): _json_safe(v, active) for k, v in value.items()}
            return [_json_safe(v, active) for v in value]
        finally:
            active.discard(id(value))
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not lose the run
        text = f"<{type(value).__name__} object>"
    return f"UNSERIALIZABLE[{text}]"


def _split_label(where: str, args: Tuple[Any, ...]) -> Tuple[Optional[str], Any, Tuple[Any, ...]]:
    """Return (label, target, rest) from (["label",] target, *rest); raises FixtureUsageError."""
    label = None
    if args and isinstance(args[0], str):
        label, args = args[0], args[1:]
        if not label:
            raise FixtureUsageError(f"{where}: the label must be a non-empty str")
    if not args or not callable(args[0]):
        got = repr(args[0]) if args else "nothing"
        raise FixtureUsageError(
            f"{where}: expected a callable to time, as {where}(fn, *args, **kwargs) or "
            f"{where}('label', fn, *args, **kwargs); got {got}"
        )
    return label, args[0], args[1:]


class BenchmarkFixture:
    """Times callables for one test; several labelled benchmarks per test are allowed.

    Call it as ``fastprof_benchmark(fn, *args, **kwargs)`` (returns fn's result) or
    ``fastprof_benchmark("label", fn, ...)``; ``pedantic(...)`` fixes rounds and iterations.
    Coroutine functions are timed inside an event loop: a fresh one, or, when called from a
    running loop, the running one (then ``await`` the call).
    """

    fixture_name = "fastprof_benchmark"

    def __init__(
        self,
        name: str,
        fullname: str,
        options: Options,
        record: Record,
        profiler_factory: Optional[ProfilerFactory] = None,
        params: Optional[Dict[str, Any]] = None,
        param: Optional[str] = None,
        root: Optional[str] = None,
        disabled: bool = False,
    ) -> None:
        self.name = name
        #: run each function once, untimed (--fastprof-disable, pytest-xdist workers)
        self.disabled = disabled
        self.fullname = fullname
        self.options = options
        self._extra_info: Dict[str, Any] = {}
        self.results: List[Dict[str, Any]] = []
        self._record = record
        self._profiler_factory = profiler_factory
        self._params = params
        self._param = param
        self._root = root
        self._labels: set = set()

    # pytest-benchmark's fixture exposes these
    @property
    def group(self) -> Optional[str]:
        """The group this test's benchmarks are reported under."""
        return self.options.group

    @group.setter
    def group(self, value: Optional[str]) -> None:
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{self.fixture_name}.group: expected a str or None, got {value!r}")
        self.options.group = value

    @property
    def extra_info(self) -> Dict[str, Any]:
        """Free-form data saved with the benchmarks of this test. Each result keeps a copy
        (made JSON-safe) of what it held when that benchmark finished; the test's last result
        takes what it holds when the test ends (see test_finished)."""
        return self._extra_info

    @extra_info.setter
    def extra_info(self, value: Dict[str, Any]) -> None:
        if not isinstance(value, dict):
            raise TypeError(f"{self.fixture_name}.extra_info: expected a dict, got {value!r}")
        self._extra_info = value

    @property
    def stats(self) -> Optional[Dict[str, Any]]:
        """The stats dict of the last benchmark run by this fixture (None before any)."""
        return self.results[-1]["stats"] if self.results else None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Time fn(*args, **kwargs) with calibrated rounds; return fn's result."""
        label, fn, rest = _split_label(self.fixture_name, args)
        self._claim(label)
        if self.disabled:
            return self._call_once(fn, rest, kwargs, None, None)
        resolution = self._resolution()
        plan = runner.calibrated_plan(self.options, resolution)
        seen = runner.foreign_hooks_active() and not inspect.iscoroutinefunction(fn)
        result = self._run(label, fn, rest, kwargs, None, None, plan, resolution)
        if seen:
            # The timing paused coverage's or a debugger's hooks: one last call with them on,
            # as pytest-benchmark makes, so they see the benchmarked code.
            result = fn(*rest, **kwargs)
        return result

    def pedantic(self, target: Any, *rest: Any, **options: Any) -> Any:
        """Time target with fixed rounds; pytest-benchmark's signature plus an optional label:
        pedantic([label,] target, args=(), kwargs=None, setup=None, teardown=None, rounds=1,
        warmup_rounds=0, iterations=1); returns target's last result. setup runs untimed
        before every call (iterations > 1 allowed) and may return (args, kwargs); after each
        round (warm-up rounds included) teardown runs once per call with that call's arguments
        when setup is given, else once with args and kwargs, as in pytest-benchmark.
        """
        where = f"{self.fixture_name}.pedantic"
        label, fn, rest = _split_label(where, (target,) + rest)
        p = _pedantic_args(where, *rest, **options)
        self._claim(label)
        if self.disabled:
            return self._call_once(fn, p["args"], p["kwargs"], p["setup"], p["teardown"])
        plan = runner.fixed_plan(p["rounds"], p["warmup_rounds"], p["iterations"])
        return self._run(
            label, fn, p["args"], p["kwargs"], p["setup"], p["teardown"], plan, self._resolution()
        )

    def test_finished(self) -> None:
        """Called by the plugin when the test ends: the last result's extra_info becomes a
        copy of what extra_info holds now, so keys set after the last benchmark are saved (as
        pytest-benchmark, which reads extra_info when the test ends, saves them)."""
        if self.results:
            self.results[-1]["extra_info"] = _json_safe(self._extra_info)

    # --- machinery -------------------------------------------------------------------------

    def _resolution(self) -> float:
        return runner.timer_resolution(self.options.timer)

    def _claim(self, label: Optional[str]) -> None:
        """Reserve a label (None: the test's single unlabelled benchmark)."""
        if label in self._labels:
            what = f"label {label!r}" if label else "the unlabelled benchmark"
            raise FixtureUsageError(
                f"{self.fixture_name}: {what} was already run in this test; give each "
                f"benchmark its own label: {self.fixture_name}('name', fn, ...)"
            )
        self._labels.add(label)

    def _call_once(self, fn: Any, args: Tuple, kwargs: Dict, setup: Any, teardown: Any) -> Any:
        """Return fn's result from one untimed call (setup before it and teardown after it,
        when given); a coroutine function runs in a fresh event loop, or, when a loop is
        running, the coroutine to await is returned, as a timed call's would be."""
        a, k = _setup_call(f"{self.fixture_name}.pedantic", setup, args, kwargs)
        if not inspect.iscoroutinefunction(fn):
            result = fn(*a, **k)
            if teardown is not None:
                teardown(*a, **k)
            return result

        async def once() -> Any:
            result = await fn(*a, **k)
            if teardown is not None:
                teardown(*a, **k)
            return result

        return once() if _loop_running() else _in_new_loop(once())

    def _where(self, label: Optional[str]) -> str:
        return f"{self.fixture_name}({self.fullname}{'::' + label if label else ''})"

    def _call_makers(
        self, args: Tuple, kwargs: Dict, setup: Any, teardown: Any
    ) -> Tuple[Callable[[int], Calls], Callable[[Calls], None]]:
        """Return (prepare, finish): prepare(n) gives each call's (args, kwargs), from setup
        (run once per call) when given; finish(calls) runs teardown after a round."""
        where = f"{self.fixture_name}.pedantic"

        def prepare(n: int) -> Calls:
            """Return each call's (args, kwargs): setup's, run once per call, when given."""
            if setup is None:
                return [(args, kwargs)] * n
            return [_setup_call(where, setup, args, kwargs) for _ in range(n)]

        def finish(calls: Calls) -> None:
            """Call teardown after a round: once per call with each call's arguments when
            setup made them, else once per round (as pytest-benchmark does)."""
            if teardown is None:
                return
            for a, k in calls if setup is not None else calls[:1]:
                teardown(*a, **k)

        return prepare, finish

    def _round_runner(
        self,
        fn: Any,
        args: Tuple,
        kwargs: Dict,
        setup: Any,
        teardown: Any,
        is_async: bool,
        box: List[Any],
    ) -> Callable[[int], Any]:
        """Return the round runner: sync, or a coroutine function when is_async."""
        timer = self.options.timer
        prepare, finish = self._call_makers(args, kwargs, setup, teardown)

        if is_async:

            async def run_async(n: int) -> float:
                calls = prepare(n)
                t0 = timer()
                for a, k in calls:
                    box[0] = await fn(*a, **k)
                t1 = timer()
                finish(calls)
                return t1 - t0

            return run_async

        if setup is None and teardown is None and not args and not kwargs:

            def run_bare(n: int) -> float:  # the common case: the cheapest loop Python has
                loop = range(n)
                r = None
                t0 = timer()
                for _ in loop:
                    r = fn()
                t1 = timer()
                box[0] = r
                return t1 - t0

            return run_bare

        if setup is None and teardown is None:

            def run_plain(n: int) -> float:
                loop = range(n)
                r = None
                t0 = timer()
                for _ in loop:
                    r = fn(*args, **kwargs)
                t1 = timer()
                box[0] = r
                return t1 - t0

            return run_plain

        def run_setup(n: int) -> float:
            calls = prepare(n)
            r = None
            t0 = timer()
            for a, k in calls:
                r = fn(*a, **k)
            t1 = timer()
            box[0] = r
            finish(calls)
            return t1 - t0

        return run_setup

    def _profiled_runner(
        self,
        fn: Any,
        args: Tuple,
        kwargs: Dict,
        setup: Any,
        teardown: Any,
        is_async: bool,
        prof: Any,
    ) -> Callable[[int], Any]:
        """Return a round runner (a coroutine function when is_async) whose round has prof
        enabled around fn's n calls only: setup before them and teardown after them run
        outside the profiled span, as does the timer; the round's duration returned is 0.0."""
        prepare, finish = self._call_makers(args, kwargs, setup, teardown)
        enable, disable = prof.enable, prof.disable

        if is_async:

            async def profile_async(n: int) -> float:
                calls = prepare(n)
                enable()
                try:
                    for a, k in calls:
                        await fn(*a, **k)
                finally:
                    disable()
                finish(calls)
                return 0.0

            return profile_async

        if setup is None:

            def profile_plain(n: int) -> float:  # no list of n calls: n may be large
                loop = range(n)
                enable()
                try:
                    for _ in loop:
                        fn(*args, **kwargs)
                finally:
                    disable()
                if teardown is not None:
                    teardown(*args, **kwargs)
                return 0.0

            return profile_plain

        def profile_setup(n: int) -> float:
            calls = prepare(n)
            enable()
            try:
                for a, k in calls:
                    fn(*a, **k)
            finally:
                disable()
            finish(calls)
            return 0.0

        return profile_setup

    def _run(
        self,
        label: Optional[str],
        fn: Any,
        args: Tuple,
        kwargs: Dict,
        setup: Any,
        teardown: Any,
        plan: Plan,
        resolution: float,
    ) -> Any:
        """Drive plan with fn's round runner, record the result; return fn's last result
        (a coroutine to await when fn is async and a loop is already running)."""
        is_async = inspect.iscoroutinefunction(fn)
        box: List[Any] = [None]
        run_round = self._round_runner(fn, args, kwargs, setup, teardown, is_async, box)
        run_round = self._wrap_round(run_round, is_async)
        where = self._where(label)
        if not is_async:
            with runner.quiet(self.options.disable_gc, where):
                samples, n = runner.drive(plan, run_round)
            sampled = Sampled(samples, n, box[0])
            extra = self._extra(sampled)
            stats = self._profile_sync(fn, args, kwargs, setup, teardown, n, where)
            self._finish(label, sampled, resolution, stats, "sync", extra)
            return sampled.result

        async def main() -> Any:
            with runner.quiet(self.options.disable_gc, where):
                samples, n = await runner.drive_async(plan, run_round)
            sampled = Sampled(samples, n, box[0])
            extra = self._extra(sampled)
            stats = None
            if self._profiler_factory is not None:
                prof = self._profiler_factory()
                profiled = self._profiled_runner(fn, args, kwargs, setup, teardown, True, prof)
                profiled = self._wrap_round(profiled, True)
                with runner.quiet(self.options.disable_gc, where):  # foreign hooks paused
                    await profiled(n)
                stats = _stats_of(prof)
            self._finish(label, sampled, resolution, stats, "async", extra)
            return sampled.result

        if _loop_running():
            return main()
        return _in_new_loop(main())

    def _wrap_round(self, run_round: Callable[[int], Any], is_async: bool) -> Callable[[int], Any]:
        """Hook for subclasses that time rounds differently (CUDA events)."""
        return run_round

    def _profile_sync(
        self,
        fn: Any,
        args: Tuple,
        kwargs: Dict,
        setup: Any,
        teardown: Any,
        n: int,
        where: str,
    ) -> Optional[Dict]:
        """Run one more round of n calls with the call profiler on around fn's calls only
        (setup, teardown and the runner's bookkeeping outside it), foreign hooks paused as in
        the timed rounds; return its pstats dict (None when not asked)."""
        if self._profiler_factory is None:
            return None
        prof = self._profiler_factory()
        profiled = self._profiled_runner(fn, args, kwargs, setup, teardown, False, prof)
        profiled = self._wrap_round(profiled, False)
        with runner.quiet(self.options.disable_gc, where):
            profiled(n)
        return _stats_of(prof)

    def _extra(self, sampled: Sampled) -> Dict[str, Any]:
        """Return fixture-specific additions to the "fastprof" section of a result."""
        return {}

    def _finish(
        self,
        label: Optional[str],
        sampled: Sampled,
        resolution: float,
        prof_stats: Optional[Dict],
        kind: str,
        extra: Dict[str, Any],
    ) -> None:
        """Build the pytest-benchmark-shaped result dict and hand it to the session."""
        suffix = f"::{label}" if label else ""
        section: Dict[str, Any] = {
            "label": label,
            "kind": kind,
            "ci_level": CI_LEVEL,
            "timer_resolution": resolution,
        }
        if prof_stats is not None:
            section["profile"] = profiling.top_rows(prof_stats, sampled.iterations, root=self._root)
        section.update(extra)
        stats = compute_stats(sampled.samples, sampled.iterations)
        section["median_ci"] = stats["median_ci"]
        if len(sampled.samples) > KEEP_SAMPLES:  # what a saved run keeps instead of stats.data
            section["samples"] = summarize(sampled.samples).to_json()
        result = {
            "group": self.options.group,
            "name": self.name + suffix,
            "fullname": self.fullname + suffix,
            "params": _json_safe(self._params),
            "param": self._param,
            "extra_info": _json_safe(self._extra_info),
            "options": self.options.as_json(),
            "stats": stats,
            "fastprof": section,
        }
        self.results.append(result)
        self._record(result, prof_stats)


def _loop_running() -> bool:
    """Return True when this thread is running an asyncio event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _in_new_loop(coro: Any) -> Any:
    """Return coro's result, run to the end in a new event loop, which is closed after."""
    loop = asyncio.new_event_loop()  # outside any except block: fn's errors chain to nothing
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def _stats_of(prof: Any) -> Dict[Any, Any]:
    """Return the pstats dict of a stopped cProfile-compatible profiler, without the rows of
    its own disable call (profiling.target_stats)."""
    prof.create_stats()
    return profiling.target_stats(dict(prof.stats))


def _setup_call(where: str, setup: Any, args: Tuple, kwargs: Dict) -> Tuple[Tuple, Dict]:
    """Call setup; return the (args, kwargs) the target gets."""
    if setup is None:
        return args, kwargs
    made = setup()
    if made is None:
        return args, kwargs
    if args or kwargs:
        raise FixtureUsageError(
            f"{where}: setup returned arguments, so args= and kwargs= must be left empty"
        )
    # a list too: pytest-benchmark unpacks what setup returns (args, kwargs = ...)
    if not (isinstance(made, (tuple, list)) and len(made) == 2 and isinstance(made[1], dict)):
        raise FixtureUsageError(f"{where}: setup must return None or (args, kwargs), got {made!r}")
    return tuple(made[0]), made[1]


def _pedantic_args(
    where: str,
    args: Any = (),
    kwargs: Any = None,
    setup: Any = None,
    teardown: Any = None,
    rounds: Any = 1,
    warmup_rounds: Any = 0,
    iterations: Any = 1,
) -> Dict[str, Any]:
    """Check pedantic()'s arguments; return them normalised. Raises TypeError/ValueError."""
    if not isinstance(args, (tuple, list)):
        raise FixtureUsageError(f"{where}: args must be a tuple or list, got {args!r}")
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict):
        raise FixtureUsageError(f"{where}: kwargs must be a dict or None, got {kwargs!r}")
    for name, fn in (("setup", setup), ("teardown", teardown)):
        if fn is not None and not callable(fn):
            raise FixtureUsageError(f"{where}: {name} must be callable or None, got {fn!r}")
    for name, value, low in (
        ("rounds", rounds, 1),
        ("iterations", iterations, 1),
        ("warmup_rounds", warmup_rounds, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{where}: {name} must be an int >= {low}, got {value!r}")
    return {
        "args": tuple(args),
        "kwargs": kwargs,
        "setup": setup,
        "teardown": teardown,
        "rounds": rounds,
        "warmup_rounds": warmup_rounds,
        "iterations": iterations,
    }


class CudaBenchmarkFixture(BenchmarkFixture):
    """Times GPU work with CUDA events recorded on the stream around each round and one wait
    per round; stats are device time, host time is kept beside them.

    ``cuda_benchmark(fn, *args, **kwargs)``; ``cuda_benchmark.stream`` picks the stream
    (None: the default stream).
    """

    fixture_name = "cuda_benchmark"

    def __init__(self, *args: Any, cuda: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._cuda = cuda
        self.stream: Any = None
        self._host: List[float] = []

    def _resolution(self) -> float:
        return CUDA_EVENT_RESOLUTION

    def _wrap_round(self, run_round: Callable[[int], Any], is_async: bool) -> Callable[[int], Any]:
        cuda, host = self._cuda, self._host
        host.clear()

        if is_async:

            async def timed_async(n: int) -> float:
                with cuda.cuda_timer(stream=self.stream) as t:
                    await run_round(n)
                host.append(float(t.cpu_ms) / 1e3)
                return float(t.elapsed_ms) / 1e3

            return timed_async

        def timed(n: int) -> float:
            with cuda.cuda_timer(stream=self.stream) as t:
                run_round(n)
            host.append(float(t.cpu_ms) / 1e3)
            return float(t.elapsed_ms) / 1e3

        return timed

    def _extra(self, sampled: Sampled) -> Dict[str, Any]:
        rounds = len(sampled.samples)
        host = [h / sampled.iterations for h in self._host[len(self._host) - rounds :]]
        self._host = []
        out: Dict[str, Any] = {"clock": "cuda_event"}
        if host:
            out["host"] = compute_stats(host, sampled.iterations)
        return out

    def _finish(
        self,
        label: Optional[str],
        sampled: Sampled,
        resolution: float,
        prof_stats: Optional[Dict],
        kind: str,
        extra: Dict[str, Any],
    ) -> None:
        super()._finish(label, sampled, resolution, prof_stats, "cuda", extra)
