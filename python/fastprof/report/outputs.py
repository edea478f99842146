"""What ``run`` and ``view`` write or print for a call profile: the options they share
(``add_view_options``) and ``emit``, which writes the exports asked for (``--format``,
``--html``) and prints the default view: the call tree when there is one and neither ``-s``
nor ``--filter`` was given, else the flat table (pstats' columns, sorted by ``-s``)."""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator, Optional, TextIO

# The views load when they print, after the script ran, so a script's own imports (json,
# sysconfig, ...) show in its profile.
from .options import FORMATS, VIEW_OPTIONS, add_option, check_view_options

if TYPE_CHECKING:
    from ..tree import CallTree

__all__ = ["FORMATS", "MERGED_THREADS", "add_view_options", "emit", "check_view_options"]

MERGED_THREADS = (
    "--threads reads one process's profile file, not a job's profile merged over its "
    "processes (fastprof merge): without --threads, view shows its call tree, one root per "
    "process"
)


def add_view_options(p: argparse.ArgumentParser) -> None:
    """The options of the views, shared by ``run`` and ``view``: adds them to ``p``."""
    for option in VIEW_OPTIONS:
        add_option(p, option)


# How an export's text becomes bytes, in a file and on the standard output alike: a path that
# is not UTF-8 (its bytes kept by the file system's decoding) is written as it is.
_ENCODING = "utf-8"
_ERRORS = "surrogateescape"


class _BinaryText:
    """A text stream's ``write`` over a binary one: the text encoded as ``open(path, "w",
    encoding=_ENCODING, errors=_ERRORS)`` encodes it (line ends as ``os.linesep``)."""

    def __init__(self, buffer: Any) -> None:
        self.buffer = buffer

    def write(self, text: str) -> int:
        """Writes ``text``; returns its length in characters."""
        data = text if os.linesep == "\n" else text.replace("\n", os.linesep)
        self.buffer.write(data.encode(_ENCODING, _ERRORS))
        return len(text)


@contextmanager
def _export_to(path: Optional[str], stream: TextIO) -> Iterator[Any]:
    """Where an export's text goes: the file ``path``, or (None) ``stream``, written through
    its binary buffer when it has one (its text layer flushed first), so that the standard
    output gets the bytes ``-o`` would write whatever its own encoding and errors are; a
    stream without one (a StringIO) gets the text."""
    if path is not None:
        with open(path, "w", encoding=_ENCODING, errors=_ERRORS) as f:
            yield f
        return
    buffer = getattr(stream, "buffer", None)
    if buffer is None:
        yield stream
        return
    stream.flush()
    yield _BinaryText(buffer)
    buffer.flush()


def emit(
    stats: Any,
    tree: Optional["CallTree"],
    opts: argparse.Namespace,
    stream: TextIO,
    *,
    title: str,
    outfile: Optional[str] = None,
    default_sort: str = "tottime",
    top: Optional[int] = None,
    strip_dirs: bool = True,
    no_tree: str = "a pstats file without FILE.tree.json beside it",
) -> str:
    """Writes what ``opts`` asks for (``outfile`` is where --format writes; None: ``stream``)
    and prints the default view when nothing else was asked.  Returns a line for stderr
    saying what was written (empty when it printed).  no_tree: why a profile has no call
    tree, for the error of an export that needs one."""
    notes = []
    wrote = False
    fmt = opts.format
    if fmt in ("speedscope", "collapsed") and tree is None:
        raise ValueError(
            f"--format {fmt} needs the call tree, and this profile has none ({no_tree})"
        )
    if fmt in ("speedscope", "collapsed", "callgrind") or (fmt == "pstats" and outfile):
        wrote = True
        if fmt == "pstats":
            from ..tree import save_tree

            assert outfile is not None  # the condition above
            stats.dump(outfile)
            if not getattr(stats, "_filters", ()):  # a filtered file's tree would not match it
                save_tree(outfile, tree)  # the call tree beside it, as run -o writes it
        else:
            with _export_to(outfile, stream) as dest:
                if fmt == "speedscope":
                    from .speedscope import write_speedscope

                    assert tree is not None  # checked above
                    write_speedscope(tree, dest, name=title)
                elif fmt == "collapsed":
                    from .collapsed import write_collapsed

                    assert tree is not None  # checked above
                    write_collapsed(tree, dest)
                else:
                    stats.to_callgrind(dest)
        if outfile:
            notes.append(f"{fmt} written to {outfile}")
        if fmt in ("speedscope", "collapsed") and tree is not None and tree.merged:
            notes.append(
                f"{tree.merged} calls merged past the call tree's node cap "
                f"({tree.node_cap}): in this file their time is their callers' own time"
            )
    elif fmt == "pstats":
        raise ValueError("--format pstats writes a binary file: give -o FILE")
    if opts.html:
        from .html import write_html

        write_html(opts.html, stats, tree, title=title)
        notes.append(f"HTML report written to {opts.html}")
        wrote = True
    if wrote and fmt != "text":
        return "; ".join(notes)
    if fmt == "text" and outfile:
        with open(outfile, "w", encoding="utf-8") as f:
            _print_view(stats, tree, opts, f, title, default_sort, top, strip_dirs)
        notes.append(f"text written to {outfile}")
        return "; ".join(notes)
    _print_view(stats, tree, opts, stream, title, default_sort, top, strip_dirs)
    return "; ".join(notes)


def _print_view(
    stats: Any,
    tree: Optional["CallTree"],
    opts: argparse.Namespace,
    stream: TextIO,
    title: str,
    default_sort: str,
    top: Optional[int],
    strip_dirs: bool,
) -> None:
    """Prints the per-thread tables (--threads), the call tree (when there is one and neither
    -s nor --filter was given) or the flat table."""
    if getattr(opts, "threads", False):
        from .threads_text import format_threads_report

        if tree is None:
            raise ValueError(
                "--threads needs the call tree, and this profile has none (a pstats file "
                "without FILE.tree.json beside it: cProfile's, or written without fastprof)"
            )
        if tree.processes:
            raise ValueError(MERGED_THREADS)
        stream.write(
            format_threads_report(
                stats,
                tree,
                wall=tree.wall,
                title=title,
                sort=opts.sort or default_sort,
                top=top,
                strip_dirs=strip_dirs,
            )
        )
    elif tree is not None and opts.sort is None and not getattr(opts, "filter", None):
        from .source import totals_of
        from .tree_text import format_tree_report, use_color

        totals = totals_of(stats)
        text = format_tree_report(
            tree,
            title=title,
            min_percent=opts.min_percent,
            expand_libs=opts.expand_libs,
            color=use_color(opts.color, stream),
            top=len(totals) if top is None else top,
            threads="merged" if opts.merge_threads else "each",
            totals=totals,
        )
        stream.write(_drawable(text, stream))
    else:
        keys = opts.sort if isinstance(opts.sort, tuple) else (opts.sort or default_sort,)
        stats.sort(*keys, strip_dirs=strip_dirs)  # (several keys: %fastprof -s a -s b)
        stats.print(top=top, title=title, stream=stream, strip_dirs=strip_dirs)


# The tree's lines in ASCII, for an output that cannot encode the box-drawing characters
# (PYTHONIOENCODING=ascii, a C locale without Python's UTF-8 mode).
_ASCII_LINES = str.maketrans({"└": "`", "├": "|", "│": "|", "─": "-"})


def _drawable(text: str, stream: Any) -> str:
    """text, its tree lines drawn in ASCII when stream's encoding cannot encode them."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        "└├│─".encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return text.translate(_ASCII_LINES)
    return text


def print_note(note: str) -> None:
    """Prints ``note`` (what was written where) on stderr, escaped as the views escape names
    (a path that is not UTF-8 shows as ``\\udcff``)."""
    if note:
        from .escape import printable

        print(f"fastprof: {printable(note)}", file=sys.stderr)
