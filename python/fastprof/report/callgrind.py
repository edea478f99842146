"""Callgrind files from call-profile stats, for KCachegrind / QCachegrind.

Costs are integer nanoseconds: each function's own time on its first line, and for each
function it called, the calls and the time spent in them (the edge's cumulative time).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, TextIO, Tuple, Union

__all__ = ["write_callgrind", "format_callgrind"]

FuncKey = Tuple[str, int, str]


def _ns(seconds: float) -> int:
    return int(round(seconds * 1e9))


def _one_line(text: str) -> str:
    """A name as one line of the format (a function or file named with a line end would end
    the record: readers skip the rest as malformed)."""
    return text.replace("\r", " ").replace("\n", " ")


def format_callgrind(pstats_dict: Dict[FuncKey, Any]) -> str:
    """The callgrind text of a pstats dictionary {(file, line, name): (cc, nc, tt, ct, callers)}."""
    # callees of each function, from the callers recorded on each callee
    callees: Dict[FuncKey, List[Tuple[FuncKey, Tuple[Any, ...]]]] = {}
    for callee, (_, _, _, _, callers) in pstats_dict.items():
        for caller, edge in callers.items():
            if isinstance(edge, (int, float)):  # profile.py's bare call counts
                edge = (int(edge), int(edge), 0.0, 0.0)
            callees.setdefault(caller, []).append((callee, tuple(edge)))

    files: Dict[str, int] = {}
    names: Dict[FuncKey, int] = {}
    # two functions of one file with the same name (lambdas, say) get their line appended
    seen: Dict[Tuple[str, str], int] = {}
    for k in pstats_dict:
        seen[(k[0], k[2])] = seen.get((k[0], k[2]), 0) + 1

    def fl(path: str) -> str:
        if path in files:
            return f"({files[path]})"
        files[path] = len(files) + 1
        return f"({files[path]}) {_one_line(path)}"

    def fn(key: FuncKey) -> str:
        if key in names:
            return f"({names[key]})"
        names[key] = len(names) + 1
        label = key[2] if seen.get((key[0], key[2]), 0) <= 1 else f"{key[2]}:{key[1]}"
        return f"({names[key]}) {_one_line(label)}"

    out = [
        "# callgrind format",
        "version: 1",
        "creator: fastprof",
        "positions: line",
        "events: ns",
        "",
    ]
    total = 0
    for key in sorted(pstats_dict, key=lambda k: (k[0], k[1], k[2])):
        cc, nc, tt, ct, _ = pstats_dict[key]
        self_ns = _ns(tt)
        total += self_ns
        out.append(f"fl={fl(key[0])}")
        out.append(f"fn={fn(key)}")
        out.append(f"{key[1]} {self_ns}")
        for callee, edge in sorted(callees.get(key, ()), key=lambda e: e[0]):
            e_nc, _, _, e_ct = edge
            out.append(f"cfl={fl(callee[0])}")
            out.append(f"cfn={fn(callee)}")
            out.append(f"calls={e_nc} {callee[1]}")
            out.append(f"{key[1]} {_ns(e_ct)}")
        out.append("")
    out.append(f"totals: {total}")
    return "\n".join(out) + "\n"


def write_callgrind(
    pstats_dict: Dict[FuncKey, Any], dest: Union[str, "os.PathLike[str]", TextIO]
) -> None:
    """Writes ``format_callgrind(pstats_dict)`` to a path or an open text stream."""
    if not hasattr(dest, "write") and not isinstance(dest, (str, os.PathLike)):
        raise TypeError(f"dest must be a path or a text stream, got {type(dest).__name__}")
    text = format_callgrind(pstats_dict)
    if isinstance(dest, (str, os.PathLike)):
        # a path that is not UTF-8 (its bytes kept by the file system's decoding) as it is
        with open(dest, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)
    else:
        dest.write(text)
