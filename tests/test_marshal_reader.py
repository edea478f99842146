"""The compiled reader of pstats files (fastprof._fastprof._marshal_loads, which
_marshal_reader.loads runs) against its Python reference (_marshal_reader.reference_loads): on
every case of the hostile-file tests, on what marshal writes, on each limit and message, and on
random truncations and mutations of real profiles written by cProfile, profile.py and fastprof,
both return equal objects (sharing the same containers) or both raise ValueError with the same
message; nothing else is raised."""

from __future__ import annotations

import cProfile
import marshal
import os
import profile
import random
import struct
import subprocess
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

import fastprof
from fastprof import _fastprof, _marshal_reader
from fastprof.children import _tree_records
from test_hostile_pstats import CORPUS, VALUES

Outcome = Tuple[str, Any]


def _outcome(read: Callable[..., Any], data: bytes, allow_bytes: bool) -> Outcome:
    try:
        return ("value", read(data, allow_bytes=allow_bytes))
    except ValueError as e:
        return ("error", str(e))


def _same(a: Any, b: Any, seen: Optional[Dict[int, int]] = None) -> bool:
    """a and b hold the same data, the same containers shared (cycles allowed); floats
    compared bit for bit (NaN, -0.0)."""
    seen = {} if seen is None else seen
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if not isinstance(a, (tuple, list, dict)):
        return bool(a == b)
    if id(a) in seen:
        return seen[id(a)] == id(b)
    seen[id(a)] = id(b)
    if len(a) != len(b):
        return False
    if isinstance(a, dict):
        pairs = list(zip(a.items(), b.items()))  # in insertion order, as both read them
        return all(_same(ka, kb, seen) and _same(va, vb, seen) for (ka, va), (kb, vb) in pairs)
    return all(_same(x, y, seen) for x, y in zip(a, b))


def check(data: bytes, allow_bytes: bool = False) -> Outcome:
    """Both readers' outcome on data, asserted to be the same; returns it."""
    got = _outcome(_marshal_reader.loads, data, allow_bytes)
    want = _outcome(_marshal_reader.reference_loads, data, allow_bytes)
    assert got[0] == want[0], (data, got, want)
    if got[0] == "error":
        assert got[1] == want[1], data
    else:
        assert _same(got[1], want[1]), (data, got, want)
    return got


def i32(n: int) -> bytes:
    return struct.pack("<i", n)


# --- the cases of the hostile-file tests and what marshal writes ------------------------------

BYTES_CORPUS = [(name, content) for name, content in CORPUS if isinstance(content, bytes)]


@pytest.mark.parametrize("name,content", BYTES_CORPUS, ids=[c[0] for c in BYTES_CORPUS])
@pytest.mark.parametrize("allow_bytes", [False, True])
def test_hostile_corpus_same_outcome(name: str, content: bytes, allow_bytes: bool) -> None:
    check(content, allow_bytes)


@pytest.mark.parametrize("version", range(marshal.version + 1))
def test_what_marshal_writes_same_outcome(version: int) -> None:
    shared = ("shared", 1, "s")
    values = VALUES + [
        {shared: (shared, shared), ("o", 2, "s"): [shared, shared]},
        [2**60 - 1, -(2**60) + 1, 2**60, -(2**60), 2**31, -(2**31) - 1, 10**100, -(10**100)],
        [float("nan"), float("inf"), -float("inf"), 1e-310, 0.1, -0.0],
        ["", "\ud800x", "\U0001f600", "ascii", "é" * 70],
    ]
    for value in values:
        data = marshal.dumps(value, version)
        kind, got = check(data)
        assert kind == "value"
        assert repr(got) == repr(marshal.loads(data))


def test_bytes_only_when_allowed() -> None:
    data = marshal.dumps((b"raw", [b""]))
    assert check(data, allow_bytes=True) == ("value", (b"raw", [b""]))
    msg = "bad marshal data (type code 's' has no place in a profile)"
    assert check(data) == ("error", msg)


# --- each limit and message -------------------------------------------------------------------

SHORT = "marshal data too short"
TOO_DEEP = "bad marshal data (nested too deeply)"
BAD_REF = "bad marshal data (invalid reference)"
BAD_TEXT = "bad marshal data (bad text)"
UNHASHABLE = "bad marshal data (unhashable dict key)"
DIGIT = "bad marshal data (digit out of range)"


def _size(n: int) -> str:
    return f"bad marshal data (size {n} beyond the end of the data)"


def _code(c: str) -> str:
    return f"bad marshal data (type code {c!r} has no place in a profile)"


def _digits(*ds: int) -> bytes:
    return b"".join(struct.pack("<H", d) for d in ds)


# (name, data, the outcome: a value or an error message)
CASES: List[Tuple[str, bytes, Outcome]] = [
    ("empty", b"", ("error", SHORT)),
    ("code object", b"c", ("error", _code("c"))),
    ("flagged code object", b"\xe3", ("error", _code("c"))),
    ("type code NUL", b"\x00", ("error", _code("\x00"))),
    ("type code quote", b"'", ("error", _code("'"))),
    ("dict end alone", b"0", ("error", _code("0"))),
    ("flagged dict end", b"{\xb00", ("error", _code("0"))),
    ("set", marshal.dumps({1}), ("error", _code("<"))),
    ("complex", marshal.dumps(1j), ("error", _code("y"))),
    ("ellipsis", marshal.dumps(...), ("error", _code("."))),
    ("int cut", b"i\x01\x02", ("error", SHORT)),
    ("int", b"i" + i32(-7), ("value", -7)),
    ("long two digits", b"l" + i32(2) + _digits(1, 0x7FFF), ("value", 1 + (0x7FFF << 15))),
    ("long negative", b"l" + i32(-2) + _digits(1, 1), ("value", -(1 + (1 << 15)))),
    ("long no digits", b"l" + i32(0), ("value", 0)),
    ("long negative zero", b"l" + i32(-1) + _digits(0), ("value", 0)),
    ("long top digit zero", b"l" + i32(3) + _digits(5, 0, 0), ("value", 5)),
    ("long four digits", b"l" + i32(4) + _digits(*[0x7FFF] * 4), ("value", 2**60 - 1)),
    ("long five digits", b"l" + i32(-5) + _digits(*[0x7FFF] * 5), ("value", -(2**75 - 1))),
    (
        "long of many digits",
        b"l" + i32(40) + _digits(*range(1, 41)),
        ("value", sum(d << (15 * i) for i, d in enumerate(range(1, 41)))),
    ),
    ("long digit out of range", b"l" + i32(2) + _digits(1, 0x8000), ("error", DIGIT)),
    ("long size beyond", b"l" + i32(3) + _digits(1), ("error", _size(3))),
    ("long size of -2**31", b"l" + i32(-(2**31)), ("error", _size(2**31))),
    ("long cut", b"l\x01\x00", ("error", SHORT)),
    ("binary float cut", b"g" + b"\x00" * 7, ("error", SHORT)),
    ("binary float", b"g" + struct.pack("<d", -2.5), ("value", -2.5)),
    ("text float", b"f\x031.5", ("value", 1.5)),
    ("text float inf", b"f\x03inf", ("value", float("inf"))),
    ("text float spaced", b"f\x05 1_0 ", ("value", 10.0)),
    ("text float junk", b"f\x03abc", ("error", "could not convert string to float: 'abc'")),
    ("text float empty", b"f\x00", ("error", "could not convert string to float: ''")),
    ("text float NUL", b"f\x021\x00", ("error", "could not convert string to float: '1\\x00'")),
    ("text float not ascii", b"f\x02\xff1", ("error", BAD_TEXT)),
    ("text float cut", b"f\x051", ("error", SHORT)),
    ("text float no length", b"f", ("error", SHORT)),
    ("utf-8", b"u" + i32(2) + "é".encode(), ("value", "é")),
    ("utf-8 surrogate", b"t" + i32(3) + b"\xed\xa0\x80", ("value", "\ud800")),
    ("utf-8 bad", b"u" + i32(1) + b"\xff", ("error", BAD_TEXT)),
    ("utf-8 cut sequence", b"u" + i32(1) + b"\xc3", ("error", BAD_TEXT)),
    ("utf-8 size negative", b"u" + i32(-1), ("error", _size(-1))),
    ("utf-8 size beyond", b"u" + i32(4) + b"abc", ("error", _size(4))),
    ("ascii", b"a" + i32(2) + b"ok", ("value", "ok")),
    ("ascii empty", b"A" + i32(0), ("value", "")),
    ("ascii not ascii", b"A" + i32(1) + b"\x80", ("error", BAD_TEXT)),
    ("short ascii", b"z\x02ok", ("value", "ok")),
    ("short ascii cut", b"Z\x03ok", ("error", SHORT)),
    ("short ascii not ascii", b"Z\x01\xc3", ("error", BAD_TEXT)),
    ("bytes refused", b"s" + i32(0), ("error", _code("s"))),
    ("tuple", b"(" + i32(2) + b"NT", ("value", (None, True))),
    ("tuple cut", b"(" + i32(2) + b"i\x01", ("error", SHORT)),
    ("tuple size beyond", b"(" + i32(5) + b"NN", ("error", _size(5))),
    ("tuple size negative", b"(" + i32(-3), ("error", _size(-3))),
    ("small tuple", b")\x02FT", ("value", (False, True))),
    ("small tuple size beyond", b")\x03F", ("error", _size(3))),
    ("small tuple no size", b")", ("error", SHORT)),
    ("empty tuple", b")\x00", ("value", ())),
    ("list", b"[" + i32(1) + b"N", ("value", [None])),
    ("list size beyond", b"[" + i32(2) + b"N", ("error", _size(2))),
    ("dict", b"{NT0", ("value", {None: True})),
    ("dict unended", b"{NT", ("error", SHORT)),
    ("dict without a value", b"{N", ("error", SHORT)),
    ("dict key a list", b"{[" + i32(0) + b"N0", ("error", UNHASHABLE)),
    ("dict key a tuple of a list", b"{)\x01[" + i32(0) + b"N0", ("error", UNHASHABLE)),
    ("dict key a dict", b"{{0N0", ("error", UNHASHABLE)),
    ("dict key twice", b"{z\x01ai\x01\x00\x00\x00z\x01ai\x02\x00\x00\x000", ("value", {"a": 2})),
    ("reference", b"(" + i32(2) + b"\xda\x01xr" + i32(0), ("value", ("x", "x"))),
    ("reference out of range", b"(" + i32(2) + b"\xda\x01xr" + i32(1), ("error", BAD_REF)),
    ("reference negative", b"r" + i32(-1), ("error", BAD_REF)),
    ("reference none", b"r" + i32(0), ("error", BAD_REF)),
    ("reference cut", b"r\x00", ("error", SHORT)),
    ("reference to an unfinished tuple", b"\xa9\x01r" + i32(0), ("error", BAD_REF)),
    ("reference to a tuple", b")\x02\xa9\x01Nr" + i32(0), ("value", ((None,), (None,)))),
    ("reference to a flagged None", b")\x02\xcer" + i32(0), ("error", BAD_REF)),
    ("reference to a flagged True", b")\x02\xd4r" + i32(0), ("value", (True, True))),
    ("reference of a reference", b")\x03\xd4\xf2" + i32(0) + b"r" + i32(1), ("value", (True,) * 3)),
    ("reference to a dict as its key", b"\xfbr" + i32(0) + b"N0", ("error", UNHASHABLE)),
    ("reference to a string key", b"{\xda\x01kr" + i32(0) + b"0", ("value", {"k": "k"})),
    ("trailing bytes", marshal.dumps(7) + b"junk", ("value", 7)),
]


@pytest.mark.parametrize("name,data,want", CASES, ids=[c[0] for c in CASES])
def test_limits_and_messages(name: str, data: bytes, want: Outcome) -> None:
    got = check(data)
    assert got[0] == want[0], got
    if want[0] == "error":
        assert got[1] == want[1]
    else:
        assert _same(got[1], want[1]), got


def test_depth_limit() -> None:
    for depth, want in ((64, "value"), (65, "error")):
        data = (b"[" + i32(1)) * depth + b"N"
        kind, got = check(data)
        assert kind == want
        if kind == "error":
            assert got == TOO_DEEP
    assert check(_nested_dicts(100)) == ("error", TOO_DEEP)


def _nested_dicts(depth: int) -> bytes:
    return b"{N" * depth + b"N" + b"0" * depth


def test_self_referencing_containers() -> None:
    # a list and a dict may be named while they are read, as in the Python reader
    kind, lst = check(b"\xdb" + i32(2) + b"Nr" + i32(0))
    assert kind == "value" and lst[0] is None and lst[1] is lst
    kind, table = check(b"\xfbi" + i32(1) + b"r" + i32(0) + b"0")
    assert kind == "value" and table[1] is table
    kind, t = check(b")\x01\xdb" + i32(1) + b"r" + i32(0))
    assert kind == "value" and t[0][0] is t[0]


GC_LOOKS = """
import gc, marshal, sys
from fastprof import _marshal_reader

def look(phase, info):  # walks each young tuple and list, as a debugging tool might
    if phase == "start":
        for o in gc.get_objects(0):
            if type(o) in (tuple, list):
                for x in o:
                    id(x)

data = marshal.dumps([{("f%d" % i, i, "g"): (1, 1, 0.5, 0.5, {("h", 2, "k"): (1, 1, 0.5, 0.5)})
                       for i in range(50)}, tuple(range(40))])
named = bytes.fromhex("db03000000") + b")\x02NNr" + bytes(4) + b"N"  # a list naming itself
want = marshal.loads(data)  # marshal's own tuples are seen with empty slots
gc.set_threshold(1)
gc.callbacks.append(look)
for _ in range(3):
    assert _marshal_reader.loads(data) == want
    got = _marshal_reader.loads(named)
    assert got[1] is got
gc.callbacks.remove(look)
print("ok")
"""


def test_a_collection_while_reading_sees_whole_containers() -> None:
    # below 3.12 a collection (and its callbacks) can run at any allocation: a tuple made
    # before its items were read was seen with empty slots, and walking it crashed
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run(
        [sys.executable, "-c", GC_LOOKS], capture_output=True, text=True, env=env, timeout=120
    )
    assert (r.returncode, r.stdout.strip()) == (0, "ok"), r.stderr


def test_bytes_like_input() -> None:
    data = marshal.dumps({("f", 1, "g"): (1, 1, 0.5, 0.5, {})})
    want = marshal.loads(data)
    forms: List[Any] = [bytearray(data), memoryview(data)]
    for form in forms:
        assert _marshal_reader.loads(form) == want
        assert _marshal_reader.reference_loads(form) == want
    with pytest.raises(TypeError):
        _fastprof._marshal_loads("text")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _fastprof._marshal_loads(data, True)  # type: ignore[call-arg]


def test_loads_runs_the_compiled_reader(monkeypatch: Any, tmp_path: Any) -> None:
    calls: List[int] = []
    real = _fastprof._marshal_loads

    def counted(data: bytes, *, allow_bytes: bool = False) -> Any:
        calls.append(len(data))
        return real(data, allow_bytes=allow_bytes)

    monkeypatch.setattr(_fastprof, "_marshal_loads", counted)
    path = tmp_path / "p.prof"
    data = marshal.dumps({("f", 1, "g"): (1, 1, 0.5, 0.5, {})})
    path.write_bytes(data)
    assert fastprof.Stats(str(path)).row("g").ncalls == 1
    assert calls == [len(data)]


# --- random truncations and mutations of real profiles ----------------------------------------


def _work(n: int) -> int:
    def leaf(x: int) -> int:
        return x * 2

    def rec(k: int) -> int:
        return leaf(k) if k <= 0 else rec(k - 1) + leaf(k)

    return sum(sorted((rec(i % 5) for i in range(n)), key=lambda v: -v)) + len(str(n))


def _profiles() -> List[Tuple[str, bytes, bool]]:
    """(name, bytes, allow_bytes) of files written by cProfile, profile.py and fastprof, and
    of fastprof's call tree records (which hold bytes)."""
    out = []
    for name, prof in (
        ("cProfile", cProfile.Profile()),
        ("profile", profile.Profile()),
        ("fastprof", fastprof.Profile()),
    ):
        prof.runcall(_work, 30)
        prof.create_stats()
        out.append((name, marshal.dumps(prof.stats), False))  # what dump_stats writes
    tree = _tree_records(prof)
    assert tree is not None
    out.append(("fastprof tree", marshal.dumps(tree), True))
    return out


INTERESTING = b"0()[{}rlifgzZuatsNTF\x00\x01\x7f\x80\xff\xa9\xdb\xfb\xf2"


def _mutate(rng: random.Random, data: bytes) -> bytes:
    cut = bytearray(data[: rng.randrange(len(data) + 1)] if rng.random() < 0.5 else data)
    for _ in range(rng.randrange(1, 5)):
        if not cut:
            break
        at = rng.randrange(len(cut))
        what = rng.random()
        if what < 0.4:
            cut[at] = rng.randrange(256)
        elif what < 0.7:
            cut[at] = INTERESTING[rng.randrange(len(INTERESTING))]
        elif what < 0.8:
            cut[at] ^= 0x80  # the reference flag
        elif what < 0.9:
            del cut[at : at + rng.randrange(1, 6)]
        else:
            cut[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 5)))
    return bytes(cut)


@pytest.mark.parametrize("name,data,allow_bytes", _profiles(), ids=lambda v: str(v)[:20])
def test_mutated_profiles_same_outcome(name: str, data: bytes, allow_bytes: bool) -> None:
    kind, whole = check(data, allow_bytes)
    assert kind == "value" and _same(whole, marshal.loads(data))
    rng = random.Random(len(data))
    outcomes = {"value": 0, "error": 0}
    for _ in range(1500):
        outcomes[check(_mutate(rng, data), allow_bytes)[0]] += 1
    for n in range(0, len(data), max(1, len(data) // 300)):
        check(data[:n], allow_bytes)
    assert outcomes["value"] > 0 and outcomes["error"] > 0  # both kinds were compared


def test_a_pstats_file_reads_as_pstats_reads_it(tmp_path: Any) -> None:
    import pstats

    prof = cProfile.Profile()
    prof.runcall(_work, 10)
    path = str(tmp_path / "c.prof")
    prof.dump_stats(path)
    ours = fastprof.Stats(path).to_dict()
    theirs = pstats.Stats(path).stats  # type: ignore[attr-defined]
    assert ours == theirs
