"""The timing engine behind the benchmark fixtures: options, calibration, warm-up, rounds.

The round plan (calibrate, warm up, time) is written once as a generator that asks for
"a round of n iterations" and is sent back its duration; a synchronous driver and an
asynchronous one (for coroutine functions, timed inside the running loop) both feed it.
"""

from __future__ import annotations

import gc
import math
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Any, Callable, Dict, Generator, Iterator, List, Optional, Tuple

Timer = Callable[[], float]
#: a round runner takes an iteration count and returns the round's duration in seconds
RoundRunner = Callable[[int], float]
Plan = Generator[int, float, Tuple[List[float], int]]

# marker keys of pytest-benchmark that only its own machinery uses; read and ignored here
_FOREIGN_KEYS = frozenset(
    {"cprofile", "cprofile_loops", "cprofile_top", "cprofile_dump", "precision", "confidence"}
)
# the longest a warm-up runs, whatever max_time says
_MAX_WARMUP_SECONDS = 0.5
#: how long (real seconds) calibration runs with a timer that never moves before giving up
STUCK_TIMER_SECONDS = 1.0


def _is_seconds(value: Any) -> bool:
    """Return True when value is a number of seconds rounds can be planned with: an int or a
    float (not a bool), >= 0 and finite as a float (NaN, infinity and an int beyond a
    float's range are not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return 0 <= float(value) < math.inf
    except OverflowError:  # an int beyond a float's range
        return False


@dataclass
class Options:
    """How a benchmark is run; the fields are pytest-benchmark's marker keys."""

    group: Optional[str] = None
    min_rounds: int = 5
    min_time: float = 5e-06
    max_time: float = 1.0
    timer: Timer = time.perf_counter
    disable_gc: bool = True
    warmup: bool = True
    warmup_iterations: int = 100_000
    calibration_precision: int = 10

    def check(self) -> "Options":
        """Return self after validating every field; raises ValueError/TypeError naming it."""
        if self.group is not None and not isinstance(self.group, str):
            raise TypeError(f"benchmark option group: expected a str or None, got {self.group!r}")
        for name in ("min_rounds", "warmup_iterations", "calibration_precision"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"benchmark option {name}: expected an int >= 1, got {value!r}")
        for name in ("min_time", "max_time"):
            value = getattr(self, name)
            if not _is_seconds(value):
                positive = type(value) is not bool and isinstance(value, (int, float)) and value > 0
                why = " (a time must be finite)" if positive else ""
                raise ValueError(
                    f"benchmark option {name}: expected a number >= 0, got {value!r}{why}"
                )
        if not callable(self.timer):
            raise TypeError(f"benchmark option timer: expected a callable, got {self.timer!r}")
        return self

    def as_json(self) -> Dict[str, Any]:
        """Return the options as pytest-benchmark writes them (the timer by name)."""
        out: Dict[str, Any] = {}
        for f in fields(self):
            if f.name == "group":
                continue
            value = getattr(self, f.name)
            out[f.name] = getattr(value, "__name__", repr(value)) if f.name == "timer" else value
        return out


def options_from(base: Options, overrides: Dict[str, Any], where: str) -> Options:
    """Return a copy of base with marker keyword overrides applied and checked.

    Raises TypeError for a key that neither pytest-benchmark nor fastprof knows.
    """
    known = {f.name for f in fields(Options)}
    values = {f.name: getattr(base, f.name) for f in fields(Options)}
    for key, value in overrides.items():
        if key in known:
            values[key] = value
        elif key not in _FOREIGN_KEYS:
            raise TypeError(
                f"{where}: unknown benchmark option {key!r}; expected one of {sorted(known)}"
            )
    return Options(**values).check()


_resolution_cache: Dict[Any, float] = {}


def timer_resolution(timer: Timer) -> float:
    """Return the smallest step (seconds) seen between two readings of timer.

    A timer that never moves in a few thousand reads is given 1 ns, so a stuck or fake clock
    cannot hang calibration. Results are cached per timer (a few dozen at most).
    """
    try:
        cached = _resolution_cache.get(timer)
    except TypeError:  # an unhashable callable: measured every time
        cached = None
    if cached is not None:
        return cached
    best = math.inf
    for _ in range(20):
        t0 = t1 = timer()
        tries = 0
        while t1 == t0 and tries < 2000:
            t1 = timer()
            tries += 1
        if t1 > t0:
            best = min(best, t1 - t0)
    result = best if math.isfinite(best) else 1e-9
    try:
        if len(_resolution_cache) >= 64:
            _resolution_cache.clear()
        _resolution_cache[timer] = result
    except TypeError:
        pass
    return result


class TimerStuckError(ValueError):
    """The benchmark's timer did not advance while calibration ran: no round can be timed."""


def calibrated_plan(opts: Options, resolution: float, wall: Timer = time.perf_counter) -> Plan:
    """Yield iteration counts, receive round durations; return (per-iteration samples, n).

    The first (cold) call is discarded. Calibration then grows the iteration count until two
    rounds in a row last at least max(min_time, resolution * calibration_precision); warm-up
    runs more untimed rounds until warmup_iterations calls or its time budget (calibration
    included) is spent; then max(min_rounds, max_time / round time) rounds are timed.

    Raises TimerStuckError when opts.timer has not moved in any round while `wall` (a real
    clock) says calibration has spent STUCK_TIMER_SECONDS, or would pass them with one more
    round, or after 2**40 calls.
    """
    min_time = max(opts.min_time, resolution * opts.calibration_precision)
    n = 1
    started = wall()
    spent = yield n  # cold call: caches, lazy imports
    calls = 1
    while True:
        duration = math.inf
        for _ in range(2):
            round_started = wall()
            d = yield n
            round_wall = wall() - round_started
            spent += d
            calls += n
            duration = min(duration, d)
            if d < min_time:
                break
        if duration >= min_time:
            break
        if duration <= 0:
            elapsed = wall() - started
            left = STUCK_TIMER_SECONDS - elapsed
            if left <= 0 or left < round_wall or n >= 1 << 40:  # no larger round fits
                raise TimerStuckError(
                    f"benchmark option timer: {opts.timer!r} did not advance in {calls} calls "
                    f"({elapsed:.3g} s on the real clock); the timer must return seconds that "
                    "grow while the benchmarked function runs, as time.perf_counter does"
                )
            # ten times more calls, but no more than the real clock says fit in what is left
            fit = int(left * n / round_wall) if round_wall > 0 else n * 10
            n = max(n + 1, min(n * 10, fit))
        elif n >= 1 << 40:
            break
        else:
            n = max(n + 1, int(math.ceil(n * min_time * 1.2 / duration)))
    if opts.warmup:
        budget = min(_MAX_WARMUP_SECONDS, opts.max_time)
        while calls < opts.warmup_iterations and spent < budget:
            spent += yield n
            calls += n
    per_round = max(duration, resolution)
    rounds = max(opts.min_rounds, int(math.ceil(opts.max_time / per_round)))
    samples: List[float] = []
    for _ in range(rounds):
        d = yield n
        samples.append(d / n)
    return samples, n


def fixed_plan(rounds: int, warmup_rounds: int, iterations: int) -> Plan:
    """Yield `iterations` for each warm-up round then each timed round; return the samples."""
    for _ in range(warmup_rounds):
        yield iterations
    samples: List[float] = []
    for _ in range(rounds):
        d = yield iterations
        samples.append(d / iterations)
    return samples, iterations


def drive(plan: Plan, run_round: RoundRunner) -> Tuple[List[float], int]:
    """Run plan to its end with a synchronous round runner; return what the plan returns."""
    try:
        n = next(plan)
        while True:
            n = plan.send(run_round(n))
    except StopIteration as stop:
        return stop.value


async def drive_async(plan: Plan, run_round: Callable[[int], Any]) -> Tuple[List[float], int]:
    """Run plan to its end with an asynchronous round runner (awaited in the running loop)."""
    try:
        n = next(plan)
        while True:
            n = plan.send(await run_round(n))
    except StopIteration as stop:
        return stop.value


class ProfilerActiveError(RuntimeError):
    """A fastprof profiler is running: benchmarks refuse to time under it."""


def _is_fastprof_hook(obj: Any) -> bool:
    """Return True when obj (a profile/trace hook) is one of fastprof's own profilers."""
    if obj is None:
        return False
    owner = getattr(obj, "__self__", obj)  # bound methods installed as hooks
    module = getattr(type(owner), "__module__", "") or ""
    return module.split(".")[0] == "fastprof" and bool(getattr(owner, "enabled", True))


def _fastprof_monitoring_tools() -> List[str]:
    """Return the names of sys.monitoring tools (3.12+) that belong to fastprof."""
    mon = getattr(sys, "monitoring", None)
    if mon is None:
        return []
    names = []
    for tool in range(6):
        name = mon.get_tool(tool)
        if name and name.lower().startswith("fastprof"):
            names.append(name)
    return names


def refuse_fastprof_profilers(where: str) -> None:
    """Raise ProfilerActiveError when a fastprof profiler is active in this thread."""
    found = []
    if _is_fastprof_hook(sys.getprofile()):
        found.append(f"profile hook {type(sys.getprofile()).__name__}")
    if _is_fastprof_hook(sys.gettrace()):
        found.append(f"trace hook {type(sys.gettrace()).__name__}")
    found.extend(f"sys.monitoring tool {name!r}" for name in _fastprof_monitoring_tools())
    if found:
        raise ProfilerActiveError(
            f"{where}: a fastprof profiler is active ({', '.join(found)}); benchmarks do not "
            "time under a profiler: disable it first, or use --fastprof-profile for a profiled "
            "round"
        )


def foreign_hooks_active() -> bool:
    """Return True when a profile or trace hook, or a sys.monitoring tool with global events
    (a debugger, coverage.py), is on in this thread: what quiet() pauses."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return True
    mon = getattr(sys, "monitoring", None)
    return mon is not None and any(
        mon.get_tool(tool) is not None and mon.get_events(tool) for tool in range(6)
    )


def _lsprof_profiler() -> Optional[type]:
    """Return cProfile's C profiler type (_lsprof.Profiler), or None where it is missing."""
    try:
        import _lsprof
    except ImportError:
        return None
    return getattr(_lsprof, "Profiler", None)


def _noop() -> None:
    """Restores a hook that was left on."""


def _pause_hook(hook: Any, set_hook: Callable[[Any], None]) -> Callable[[], None]:
    """Pause one profile or trace hook of this thread; return the function that restores it.

    A Python callable (what sys.setprofile / sys.settrace take, and C tracers such as
    coverage's that accept being set back that way) is removed and set again after. A cProfile
    profiler (a C-level hook below 3.12: sys.getprofile() returns the profiler, which is not
    callable) is disabled and re-enabled, which keeps what it has collected. Any other
    non-callable holder is a C-level hook that Python cannot set back: it is left on.
    With no hook, the restorer removes any that the timed code left behind.
    """
    if hook is None:
        return lambda: set_hook(None)  # whatever the timed code installed is taken off
    lsprof = _lsprof_profiler()
    if lsprof is not None and isinstance(hook, lsprof):
        profiler: Any = hook
        profiler.disable()
        return profiler.enable
    if not callable(hook):
        return _noop
    set_hook(None)
    return lambda: set_hook(hook)


@contextmanager
def quiet(disable_gc: bool, where: str) -> Iterator[None]:
    """Time inside this: fastprof profilers refused, gc collected (and disabled if asked),
    foreign profile/trace hooks and sys.monitoring global events paused, all restored after
    (a cProfile profiler is disabled and re-enabled; see _pause_hook)."""
    refuse_fastprof_profilers(where)
    gc_was_enabled = gc.isenabled()
    mon = getattr(sys, "monitoring", None)
    paused: Dict[int, int] = {}
    restore_profile = restore_trace = _noop
    gc.collect()
    try:
        if mon is not None:
            for tool in range(6):
                if mon.get_tool(tool) is not None:
                    events = mon.get_events(tool)
                    if events:
                        paused[tool] = events
                        mon.set_events(tool, 0)
        restore_profile = _pause_hook(sys.getprofile(), sys.setprofile)
        restore_trace = _pause_hook(sys.gettrace(), sys.settrace)
        if disable_gc:
            gc.disable()
        yield
    finally:
        if gc_was_enabled:
            gc.enable()
        if mon is not None:
            for tool, events in paused.items():
                if mon.get_tool(tool) is not None:
                    mon.set_events(tool, events)
        restore_trace()
        restore_profile()


@dataclass
class Sampled:
    """What one benchmark's timing produced: per-call samples, calls per round, fn's result."""

    samples: List[float]
    iterations: int
    result: Any = None
