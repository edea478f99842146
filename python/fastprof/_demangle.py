"""Itanium C++ name demangling for kernel names, in the format of ``c++filt``.

``demangle(name)`` covers what CUDA kernel names use: plain and nested names, the anonymous
namespace, templates with type and integer/bool arguments, template parameters, pointers,
references, cv-qualifiers and substitutions. A name outside that subset (or not mangled at
all) comes back unchanged, so a summary never loses a row to a name it cannot read.
"""

from __future__ import annotations

__all__ = ["demangle"]

_BUILTIN = {
    "v": "void",
    "w": "wchar_t",
    "b": "bool",
    "c": "char",
    "a": "signed char",
    "h": "unsigned char",
    "s": "short",
    "t": "unsigned short",
    "i": "int",
    "j": "unsigned int",
    "l": "long",
    "m": "unsigned long",
    "x": "long long",
    "y": "unsigned long long",
    "n": "__int128",
    "o": "unsigned __int128",
    "f": "float",
    "d": "double",
    "e": "long double",
    "g": "__float128",
    "z": "...",
}
_BUILTIN_D = {
    "h": "half",
    "s": "char16_t",
    "i": "char32_t",
    "u": "char8_t",
    "n": "decltype(nullptr)",
}
_LITERAL_SUFFIX = {"i": "", "j": "u", "l": "l", "m": "ul", "x": "ll", "y": "ull"}


class _Fail(Exception):
    """The name leaves the supported subset."""


class _Parser:
    def __init__(self, s: str) -> None:
        self.s = s
        self.i = 0
        self.subs: list[str] = []
        self.targs: list[str] = []

    def peek(self, n: int = 1) -> str:
        return self.s[self.i : self.i + n]

    def take(self, text: str) -> bool:
        if self.s.startswith(text, self.i):
            self.i += len(text)
            return True
        return False

    def number(self) -> int:
        j = self.i
        while j < len(self.s) and self.s[j].isdigit():
            j += 1
        if j == self.i:
            raise _Fail
        n = int(self.s[self.i : j])
        self.i = j
        return n

    def seq_id(self, end: str) -> int:
        """<seq-id> ending in ``end``: "" is 0, base-36 digits are n + 1."""
        j = self.s.find(end, self.i)
        if j < 0:
            raise _Fail
        text = self.s[self.i : j]
        self.i = j + 1
        return 0 if text == "" else int(text, 36) + 1

    def source_name(self) -> str:
        n = self.number()
        name = self.s[self.i : self.i + n]
        if len(name) != n:
            raise _Fail
        self.i += n
        return "(anonymous namespace)" if name.startswith("_GLOBAL__N") else name

    def substitution(self) -> str:
        if self.take("St"):
            return "std"
        if not self.take("S"):
            raise _Fail
        k = self.seq_id("_")
        if k >= len(self.subs):
            raise _Fail
        return self.subs[k]

    def template_param(self) -> str:
        if not self.take("T"):
            raise _Fail
        k = self.seq_id("_")
        if k >= len(self.targs):
            raise _Fail
        return self.targs[k]

    def template_args(self) -> list[str]:
        if not self.take("I"):
            raise _Fail
        args = []
        while not self.take("E"):
            if self.i >= len(self.s):
                raise _Fail
            args.append(self.template_arg())
        return args

    def template_arg(self) -> str:
        if self.take("L"):
            code = self.peek()
            self.i += 1
            neg = self.take("n")
            value = str(self.number())
            if not self.take("E"):
                raise _Fail
            if code == "b":
                return "true" if value == "1" else "false"
            if code not in _LITERAL_SUFFIX:
                return f"({_BUILTIN.get(code, '?')}){'-' if neg else ''}{value}"
            return ("-" if neg else "") + value + _LITERAL_SUFFIX[code]
        return self.type()

    @staticmethod
    def with_args(name: str, args: list[str]) -> str:
        inner = ", ".join(args)
        return f"{name}<{inner}{' ' if inner.endswith('>') else ''}>"

    def unqualified_name(self) -> str:
        if self.peek().isdigit():
            return self.source_name()
        raise _Fail

    def name(self) -> tuple[str, bool]:
        """<name>: (text, whether it ends in template arguments)."""
        if self.take("N"):
            return self.nested_name()
        if self.peek(2) == "St":
            self.i += 2
            base = "std::" + self.unqualified_name()
        elif self.peek() == "S":
            base = self.substitution()
            if self.peek() != "I":
                raise _Fail
            args = self.template_args()
            return self.with_args(base, args), True
        else:
            base = self.unqualified_name()
        if self.peek() == "I":
            self.subs.append(base)
            args = self.template_args()
            return self.with_args(base, args), True
        return base, False

    def nested_name(self) -> tuple[str, bool]:
        quals = ""
        while self.peek() in ("r", "V", "K"):
            quals += {"r": " restrict", "V": " volatile", "K": " const"}[self.peek()]
            self.i += 1
        cur = ""
        templated = False
        while not self.take("E"):
            if self.i >= len(self.s):
                raise _Fail
            if cur:
                self.subs.append(cur)
            if self.peek() == "I":
                if not cur:
                    raise _Fail
                args = self.template_args()
                cur = self.with_args(cur, args)
                templated = True
                continue
            if self.peek() == "S":
                part = self.substitution()
            elif self.peek() == "T":
                part = self.template_param()
            else:
                part = self.unqualified_name()
            cur = part if not cur else f"{cur}::{part}"
            templated = False
        return cur + quals, templated

    def type(self) -> str:
        c = self.peek()
        if c in _BUILTIN:
            self.i += 1
            return _BUILTIN[c]
        if c == "D" and self.peek(2)[1:] in _BUILTIN_D:
            self.i += 2
            return _BUILTIN_D[self.s[self.i - 1]]
        if c in ("P", "R", "O"):
            self.i += 1
            inner = self.type()
            out = inner + {"P": "*", "R": "&", "O": "&&"}[c]
        elif c in ("K", "V", "r"):
            self.i += 1
            inner = self.type()
            out = inner + {"K": " const", "V": " volatile", "r": " restrict"}[c]
        elif c == "T":
            out = self.template_param()
            if self.peek() == "I":
                self.subs.append(out)
                out = self.with_args(out, self.template_args())
        elif c == "S" and self.peek(2) != "St":
            out = self.substitution()
            if self.peek() == "I":
                out = self.with_args(out, self.template_args())
            else:
                return out  # a substitution is not added again
        elif c == "N" or c.isdigit() or self.peek(2) == "St":
            out, _ = self.name()
        else:
            raise _Fail
        self.subs.append(out)
        return out

    def encoding(self) -> str:
        name, templated = self.name()
        if templated:
            self.targs = self._last_targs(name)
        ret = ""
        if templated and self.i < len(self.s):
            ret = self.type() + " "
        params = []
        while self.i < len(self.s):
            if self.peek() == ".":  # a clone suffix such as .constprop.0
                break
            params.append(self.type())
        if params == ["void"]:
            params = []
        return f"{ret}{name}({', '.join(params)})"

    def _last_targs(self, name: str) -> list[str]:
        """The template arguments of the function name (what T_ refers to)."""
        depth = 0
        start = None
        for k in range(len(name) - 1, -1, -1):
            ch = name[k]
            if ch == ">":
                depth += 1
            elif ch == "<":
                depth -= 1
                if depth == 0:
                    start = k
                    break
        if start is None:
            return []
        inner = name[start + 1 : -1]
        out, depth, cur = [], 0, ""
        for ch in inner:
            if ch == "<":
                depth += 1
            elif ch == ">":
                depth -= 1
            if ch == "," and depth == 0:
                out.append(cur.strip())
                cur = ""
            else:
                cur += ch
        out.append(cur.strip())
        return out


def demangle(name: str) -> str:
    """The readable form of an Itanium-mangled name (``_Z...``), as c++filt prints it; any
    other name, or one outside the supported subset, unchanged."""
    if not isinstance(name, str) or not name.startswith("_Z"):
        return name
    p = _Parser(name)
    p.i = 2
    try:
        out = p.encoding()
    except (_Fail, IndexError, ValueError):
        return name
    if p.i != len(name):
        rest = name[p.i :]
        if not rest.startswith("."):
            return name
        out += f" [clone {rest}]"
    return out
