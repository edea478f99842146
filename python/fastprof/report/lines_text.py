"""The text table of line timings, laid out as ``kernprof -l -v`` prints it."""

from __future__ import annotations

import inspect
import linecache
import os
import sys
from typing import IO, Dict, List, Mapping, Optional, Sequence, Tuple

from .escape import printable

LineTiming = Tuple[int, int, int]
Key = Tuple[str, int, str]

HEADER = f"{'Line #':>6} {'Hits':>9} {'Time':>12} {'Per Hit':>8} {'% Time':>8}  Line Contents"


def _source_block(filename: str, start_lineno: int) -> List[str]:
    """The lines of the function starting at start_lineno of filename ([] when unreadable)."""
    # Sources linecache holds already (IPython cells) or regular files: never a device or
    # a pipe that a file name from a saved .lprof could point at.
    if filename not in linecache.cache and not os.path.isfile(filename):
        return []
    linecache.checkcache(filename)
    all_lines = linecache.getlines(filename)
    if not all_lines or start_lineno < 1 or start_lineno > len(all_lines):
        return []
    try:
        return inspect.getblock(all_lines[start_lineno - 1 :])
    except Exception:  # tokenizer errors on odd sources: show the one line
        return all_lines[start_lineno - 1 : start_lineno]


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
    """Print one function's block: totals, then one row per source line."""
    stream = sys.stdout if stream is None else stream
    total_hits = sum(t[1] for t in timings)
    total_time = sum(t[2] for t in timings)
    if stripzeros and total_hits == 0:
        return
    output_unit = unit if output_unit is None else output_unit
    scale = unit / output_unit
    stream.write(f"Total time: {total_time * unit:g} s\n")
    block = _source_block(filename, start_lineno)
    shown_file, shown_name = printable(filename), printable(func_name)
    by_line: Dict[int, LineTiming] = {t[0]: t for t in timings}
    if block:
        stream.write(f"File: {shown_file}\n")
        stream.write(f"Function: {shown_name} at line {start_lineno}\n")
        numbered = [(start_lineno + offset, text) for offset, text in enumerate(block)]
    else:
        stream.write(f"Could not find file {shown_file}\n")
        stream.write("Are you sure you are running this program from the same directory\n")
        stream.write("that you ran the profiler from?\n")
        stream.write("Continuing without the function's contents.\n")
        numbered = [(lineno, "") for lineno in sorted(by_line)]  # the lines that ran
    stream.write("\n")
    stream.write(HEADER + "\n")
    stream.write("=" * len(HEADER) + "\n")
    for lineno, text in numbered:
        text = printable(text.rstrip("\n").rstrip("\r"), keep="\t")
        row = by_line.get(lineno)
        if row is None:
            stream.write(f"{lineno:>6} {'':>9} {'':>12} {'':>8} {'':>8}  {text}\n")
            continue
        _, hits, time = row
        per_hit = f"{time * scale / hits:8.1f}" if hits else f"{'':>8}"
        percent = f"{100.0 * time / total_time:8.1f}" if total_time else f"{'':>8}"
        stream.write(f"{lineno:>6} {hits:>9} {time * scale:>12.1f} {per_hit} {percent}  {text}\n")
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
    with sort; none without details), then with summarize one line per function, as
    ``kernprof -l -v`` and line_profiler's ``show_text`` do."""
    stream = sys.stdout if stream is None else stream
    shown = unit if output_unit is None else output_unit
    stream.write(f"Timer unit: {shown:g} s\n\n")
    order = sorted(timings.items())
    if sort:
        order.sort(key=lambda item: sum(t[2] for t in item[1]))
    if details:
        for (filename, start_lineno, name), lines in order:
            show_func(filename, start_lineno, name, lines, unit, output_unit, stream, stripzeros)
    if summarize:
        rows = [(sum(t[2] for t in lines) * unit, key) for key, lines in order]
        for seconds, (filename, start_lineno, name) in sorted(rows, key=lambda r: r[0]):
            if stripzeros and seconds == 0:
                continue
            where = os.path.relpath(filename) if os.path.exists(filename) else filename
            stream.write(
                f"{seconds:10.6f} seconds - {printable(where)}:{start_lineno} - {printable(name)}\n"
            )
