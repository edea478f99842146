"""--fastprof-compare-fail / ``compare --fail`` rules (STAT:N%), parsed without NumPy so that
the plugin can check them when the session starts whether or not NumPy is installed."""

from __future__ import annotations

import re
from dataclasses import dataclass

#: the statistics a rule may name: sample_stats.COMPARABLE, kept here free of NumPy
RULE_STATS = ("median", "mean", "min")

_RULE_RE = re.compile(r"^\s*(\w+)\s*:\s*([0-9]*\.?[0-9]+)\s*%\s*$")


@dataclass(frozen=True)
class Rule:
    """Fail when stat's ratio new/old is beyond 1 + threshold with all its interval."""

    stat: str
    threshold: float  # a fraction: 0.05 for 5%

    def __str__(self) -> str:
        return f"{self.stat}:{self.threshold * 100:g}%"


def parse_rule(text: str, where: str = "--fastprof-compare-fail") -> Rule:
    """Return the Rule written as STAT:N% (STAT one of min, mean, median); raises ValueError."""
    m = _RULE_RE.match(text or "")
    if not m or m.group(1) not in RULE_STATS:
        raise ValueError(
            f"{where}: expected STAT:N% with STAT one of {', '.join(RULE_STATS)} "
            f"(e.g. median:5%), got {text!r}"
        )
    return Rule(m.group(1), float(m.group(2)) / 100.0)
