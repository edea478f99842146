"""Text from files and programs made safe to print: control characters (ANSI escape
sequences, newlines, carriage returns, bidirectional overrides) are written as Python escapes,
so a function or file name can neither break a report's layout nor drive the terminal.

One rule for every view: a character is written as its Python escape (``\\x1b``, ``\\udcff``).
``printable`` applies it to every character that is not printable (the text and HTML views;
the folded stacks too, less the lone surrogates, whose bytes they keep);
``without_surrogates`` only to lone surrogates, the bytes of a file name that is not UTF-8 as
the file system's decoding keeps them (``m\\xff.py`` is ``'m\\udcff.py'``), which no UTF-8
text and no strict JSON reader can hold (the JSON exports)."""

from __future__ import annotations

import re

__all__ = ["printable", "without_surrogates"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(c: str) -> str:
    """A character's Python escape (``\\x1b``, ``\\u202e``, ``\\udcff``)."""
    return repr(c)[1:-1]


def printable(text: str, keep: str = "", *, keep_surrogates: bool = False) -> str:
    """``text`` with each character that is not printable (``str.isprintable``: control
    characters, bidirectional overrides, lone surrogates) written as its Python escape
    (``\\x1b``, ``\\n``, ``\\u202e``, ``\\udcff``); characters in ``keep`` stay as they are,
    and so do lone surrogates with ``keep_surrogates`` (for an output written with
    ``surrogateescape``, where they are a file name's bytes).  Printable text is returned
    unchanged."""
    if text.isprintable():
        return text
    return "".join(
        c
        if c.isprintable() or c in keep or (keep_surrogates and "\ud800" <= c <= "\udfff")
        else _escape(c)
        for c in text
    )


def without_surrogates(text: str) -> str:
    """``text`` with each lone surrogate written as ``printable`` writes it (``\\udcff``), so
    that it encodes as UTF-8; other characters are kept.  Text without one is returned
    unchanged."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(lambda m: _escape(m.group()), text)
