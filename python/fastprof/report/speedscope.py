"""speedscope's file format (https://www.speedscope.app/file-format-schema.json): one evented
profile per thread, made from the call tree.

Names, files and titles keep their text, less lone surrogates (a file name that is not UTF-8):
those are written as the text views write them (``\\udcff``), since strict JSON readers refuse
the ``"\\udcff"`` escape that ``json`` would write.

A tree holds totals, not a timeline, so each path is laid out once: a node opens, its children
follow one another from its start, and it closes after its total time (as a flame graph lays
them out).  Times are in seconds.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, TextIO, Tuple

from ..tree import CallTree, FuncKey, Node
from .display import thread_label, thread_name
from .escape import without_surrogates

__all__ = ["SCHEMA", "to_speedscope", "write_speedscope"]

SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def _frame(key: FuncKey) -> Dict[str, Any]:
    """A function's frame in the file (its name, file and line; a builtin's name alone)."""
    if key[0] == "~":
        return {"name": without_surrogates(key[2])}
    return {
        "name": without_surrogates(key[2]),
        "file": without_surrogates(key[0]),
        "line": key[1],
    }


def _events(
    root: Node, frame_of: Dict[FuncKey, int], frames: List[Dict[str, Any]]
) -> Tuple[List[Dict[str, Any]], float]:
    events: List[Dict[str, Any]] = []
    # (node, start, closing?)  Children are laid out from the parent's start.
    t = 0.0  # the last event's time: events never go back in time
    starts: List[float] = []
    cursor = 0.0
    for c in root.children:  # top-level frames one after another
        starts.append(cursor)
        cursor += max(c.cumtime, 0.0)
    stack: List[Tuple[Node, float, bool]] = [
        (c, s, False) for c, s in zip(reversed(root.children), reversed(starts))
    ]
    while stack:
        n, start, closing = stack.pop()
        assert n.key is not None
        fi = frame_of.get(n.key)
        if fi is None:
            fi = frame_of[n.key] = len(frames)
            frames.append(_frame(n.key))
        if closing:
            end = max(start + max(n.cumtime, 0.0), t)
            events.append({"type": "C", "frame": fi, "at": end})
            t = end
            continue
        start = max(start, t)
        events.append({"type": "O", "frame": fi, "at": start})
        t = start
        stack.append((n, start, True))
        cs = start
        kids: List[Tuple[Node, float, bool]] = []
        for c in n.children:
            kids.append((c, cs, False))
            cs += max(c.cumtime, 0.0)
        stack.extend(reversed(kids))
    return events, t


def to_speedscope(
    tree: CallTree, *, name: str = "fastprof profile", thread_names: Optional[Dict[int, str]] = None
) -> Dict[str, Any]:
    """The speedscope document (a dict ready for json.dump)."""
    frames: List[Dict[str, Any]] = []
    frame_of: Dict[FuncKey, int] = {}
    profiles = []
    for i, (ident, root) in enumerate(tree.threads.items()):
        events, end = _events(root, frame_of, frames)
        known = (thread_names or {}).get(ident) or thread_name(tree, ident)
        # the thread's name first, as the text and HTML views show it
        label = thread_label(ident, i, tree.processes, known)
        profiles.append(
            {
                "type": "evented",
                "name": without_surrogates(label),
                "unit": "seconds",
                "startValue": 0.0,
                "endValue": end,
                "events": events,
            }
        )
    return {
        "$schema": SCHEMA,
        "shared": {"frames": frames},
        "profiles": profiles,
        "name": without_surrogates(name),
        "activeProfileIndex": 0,
        "exporter": "fastprof",
    }


def write_speedscope(tree: CallTree, out: TextIO, *, name: str = "fastprof profile") -> None:
    """Writes the speedscope JSON of ``tree`` to ``out``."""
    # one pass of the C encoder (json.dump writes token by token from Python)
    out.write(json.dumps(to_speedscope(tree, name=name), separators=(",", ":")))
