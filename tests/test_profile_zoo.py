"""fastprof.Profile against cProfile on a zoo of call shapes: the counts (total and primitive
calls, per function and per caller edge) must be the same, and under a fake clock that only
moves inside the zoo's own code, the times too."""

from __future__ import annotations

import asyncio
import cProfile
import functools
import math
import pstats
import threading
from typing import Any, Callable, Dict, Iterator

import pytest

import fastprof
from profile_helpers import comparable

HERE = __file__
CLOCK = [0]


def clock() -> int:
    return CLOCK[0]


# -- the zoo -------------------------------------------------------------------------------


def fib(n: int) -> int:
    CLOCK[0] += 1
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def is_even(n: int) -> bool:
    CLOCK[0] += 2
    return True if n == 0 else is_odd(n - 1)


def is_odd(n: int) -> bool:
    CLOCK[0] += 3
    return False if n == 0 else is_even(n - 1)


def case_recursion() -> None:
    fib(10)
    is_even(9)
    is_odd(6)
    fib(3)


def down(n: int) -> int:
    CLOCK[0] += 1
    return 0 if n == 0 else 1 + down(n - 1)


def case_deep() -> None:
    """Deeper than the profiler's first stack (128 frames), so it grows mid-run."""
    down(400)
    down(150)


def squares(n: int) -> Iterator[int]:
    for i in range(n):
        CLOCK[0] += 1
        yield i * i


def delegate(n: int) -> Iterator[int]:
    CLOCK[0] += 5
    yield from squares(n)
    yield -1


def accumulate() -> Iterator[int]:
    total = 0
    while True:
        x = yield total
        CLOCK[0] += 2
        total += x


def case_generators() -> None:
    sum(squares(10))
    list(delegate(4))
    g = squares(6)
    next(g)
    next(g)
    g.close()
    acc = accumulate()
    next(acc)
    for i in range(5):
        acc.send(i)
    [x for x in squares(3)]
    sum(x + 1 for x in squares(4))


def raiser(depth: int) -> None:
    CLOCK[0] += 1
    if depth == 0:
        raise ValueError("bottom")
    raiser(depth - 1)


def catch_middle(depth: int) -> int:
    CLOCK[0] += 4
    try:
        raiser(depth)
    except ValueError:
        return 1
    return 0


def reraise(depth: int) -> None:
    try:
        catch_middle(depth)
        raiser(depth)
    finally:
        CLOCK[0] += 1


def failing_gen() -> Iterator[int]:
    yield 1
    CLOCK[0] += 1
    raise KeyError("gen")


def case_exceptions() -> None:
    for d in range(4):
        try:
            raiser(d)
        except ValueError:
            pass
    for d in range(3):
        catch_middle(d)
    try:
        reraise(2)
    except ValueError:
        pass
    try:
        int("not a number")
    except ValueError:
        pass
    try:
        list(failing_gen())
    except KeyError:
        pass
    g = squares(5)
    next(g)
    try:
        g.throw(RuntimeError("into the generator"))
    except RuntimeError:
        pass


def case_nested() -> None:
    def inner(x: int) -> int:
        CLOCK[0] += 1
        return x + 1

    def outer(x: int) -> int:
        def innermost(y: int) -> int:
            return inner(y) * 2

        return innermost(x) + inner(x)

    double = lambda v: inner(v) * 2  # noqa: E731
    for i in range(3):
        outer(i)
    list(map(double, range(4)))
    sorted(range(8), key=lambda v: -v)
    (lambda: inner(0))()


class Shape:
    count = 0

    def __init__(self, w: float, h: float) -> None:
        CLOCK[0] += 1
        self.w = w
        self.h = h
        Shape.count += 1

    @property
    def area(self) -> float:
        CLOCK[0] += 1
        return self.w * self.h

    @area.setter
    def area(self, value: float) -> None:
        self.w = value / self.h

    def scaled(self, k: float) -> "Shape":
        return type(self)(self.w * k, self.h * k)

    @classmethod
    def unit(cls) -> "Shape":
        return cls(1.0, 1.0)

    @staticmethod
    def describe(s: "Shape") -> str:
        return f"{s.w}x{s.h}"

    def __len__(self) -> int:
        return 4

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Shape) and self.area == other.area

    __hash__ = None  # type: ignore[assignment]


class Square(Shape):
    def __init__(self, side: float, _h: float = 0.0) -> None:
        super().__init__(side, side)


def case_classes() -> None:
    s = Shape(2.0, 3.0)
    _ = s.area
    s.area = 12.0
    t = s.scaled(2.0)
    Shape.unit()
    Shape.describe(t)
    len(t)
    _ = s == t
    q = Square(3.0)
    q.scaled(0.5)
    _ = q.area + Square.unit().area


def neg(v: int) -> int:
    CLOCK[0] += 1
    return -v


def case_builtins() -> None:
    lst: list = []
    for i in range(30):
        lst.append(i)
    len(lst)
    sorted(lst, reverse=True)
    ",".join(map(str, lst))
    d: Dict[int, Any] = {}
    d.get(1)
    d.setdefault(2, []).append(3)
    max(lst, key=abs)
    sorted(lst, key=neg)
    isinstance(d, dict)
    getattr(d, "keys")()
    math.sqrt(2.0)
    [].extend(range(3))
    "abc".upper()
    str.lower("ABC")
    list.append(lst, 1)
    sum(lst)
    print_ = repr(lst[:3])
    del print_


class Meta(type):
    def __instancecheck__(cls, obj: object) -> bool:
        CLOCK[0] += 1
        return hasattr(obj, "quack")


class Duck(metaclass=Meta):
    pass


class Ordered:
    def __init__(self, v: int) -> None:
        self.v = v

    def __lt__(self, other: "Ordered") -> bool:
        CLOCK[0] += 1
        return self.v < other.v

    def __getattr__(self, name: str) -> int:
        CLOCK[0] += 1
        return len(name)


class Managed:
    def __enter__(self) -> "Managed":
        CLOCK[0] += 1
        return self

    def __exit__(self, *exc: Any) -> bool:
        CLOCK[0] += 2
        return exc[0] is KeyError  # swallows KeyError only


def tree(n: int) -> Iterator[int]:
    """A recursive generator."""
    if n > 0:
        yield from tree(n - 1)
        yield n
        yield from tree(n - 2)


def guarded() -> Iterator[int]:
    try:
        yield 1
        yield 2
    except ValueError:
        CLOCK[0] += 3
        yield 99
    finally:
        CLOCK[0] += 1


async def agen(n: int) -> Any:
    for i in range(n):
        CLOCK[0] += 1
        yield i


async def use_agen() -> int:
    return sum([x async for x in agen(4)])


def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*a: Any) -> Any:
        CLOCK[0] += 1
        return fn(*a)

    return wrapper


@deco
def decorated(x: int) -> int:
    return x + 1


def case_edges() -> None:
    isinstance(object(), Duck)
    isinstance(Ordered(1), Duck)
    sorted([Ordered(3), Ordered(1), Ordered(2)])
    Ordered(0).missing_attribute
    with Managed():
        fib(3)
    with Managed():
        raise KeyError("swallowed")
    list(tree(5))
    g = guarded()
    next(g)
    g.throw(ValueError("into it"))
    g.close()
    g2 = guarded()
    next(g2)
    del g2
    functools.partial(decorated, 1)()
    list(map(decorated, range(3)))
    eval("decorated(5)")
    exec("fib(2)")
    min(squares(4))
    lst = [Ordered(i) for i in (5, 3, 4)]
    lst.sort(key=lambda o: -o.v)
    import operator

    operator.itemgetter(0)([1])


# Many functions and edges (40 callers, each calling 15 of 40 callees), so the profiler's
# tables grow and its edge map probes past collisions.  Compiled under this file's name, so
# the comparison below keeps them.
_MANY_SRC = "".join(
    f"def e{k}(x):\n    CLOCK[0] += 1\n    return abs(x) + {k}\n" for k in range(40)
)
_MANY_SRC += "".join(
    f"def c{j}(n):\n    t = 0\n    for r in range(n):\n"
    + "".join(f"        t += e{(j * 7 + m * 3) % 40}(r)\n" for m in range(15))
    + "    return t\n"
    for j in range(40)
)
MANY: Dict[str, Any] = {"CLOCK": CLOCK}
exec(compile(_MANY_SRC, HERE, "exec"), MANY)


def case_many_edges() -> None:
    for j in range(40):
        MANY[f"c{j}"](1 + j % 3)


# More functions than the profiler's code-object cache has entries (1,024 in sets of two),
# called in three orders, so the cache evicts, refills and finds code objects in either way
# of a set.  Compiled under this file's name, like MANY.
_WIDE_SRC = "".join(
    f"def w{k}(x):\n    CLOCK[0] += 1\n    return abs(x) + {k}\n" for k in range(1500)
)
WIDE: Dict[str, Any] = {"CLOCK": CLOCK}
exec(compile(_WIDE_SRC, HERE, "exec"), WIDE)
WIDE_FUNCS = [WIDE[f"w{k}"] for k in range(1500)]


def case_many_functions() -> None:
    for order in (range(1500), range(1499, -1, -1), [(k * 7) % 1500 for k in range(1500)]):
        for k in order:
            WIDE_FUNCS[k](k)


async def a_leaf(x: int) -> int:
    CLOCK[0] += 1
    await asyncio.sleep(0)
    CLOCK[0] += 1
    return x * 2


async def a_mid(x: int) -> int:
    y = await a_leaf(x)
    z = await a_leaf(y)
    return y + z


async def a_main() -> int:
    results = await asyncio.gather(a_mid(1), a_mid(2), a_leaf(3))
    r = await a_mid(4)
    return sum(results) + r + await use_agen()


def case_asyncio() -> None:
    asyncio.run(a_main())


def t_leaf(i: int) -> int:
    return i * 2


def t_work(n: int) -> int:
    return sum(t_leaf(i) for i in range(n))


# -- running the zoo under both profilers --------------------------------------------------


def drive(prof: Any, fn: Callable[[], None]) -> Dict[Any, Any]:
    """Profiles fn() with prof (enabled and disabled here, the same way for both tools)."""
    prof.enable()
    try:
        fn()
    finally:
        prof.disable()
    prof.create_stats()
    return prof.stats


def in_this_file(key: Any) -> bool:
    return key[0] == HERE


def this_file_or_builtin(key: Any) -> bool:
    return key[0] in (HERE, "~")


CASES = {
    "recursion": case_recursion,
    "deep": case_deep,
    "generators": case_generators,
    "exceptions": case_exceptions,
    "nested": case_nested,
    "classes": case_classes,
    "builtins": case_builtins,
    "edges": case_edges,
    "many edges": case_many_edges,
    "many functions": case_many_functions,
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("builtins", [True, False])
def test_counts_match_cprofile(name: str, builtins: bool) -> None:
    fn = CASES[name]
    ref = comparable(drive(cProfile.Profile(builtins=builtins), fn), this_file_or_builtin)
    got = comparable(drive(fastprof.Profile(builtins=builtins), fn), this_file_or_builtin)
    assert got == ref
    assert any(k[0] == HERE for k in got)  # the zoo was seen
    assert any(k[0] == "~" for k in got) == builtins or name in ("recursion", "deep")


@pytest.mark.parametrize("name", sorted(CASES))
def test_fake_clock_times_match_cprofile(name: str) -> None:
    fn = CASES[name]
    ref = comparable(drive(cProfile.Profile(clock, 1), fn), this_file_or_builtin, times=True)
    got = comparable(drive(fastprof.Profile(clock, 1), fn), this_file_or_builtin, times=True)
    assert got == ref
    assert any(v[0][2] > 0 for v in got.values())  # the clock moved


def test_asyncio_coroutines_match_cprofile() -> None:
    ref = comparable(drive(cProfile.Profile(clock, 1), case_asyncio), in_this_file, times=True)
    got = comparable(drive(fastprof.Profile(clock, 1), case_asyncio), in_this_file, times=True)
    assert got == ref
    # each coroutine resume counts as a call, as cProfile counts it
    leaf = got[(HERE, a_leaf.__code__.co_firstlineno, "a_leaf")]
    assert leaf[0][1] > 5


def test_subcalls_false_matches_cprofile() -> None:
    ref = comparable(drive(cProfile.Profile(subcalls=False), case_classes), this_file_or_builtin)
    got = comparable(drive(fastprof.Profile(subcalls=False), case_classes), this_file_or_builtin)
    assert got == ref
    assert all(not callers for _, callers in got.values())


def test_threads_merged() -> None:
    """Threads started while profiling are profiled; their stats are merged."""

    def threaded() -> None:
        ts = [threading.Thread(target=t_work, args=(20 + k,)) for k in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    def sequential() -> None:
        for k in range(3):
            t_work(20 + k)

    names = {"t_work", "t_leaf", "<genexpr>"}

    def keep(key: Any) -> bool:
        return key[0] == HERE and key[2] in names

    ref = comparable(drive(cProfile.Profile(), sequential), keep)
    got = comparable(drive(fastprof.Profile(threads=True), threaded), keep)
    assert got == ref
    assert got[(HERE, t_leaf.__code__.co_firstlineno, "t_leaf")][0] == (63, 63)


def start_here(prof: Any) -> None:
    prof.enable()
    fib(2)


def stop_deeper(prof: Any) -> None:
    def deeper() -> None:
        fib(3)
        prof.disable()
        fib(4)  # not profiled

    deeper()


def enabled_mid_call(prof: Any) -> None:
    start_here(prof)  # returns with the profiler on: its frame was entered before
    is_even(4)
    stop_deeper(prof)  # disabled two frames down


@pytest.mark.parametrize("builtins", [True, False])
def test_enable_and_disable_in_the_middle_of_calls(builtins: bool) -> None:
    def run(prof: Any) -> Dict[Any, Any]:
        enabled_mid_call(prof)
        prof.create_stats()
        return comparable(prof.stats, this_file_or_builtin, times=True)

    ref = run(cProfile.Profile(clock, 1, builtins=builtins))
    got = run(fastprof.Profile(clock, 1, builtins=builtins))
    assert got == ref
    assert got[(HERE, fib.__code__.co_firstlineno, "fib")][0][:2] == (2, 3 + 5)


def test_threads_false_profiles_the_enabling_thread_only() -> None:
    def threaded() -> None:
        t = threading.Thread(target=t_work, args=(10,))
        t.start()
        t.join()
        t_leaf(1)

    stats = drive(fastprof.Profile(threads=False), threaded)
    leaf = stats[(HERE, t_leaf.__code__.co_firstlineno, "t_leaf")]
    assert leaf[:2] == (1, 1)  # the main thread's call only
    assert (HERE, t_work.__code__.co_firstlineno, "t_work") not in stats


def test_threads_false_after_the_enabling_thread_ended() -> None:
    """The enabling thread ends without disable(); later threads, which may be given its
    thread-state memory (same PyThreadState address), are not profiled."""
    p = fastprof.Profile(threads=False)

    def enabler() -> None:
        p.enable()
        t_leaf(1)

    a = threading.Thread(target=enabler)
    a.start()
    a.join()
    for _ in range(5):  # each may take the finished thread's tstate memory
        b = threading.Thread(target=t_work, args=(3,))
        b.start()
        b.join()
    p.disable()
    stats = pstats.Stats(p).stats
    assert stats[(HERE, t_leaf.__code__.co_firstlineno, "t_leaf")][:2] == (1, 1)
    assert (HERE, t_work.__code__.co_firstlineno, "t_work") not in stats


def test_finished_threads_keep_their_counts_and_threads() -> None:
    """Threads that end one after another (each may reuse a finished one's thread-state
    memory and ident) keep exact counts and one entry each in the per-thread view, also
    after clear() and a second round."""
    p = fastprof.Profile()
    for _round in (1, 2):
        p.enable()
        for _ in range(40):
            t = threading.Thread(target=t_work, args=(3,))
            t.start()
            t.join()
        p.disable()
        stats = pstats.Stats(p).stats
        assert stats[(HERE, t_work.__code__.co_firstlineno, "t_work")][:2] == (40, 40)
        assert stats[(HERE, t_leaf.__code__.co_firstlineno, "t_leaf")][:2] == (120, 120)
        st = fastprof.Stats(p)
        others = [info.ident for info in st.threads() if info.ident != threading.get_ident()]
        assert others and all(st.for_thread(i).total_calls > 0 for i in others), (
            "each finished thread keeps its own table"
        )
        p.clear()
