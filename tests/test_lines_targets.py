"""Functions the line profiler tests run (no tests here).  Comments `# L:name` mark lines the
tests look up."""

import functools

CLOCK = [0]


def advance(n):
    """Moves the fake clock on by n (not registered: its time lands on the caller's line)."""
    CLOCK[0] += n


def fake_timer():
    return CLOCK[0]


def loop(n):
    s = 0  # L:init
    for i in range(n):  # L:for
        s += i  # L:body
    return s  # L:ret


def timed(n):
    advance(3)  # L:a3
    for _ in range(n):  # L:tfor
        advance(5)  # L:a5
    return n  # L:tret


def fib(n):
    if n < 2:  # L:test
        return n  # L:base
    return fib(n - 1) + fib(n - 2)  # L:rec


def raiser(n):
    if n > 0:  # L:rtest
        raise ValueError(n)  # L:raise
    return n  # L:rret


def catcher(n):
    caught = 0  # L:cinit
    for i in range(n):  # L:cfor
        try:  # L:try
            raiser(i)  # L:call
        except ValueError:  # L:except
            caught += 1  # L:caught
    return caught  # L:cret


def finally_return(x):
    try:  # L:ftry
        return x  # L:fret
    finally:  # L:ffin
        x = 0  # L:fbody


def gen(n):
    for i in range(n):  # L:gfor
        advance(2)  # L:gwork
        yield i  # L:gyield
    advance(1)  # L:gend


def one_liner(x):
    return x + 1  # L:one


square = lambda x: x * x  # L:lam


def outer(n):
    def inner(k):  # L:def_inner
        return k * 2  # L:inner_body

    total = 0  # L:oinit
    for i in range(n):  # L:ofor
        total += inner(i)  # L:ocall
    return total  # L:oret


def comprehension(n):
    xs = [i * i for i in range(n)]  # L:comp
    return sum(xs)  # L:cmpret


def logged(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)  # L:wrapper

    return wrapper


@logged
def decorated(n):
    total = 0  # L:dinit
    for i in range(n):  # L:dfor
        total += i  # L:dbody
    return total  # L:dret


class Shape:
    def __init__(self, side):
        self.side = side  # L:init_body

    def area(self):
        return self.side * self.side  # L:area

    @classmethod
    def unit(cls):
        return cls(1)  # L:unit

    @staticmethod
    def double(x):
        return 2 * x  # L:double

    @property
    def perimeter(self):
        return 4 * self.side  # L:perim


async def coro(n):
    total = 0  # L:coinit
    for i in range(n):  # L:cofor
        await suspend()  # L:coawait
        total += i  # L:coadd
    return total  # L:coret


class _Suspend:
    def __await__(self):
        yield


def suspend():
    return _Suspend()


def threaded_work(n):
    s = 0  # L:twinit
    for i in range(n):  # L:twfor
        s += i  # L:twbody
    return s  # L:twret


def delegator(n):
    yield -1  # L:dg_first
    yield from gen(n)  # L:dg_from
    advance(4)  # L:dg_end


def catching_gen():
    caught = 0  # L:cg_init
    while caught < 2:  # L:cg_while
        try:  # L:cg_try
            yield caught  # L:cg_yield
        except KeyError:  # L:cg_except
            caught += 1  # L:cg_caught
    return caught  # L:cg_ret


async def agen(n):
    for i in range(n):  # L:ag_for
        await suspend()  # L:ag_await
        yield i  # L:ag_yield
