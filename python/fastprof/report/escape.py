"""Text from files and programs made safe to print: control characters (ANSI escape
sequences, newlines, carriage returns, bidirectional overrides) are written as Python escapes,
so a function or file name can neither break a report's layout nor drive the terminal."""

from __future__ import annotations

__all__ = ["printable"]


def printable(text: str, keep: str = "") -> str:
    """``text`` with each character that is not printable (``str.isprintable``) written as
    its Python escape (``\\x1b``, ``\\n``, ``\\u202e``); characters in ``keep`` stay as they
    are.  Printable text is returned unchanged."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in text)
