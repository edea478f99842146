"""A reader of the part of marshal's format that pstats files use (dict, tuple, list, str,
int, float, None, True, False and back-references; bytes too, when asked, for fastprof's raw
call trees), written so that a malformed or hostile file can only make it raise ValueError:
CPython's marshal is not meant for untrusted data (a size field can ask it for gigabytes, and
it builds code objects).

loads() runs the compiled reader (fastprof._fastprof._marshal_loads, in
src/util/marshal_reader.c), 7 to 12 times faster than reference_loads(), the same reader in
Python, which stays as the plain reference the tests compare it with
(tests/test_marshal_reader.py): the same subset, limits and ValueError messages."""

from __future__ import annotations

import struct
from typing import Any, Dict, List, Optional

from . import _fastprof

__all__ = ["loads", "reference_loads"]

_FLAG_REF = 0x80
_MAX_DEPTH = 64  # pstats files nest four deep
_I32 = struct.Struct("<i")
_F64 = struct.Struct("<d")


class _Reader:
    """State of one loads(): the bytes, the position and the objects a reference may name."""

    def __init__(self, data: bytes, allow_bytes: bool = False) -> None:
        self.data = data
        self.allow_bytes = allow_bytes
        self.pos = 0
        self.refs: List[Optional[Any]] = []

    def take(self, n: int) -> bytes:
        """The next n bytes; ValueError when the data ends first."""
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise ValueError("marshal data too short")
        out = self.data[self.pos : end]
        self.pos = end
        return out

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def size(self, n: int, per_item: int = 1) -> int:
        """n when that many items (of at least per_item bytes) fit in what is left."""
        if n < 0 or n * per_item > len(self.data) - self.pos:
            raise ValueError(f"bad marshal data (size {n} beyond the end of the data)")
        return n

    def obj(self, depth: int) -> Any:
        """The next object; ValueError on anything a pstats file does not hold."""
        if depth > _MAX_DEPTH:
            raise ValueError("bad marshal data (nested too deeply)")
        code = self.take(1)[0]
        flag, kind = code & _FLAG_REF, chr(code & ~_FLAG_REF)
        slot = -1
        if flag and kind in "()[{":
            slot = len(self.refs)
            self.refs.append(None)  # filled below; a reference to it meanwhile is refused
        value = self._value(kind, depth, slot)
        if flag:
            if slot >= 0:
                self.refs[slot] = value
            else:
                self.refs.append(value)
        return value

    def _value(self, kind: str, depth: int, slot: int) -> Any:
        if kind == "N":
            return None
        if kind == "T":
            return True
        if kind == "F":
            return False
        if kind == "i":
            return self.i32()
        if kind == "l":
            n = self.i32()
            digits = self.size(abs(n), 2)
            value = 0
            for i in range(digits):
                digit = int.from_bytes(self.take(2), "little")
                if digit >= 1 << 15:
                    raise ValueError("bad marshal data (digit out of range)")
                value |= digit << (15 * i)
            return -value if n < 0 else value
        if kind == "g":
            return float(_F64.unpack(self.take(8))[0])
        if kind == "f":
            text = self.take(self.take(1)[0]).decode("ascii")
            return float(text)
        if kind == "s" and self.allow_bytes:  # bytes (fastprof's raw tree records)
            return self.take(self.size(self.i32()))
        if kind in "ut":
            return self.take(self.size(self.i32())).decode("utf-8", "surrogatepass")
        if kind in "aA":
            return self.take(self.size(self.i32())).decode("ascii")
        if kind in "zZ":
            return self.take(self.take(1)[0]).decode("ascii")
        if kind in "()":
            n = self.size(self.take(1)[0] if kind == ")" else self.i32())
            return tuple(self.obj(depth + 1) for _ in range(n))
        if kind == "[":
            n = self.size(self.i32())
            items: List[Any] = []
            if slot >= 0:
                self.refs[slot] = items
            items.extend(self.obj(depth + 1) for _ in range(n))
            return items
        if kind == "{":
            table: Dict[Any, Any] = {}
            if slot >= 0:
                self.refs[slot] = table
            while True:
                if self.data[self.pos : self.pos + 1] == b"0":  # TYPE_NULL ends the dict
                    self.pos += 1
                    return table
                key = self.obj(depth + 1)
                try:
                    table[key] = self.obj(depth + 1)
                except TypeError:  # an unhashable key
                    raise ValueError("bad marshal data (unhashable dict key)") from None
        if kind == "r":
            index = self.i32()
            if not 0 <= index < len(self.refs) or self.refs[index] is None:
                raise ValueError("bad marshal data (invalid reference)")
            return self.refs[index]
        raise ValueError(f"bad marshal data (type code {kind!r} has no place in a profile)")


def loads(data: bytes, *, allow_bytes: bool = False) -> Any:
    """The object marshal.dumps wrote to data, when it is built of dict, tuple, list, str,
    int, float, None and bools (and bytes, with allow_bytes).  Raises ValueError for anything
    else, truncated data or sizes beyond the data's end; never allocates more than the data's
    size calls for.  Bytes after the object are ignored.  The compiled reader; see
    reference_loads for the same in Python."""
    return _fastprof._marshal_loads(bytes(data), allow_bytes=allow_bytes)


def reference_loads(data: bytes, *, allow_bytes: bool = False) -> Any:
    """What loads returns or raises, read in Python: the reference the tests compare the
    compiled reader with."""
    r = _Reader(bytes(data), allow_bytes)
    try:
        return r.obj(0)
    except UnicodeDecodeError:
        raise ValueError("bad marshal data (bad text)") from None
    except ValueError:
        raise
    except (struct.error, IndexError, OverflowError) as e:
        raise ValueError(f"bad marshal data ({e})") from None
