"""Kernel names as people read them: demangling of the Itanium C++ names that CUDA kernels
carry in traces.

:func:`demangle` tries, in order: the toolkit's cu++filt library (``__cu_demangle`` of
libcufilt, found by the same search as the other CUDA libraries), the small demangler below
(the common cases of kernel names: namespaces, templates with type and integer arguments,
pointers, references, const, substitutions, the compiler's clone suffixes), and else gives
the name as it came.  Results are remembered per name.  Nothing here imports NumPy.
"""

from __future__ import annotations

import re
from typing import Optional

from .. import _fastprof as _C

__all__ = ["demangle", "demangle_itanium"]

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
_DBUILTIN = {
    "n": "decltype(nullptr)",
    "h": "half",
    "i": "char32_t",
    "s": "char16_t",
    "u": "char8_t",
}
_LITERAL_SUFFIX = {"i": "", "j": "u", "l": "l", "m": "ul", "x": "ll", "y": "ull", "s": "", "t": ""}
_STD = {"t": "std", "a": "std::allocator", "b": "std::basic_string", "s": "std::string"}


class _Unsupported(Exception):
    """A construct the small demangler does not know."""


class _Parser:
    """A recursive-descent reader of one mangled name (Itanium C++ ABI, common subset)."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.subs: list[str] = []  # substitution candidates, in order
        self.targs: list[str] = []  # the function's template arguments (T_, T0_, ...)

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def take(self, k: int = 1) -> str:
        if self.i + k > len(self.s):
            raise _Unsupported("unexpected end")
        out = self.s[self.i : self.i + k]
        self.i += k
        return out

    def number(self) -> int:
        j = self.i
        while self.peek().isdigit():
            self.i += 1
        if j == self.i:
            raise _Unsupported("a number was expected")
        return int(self.s[j : self.i])

    def source_name(self) -> str:
        n = self.number()
        ident = self.take(n)
        return "(anonymous namespace)" if ident.startswith("_GLOBAL__N") else ident

    def seq_id(self) -> int:
        """The index of S_/S<seq>_ or T_/T<n>_ (the leading letter already read)."""
        if self.peek() == "_":
            self.i += 1
            return 0
        j = self.i
        while self.peek() and self.peek() != "_":
            self.i += 1
        if not self.peek():
            raise _Unsupported("unterminated sequence id")
        value = int(self.s[j : self.i], 36)
        self.i += 1
        return value + 1

    def substitution(self) -> str:
        """After 'S': a remembered name, or one of std's abbreviations."""
        c = self.peek()
        if c in _STD:
            self.i += 1
            if c == "t":
                return "std::" + self.unqualified()
            return _STD[c]
        n = self.seq_id()
        if n >= len(self.subs):
            raise _Unsupported("substitution out of range")
        return self.subs[n]

    def unqualified(self) -> str:
        if self.peek().isdigit():
            return self.source_name()
        raise _Unsupported(f"unqualified name {self.peek()!r}")

    def template_args(self, top: bool) -> str:
        """After 'I': the arguments up to 'E', as '<...>' (the function's own when top)."""
        args: list[str] = []
        while self.peek() != "E":
            args.append(self.template_arg())
        self.i += 1
        if top:
            self.targs = args
        text = ", ".join(args)
        return "<" + text + (" >" if text.endswith(">") else ">")

    def template_arg(self) -> str:
        c = self.peek()
        if c == "L":
            self.i += 1
            return self.literal()
        if c == "J":
            self.i += 1
            pack = []
            while self.peek() != "E":
                pack.append(self.template_arg())
            self.i += 1
            return ", ".join(pack)
        if c == "X":
            raise _Unsupported("expressions")
        return self.type()

    def literal(self) -> str:
        """After 'L': an integer or bool literal up to 'E'."""
        code = self.take()
        if code not in _BUILTIN or code in "vz":
            raise _Unsupported("literal type")
        neg = self.peek() == "n"
        if neg:
            self.i += 1
        j = self.i
        while self.peek() and self.peek() != "E":
            self.i += 1
        digits = self.s[j : self.i]
        self.take()  # 'E'
        if not digits.isdigit():
            raise _Unsupported("literal value")
        value = ("-" if neg else "") + digits
        if code == "b":
            return {"0": "false", "1": "true"}.get(value, f"(bool){value}")
        if code in _LITERAL_SUFFIX:
            return value + _LITERAL_SUFFIX[code]
        return f"({_BUILTIN[code]}){value}"

    def nested(self, top: bool) -> tuple[str, bool]:
        """After 'N': the qualified name up to 'E', and whether it ends in template arguments.
        Every prefix but the whole name becomes a substitution candidate."""
        quals = ""
        while self.peek() in ("r", "V", "K"):
            quals += {"r": " restrict", "V": " volatile", "K": " const"}[self.take()]
        parts = ""
        templated = False
        while True:
            c = self.peek()
            fresh = True  # a new prefix: a substitution candidate
            if c == "S":
                self.i += 1
                fresh = self.peek() == "t"  # St<name> is new, S_ ... are not
                parts = self.substitution()
                templated = False
            elif c == "T":
                self.i += 1
                n = self.seq_id()
                if n >= len(self.targs):
                    raise _Unsupported("template parameter out of range")
                parts = self.targs[n]
                templated = False
            elif c == "I":
                if not parts:
                    raise _Unsupported("template arguments without a name")
                self.i += 1
                parts += self.template_args(top)
                templated = True
            elif c.isdigit():
                name = self.source_name()
                parts = f"{parts}::{name}" if parts else name
                templated = False
            else:
                raise _Unsupported(f"nested name component {c!r}")
            if self.peek() == "E":
                self.i += 1
                return parts + quals, templated
            if fresh:
                self.subs.append(parts)

    def name(self, top: bool) -> tuple[str, bool]:
        """A (possibly qualified, possibly templated) name, and whether it is templated."""
        c = self.peek()
        if c == "N":
            self.i += 1
            return self.nested(top)
        if c == "S":
            self.i += 1
            base = self.substitution()
            is_std = self.s[self.i - 1] != "_"  # St<name>: a new name, a candidate
        elif c.isdigit():
            base = self.source_name()
            is_std = True
        else:
            raise _Unsupported(f"name {c!r}")
        if self.peek() == "I":
            if is_std:
                self.subs.append(base)
            self.i += 1
            return base + self.template_args(top), True
        return base, False

    def type(self) -> str:
        c = self.peek()
        if c in _BUILTIN:
            self.i += 1
            return _BUILTIN[c]
        if c == "D" and self.s[self.i + 1 : self.i + 2] in _DBUILTIN:
            self.i += 2
            return _DBUILTIN[self.s[self.i - 1]]
        if c in "PROKVr":
            self.i += 1
            inner = self.type()
            out = (
                inner
                + {
                    "P": "*",
                    "R": "&",
                    "O": "&&",
                    "K": " const",
                    "V": " volatile",
                    "r": " restrict",
                }[c]
            )
        elif c == "T":
            self.i += 1
            n = self.seq_id()
            if n >= len(self.targs):
                raise _Unsupported("template parameter out of range")
            out = self.targs[n]
        elif c == "S" and self.s[self.i + 1 : self.i + 2] not in ("t", ""):
            self.i += 1
            out = self.substitution()
            if self.peek() != "I":
                return out  # a substitution is not remembered again
            self.i += 1
            out += self.template_args(False)
        elif c == "N" or c.isdigit() or c == "S":
            out, _templated = self.name(False)
        elif c == "u":
            self.i += 1
            out = self.source_name()
        else:
            raise _Unsupported(f"type {c!r}")
        self.subs.append(out)
        return out


def demangle_itanium(mangled: str) -> Optional[str]:
    """``mangled`` (an Itanium C++ ABI name, ``_Z...``) as c++filt writes it, for the common
    cases of kernel names; None for anything else (not mangled, or constructs it does not
    know: lambdas, local names, expressions, function and array types)."""
    if not isinstance(mangled, str) or not mangled.startswith("_Z"):
        return None
    base, dot, rest = mangled.partition(".")
    clones = _clone_suffixes(dot + rest)
    if clones is None:
        return None
    p = _Parser(base)
    p.i = 2
    try:
        fname, templated = p.name(True)
        if p.i == len(base):
            return fname + clones  # a variable
        ret = p.type() if templated else None
        params: list[str] = []
        while p.i < len(base):
            params.append(p.type())
    except (_Unsupported, ValueError, IndexError):
        return None
    plist = "" if params == ["void"] else ", ".join(params)
    out = f"{fname}({plist})"
    return (f"{ret} {out}" if ret is not None else out) + clones


def _clone_suffixes(rest: str) -> Optional[str]:
    """The compiler's clone suffixes (``.constprop.0.isra.1``, ``.cold``, ``.1``) as c++filt
    writes them (`` [clone .constprop.0] [clone .isra.1]``); "" for none, None when ``rest``
    is not made of such suffixes."""
    out = ""
    i = 0
    while i < len(rest):
        m = _CLONE.match(rest, i)
        if m is None:
            return None
        out += f" [clone {m.group(0)}]"
        i = m.end()
    return out


_CLONE = re.compile(r"\.(?:[A-Za-z_][A-Za-z0-9_]*(?:\.[0-9]+)*|[0-9]+)")


_seen: dict[str, str] = {}
_cufilt = [True]  # whether libcufilt may still be tried


def _cufilt_demangle(mangled: str) -> Optional[str]:
    """The name by the toolkit's libcufilt, or None (not there, or a name it does not know)."""
    if not _cufilt[0] or not _C._cuda_built():
        return None
    from ._base import CudaUnavailableError
    from .libs import library_candidates

    try:
        return _C._cuda_demangle(
            mangled, library_candidates("cufilt", ("libcufilt.so",), "cuda_cufilt")
        )
    except CudaUnavailableError:
        _cufilt[0] = False  # no libcufilt: not asked again
        return None


def demangle(name: str) -> str:
    """A kernel name as people read it: libcufilt's demangling, else the small demangler's,
    else ``name`` as it is."""
    if not isinstance(name, str):
        return name
    hit = _seen.get(name)
    if hit is None:
        hit = (name.startswith("_Z") and (_cufilt_demangle(name) or demangle_itanium(name))) or name
        if len(_seen) < 4096:
            _seen[name] = hit
    return hit
