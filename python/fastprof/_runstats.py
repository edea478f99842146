"""The profile of a run as a pstats dictionary, without the runner's own call of ``disable``:
what ``fastprof run`` writes for its process, and each process of a job for its own."""

from __future__ import annotations

from typing import Any, Dict

__all__ = ["is_disable", "own_stats"]


def is_disable(key: Any) -> bool:
    return key[0] == "~" and key[2].startswith("<method 'disable' of 'fastprof.")


def own_stats(prof: Any) -> Dict[Any, Any]:
    """The profile of the run as a pstats dictionary, without the runner's own call of
    ``disable`` (a call with no recorded caller); calls of it from the script are kept."""
    if getattr(prof, "_busy", False):  # see children.write_now: the tables as they stand
        prof.snapshot_stats()
    else:
        prof.create_stats()
    stats = dict(prof.stats)
    for key in [k for k in stats if is_disable(k)]:
        callers = stats[key][4]
        if not callers:
            del stats[key]
            continue
        sums = [sum(e[i] for e in callers.values()) for i in range(4)]
        stats[key] = (sums[1], sums[0], sums[2], sums[3], callers)
    return stats
