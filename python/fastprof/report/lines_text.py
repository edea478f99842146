"""kernprof's text table of line timings, formatted as line_profiler 5.1's ``show_func`` and
``show_text`` format it: the same columns and widths, a value that does not fit its column
switched to ``%g`` style, columns widened for what still does not fit, and the summary line
``'%6.2f seconds - %s:%s - %s'``.

Two things stay fastprof's own (docs/lines.md, "Saved line timings"): names and source lines
are printed with control characters escaped, and source is read only from regular files (or
what linecache holds already); where it is missing only the lines that ran are listed.
"""

from __future__ import annotations

import inspect
import linecache
import os
import sys
from typing import IO, TYPE_CHECKING, Dict, List, Mapping, Optional, Sequence, Tuple

from ..keys import FuncKey
from .escape import printable

__all__ = ["COLUMN_WIDTHS", "show_func", "show_text"]

Key = FuncKey  # a function's pstats key
if TYPE_CHECKING:  # a type for the checker alone: see keys.FuncKey
    LineTiming = Tuple[int, int, float]
else:
    LineTiming = tuple

# line_profiler 5.1's default [tool.line_profiler.show.column_widths]
COLUMN_WIDTHS: Mapping[str, int] = {"line": 6, "hits": 9, "time": 12, "perhit": 8, "percent": 8}
_EMPTY = ("", "", "", "")


def _source_block(filename: str, start_lineno: int) -> Optional[List[str]]:
    """The lines of the function starting at start_lineno of filename: None when the file
    cannot be read, [] when it ends before start_lineno (it changed since the run, or the
    code was compiled under its name)."""
    # Sources linecache holds already (IPython cells) or regular files: never a device or
    # a pipe that a file name from a saved .lprof could point at.
    if filename not in linecache.cache and not os.path.isfile(filename):
        return None
    linecache.checkcache(filename)
    all_lines = linecache.getlines(filename)
    if not all_lines:
        return None
    if start_lineno < 1 or start_lineno > len(all_lines):
        return []
    try:
        return inspect.getblock(all_lines[start_lineno - 1 :])
    except Exception:  # tokenizer errors on odd sources: show the one line
        return all_lines[start_lineno - 1 : start_lineno]


def _cells(
    timings: Sequence[LineTiming], scale: float, total_time: float
) -> Dict[int, Tuple[str, str, str, str]]:
    """lineno -> (hits, time, per hit, % time) as line_profiler writes them: ``%5.1f``, or
    ``%5.3g`` (hits ``%g``) when that is wider than the column's default width."""
    cells: Dict[int, Tuple[str, str, str, str]] = {}
    for lineno, nhits, time in timings:
        percent = "" if total_time == 0 else "%5.1f" % (100 * time / total_time)
        time_disp = "%5.1f" % (time * scale)
        if len(time_disp) > COLUMN_WIDTHS["time"]:
            time_disp = "%5.3g" % (time * scale)
        if nhits:
            perhit_disp = "%5.1f" % (float(time) * scale / nhits)
            if len(perhit_disp) > COLUMN_WIDTHS["perhit"]:
                perhit_disp = "%5.3g" % (float(time) * scale / nhits)
        else:  # only a hand-made file holds a line with no hits (line_profiler would divide)
            perhit_disp = ""
        nhits_disp = "%d" % nhits
        if len(nhits_disp) > COLUMN_WIDTHS["hits"]:
            nhits_disp = "%g" % nhits
        cells[lineno] = (nhits_disp, time_disp, perhit_disp, percent)
    return cells


def show_func(
    filename: str,
    start_lineno: int,
    func_name: str,
    timings: Sequence[LineTiming],
    unit: float,
    output_unit: Optional[float] = None,
    stream: Optional[IO[str]] = None,
    stripzeros: bool = False,
) -> None:
    """Print one function's block: totals, then one row per source line (line_profiler's
    ``show_func``)."""
    stream = sys.stdout if stream is None else stream
    total_hits = sum(t[1] for t in timings)
    total_time = sum(t[2] for t in timings)
    if stripzeros and total_hits == 0:
        return
    output_unit = unit if output_unit is None else output_unit
    scale = unit / output_unit
    stream.write("Total time: %g s\n" % (total_time * unit))
    block = _source_block(filename, start_lineno)
    shown_file, shown_name = printable(filename), printable(func_name)
    cells = _cells(timings, scale, total_time)
    if block is not None:
        stream.write(f"File: {shown_file}\n")
        stream.write(f"Function: {shown_name} at line {start_lineno}\n")
        numbered = [(start_lineno + offset, text) for offset, text in enumerate(block)]
        if not block:  # the file is shorter than the function's lines: the ones that ran
            numbered = [(lineno, "") for lineno in sorted(cells)]
    else:
        stream.write("\n")
        stream.write(f"Could not find file {shown_file}\n")
        stream.write("Are you sure you are running this program from the same directory\n")
        stream.write("that you ran the profiler from?\n")
        stream.write("Continuing without the function's contents.\n")
        numbered = [(lineno, "") for lineno in sorted(cells)]  # the lines that ran
    widths = dict(COLUMN_WIDTHS)
    if cells:
        for i, column in enumerate(("hits", "time", "perhit")):
            widths[column] = max(widths[column], max(len(c[i]) for c in cells.values()))
    lhs = " ".join(
        "%" + str(widths[k]) + "s" for k in ("line", "hits", "time", "perhit", "percent")
    )
    template = lhs + "  %-s"
    header = template % ("Line #", "Hits", "Time", "Per Hit", "% Time", "Line Contents")
    stream.write("\n")
    stream.write(header + "\n")
    stream.write("=" * len(header) + "\n")
    for lineno, text in numbered:
        text = printable(text.rstrip("\n").rstrip("\r"), keep="\t")
        stream.write(template % (lineno, *cells.get(lineno, _EMPTY), text) + "\n")
    stream.write("\n")


def show_text(
    timings: Mapping[Key, Sequence[LineTiming]],
    unit: float,
    output_unit: Optional[float] = None,
    stream: Optional[IO[str]] = None,
    stripzeros: bool = False,
    summarize: bool = False,
    *,
    details: bool = True,
    sort: bool = False,
) -> None:
    """Print every function's block (in file and line order, or by ascending total time
    with sort; none without details), then with summarize one line per function in the same
    order, ``'%6.2f seconds - FILE:LINE - NAME'``, as line_profiler's ``show_text`` does."""
    stream = sys.stdout if stream is None else stream
    shown = unit if output_unit is None else output_unit
    stream.write("Timer unit: %g s\n\n" % shown)
    order: List[Tuple[Key, Sequence[LineTiming]]] = sorted(timings.items())
    if sort:
        order.sort(key=lambda item: sum(t[2] for t in item[1]))
    if details:
        for (filename, start_lineno, name), lines in order:
            show_func(filename, start_lineno, name, lines, unit, output_unit, stream, stripzeros)
    if summarize:
        for (filename, start_lineno, name), lines in order:
            seconds = sum(t[2] for t in lines) * unit
            if stripzeros and not seconds:
                continue
            stream.write(
                "%6.2f seconds - %s:%s - %s\n"
                % (seconds, printable(filename), start_lineno, printable(name))
            )
