"""Folded stacks, the text format of flamegraph.pl, inferno and speedscope: one line per call
path, ``frame;frame;frame <own time>``, the value in integer nanoseconds (whole units, as
speedscope's reader wants them; fine enough that the values sum to the profile's own time)."""

from __future__ import annotations

from typing import Dict, Iterator, List, TextIO, Tuple

from ..tree import CallTree, FuncKey, Node
from .escape import printable

__all__ = ["frame_name", "collapsed_lines", "write_collapsed"]


def frame_name(key: FuncKey) -> str:
    """A frame's name in folded stacks: ``name (file:line)``, or a builtin's label; control
    characters (line ends included) and bidirectional overrides are written as the text
    views write them (``\\x1b``, ``\\n``, ``\\u202e``), the lone surrogates of a file name
    that is not UTF-8 kept (the file keeps its bytes), and the format's separator ";" is
    replaced by ","."""
    text = key[2] if key[0] == "~" else f"{key[2]} ({key[0]}:{key[1]})"
    return printable(text, keep_surrogates=True).replace(";", ",")


def collapsed_lines(tree: CallTree, *, merge_threads: bool = True) -> Iterator[str]:
    """The lines (without line ends): every path with own time of at least half a
    nanosecond, rounded to whole nanoseconds.  With ``merge_threads`` False each thread's
    paths start with a ``thread <ident>`` frame."""
    roots: List[Tuple[str, Node]]
    if merge_threads:
        roots = [("", tree.merged_threads())]
    else:
        kind = "process" if tree.processes else "thread"
        roots = [(f"{kind} {ident};", r) for ident, r in tree.threads.items()]
    names: Dict[FuncKey, str] = {}
    for prefix, root in roots:
        stack: List[Tuple[Node, str]] = [(c, prefix) for c in reversed(root.children)]
        while stack:
            n, up = stack.pop()
            assert n.key is not None
            name = names.get(n.key)
            if name is None:
                name = names[n.key] = frame_name(n.key)
            path = up + name
            ns = int(round(n.tottime * 1e9))
            if ns > 0:
                yield f"{path} {ns}"
            stack.extend((c, path + ";") for c in reversed(n.children))


def write_collapsed(tree: CallTree, out: TextIO, *, merge_threads: bool = True) -> None:
    """Writes the folded stacks of ``tree`` to ``out``."""
    for line in collapsed_lines(tree, merge_threads=merge_threads):
        out.write(line + "\n")
