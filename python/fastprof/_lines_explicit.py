"""``fastprof.lines.profile``: a ``@profile`` decorator that stays in the code and costs
nothing until switched on, as line_profiler's ``line_profiler.profile``.

It is off unless an environment variable (``FASTPROF_LINE_PROFILE`` or line_profiler's
``LINE_PROFILE``) is set to something other than ``""``, ``0``, ``false``, ``no``, ``off``,
or ``--line-profile`` is among the script's arguments, or ``profile.enable()`` is called.
While off, ``@profile`` returns the function itself.  Switched on, the functions decorated from
then on are line-timed and the report is written when the interpreter exits: the table to
stdout, ``<output_prefix>.txt``, a timestamped copy and ``<output_prefix>.lprof``.
"""

from __future__ import annotations

import atexit
import io
import os
import sys
from typing import Any, Callable, Dict, Optional

ENV_FLAGS = ("FASTPROF_LINE_PROFILE", "LINE_PROFILE")
CLI_FLAGS = ("--line-profile", "--line_profile")
_FALSY = frozenset({"", "0", "false", "no", "off"})


def _flag_set(value: str) -> bool:
    """Whether an environment variable's value switches profiling on."""
    return value.strip().lower() not in _FALSY


class ExplicitProfiler:
    """The ``profile`` object: ``@profile`` (no-op while off), ``enable``, ``disable``,
    ``show``; ``write_config`` says which outputs ``show`` writes, ``show_config`` how the
    table is printed (line_profiler's defaults)."""

    def __init__(self, make_profiler: Callable[[], Any]) -> None:
        self._make_profiler = make_profiler  # LineProfiler (passed in: no import cycle)
        self.enabled: Optional[bool] = None  # None: not decided yet (env and argv decide)
        self.output_prefix = "profile_output"
        self.write_config: Dict[str, bool] = {
            "stdout": True,
            "text": True,
            "timestamped_text": True,
            "lprof": True,
        }
        self.show_config: Dict[str, Any] = {
            "sort": True,
            "stripzeros": True,
            "details": False,
            "summarize": True,
        }
        self._profile: Any = None
        self._owner_pid: Optional[int] = None

    def _implicit_setup(self) -> None:
        """Switch on when an environment variable or a command-line flag asks for it."""
        asked = any(_flag_set(os.environ.get(name, "")) for name in ENV_FLAGS)
        asked = asked or any(flag in sys.argv for flag in CLI_FLAGS)
        if asked:
            self.enable()
        else:
            self.enabled = False

    def enable(self, output_prefix: Optional[str] = None) -> None:
        """Switch on: functions decorated from now on are timed, and the report is written
        at exit.  output_prefix (a str) names the files written."""
        if output_prefix is not None:
            if not isinstance(output_prefix, str):
                raise TypeError(f"output_prefix must be a str, not {type(output_prefix).__name__}")
            self.output_prefix = output_prefix
        if self._profile is None:
            self._profile = self._make_profiler()
            self._owner_pid = os.getpid()
            atexit.register(self._show_at_exit)
        self.enabled = True

    def disable(self) -> None:
        """Switch off: functions decorated from now on are returned unchanged."""
        self.enabled = False

    def __call__(self, func: Any) -> Any:
        """func's profiling wrapper while on, func itself while off."""
        if self.enabled is None:
            self._implicit_setup()
        if not self.enabled or self._profile is None:
            return func
        return self._profile(func)

    def __getattr__(self, name: str) -> Any:
        # The LineProfiler's methods (print_stats, get_stats, add_function ...) once on.
        profile = self.__dict__.get("_profile")
        if profile is None or name.startswith("__"):
            raise AttributeError(
                f"{type(self).__name__} has no attribute {name!r} (the "
                f"line profiler's methods are there once enabled)"
            )
        return getattr(profile, name)

    def _show_at_exit(self) -> None:
        """show(), in the process that switched profiling on only (not in forked children)."""
        if os.getpid() == self._owner_pid:
            self.show()

    def show(self) -> None:
        """Write the report to the outputs write_config selects."""
        if self._profile is None:
            return
        prof = self._profile
        if self.write_config.get("stdout"):
            prof.print_stats(**self.show_config)
        if self.write_config.get("text") or self.write_config.get("timestamped_text"):
            out = io.StringIO()
            prof.print_stats(out, **{**self.show_config, "details": True})
            text = out.getvalue()
            paths = []
            if self.write_config.get("text"):
                paths.append(f"{self.output_prefix}.txt")
            if self.write_config.get("timestamped_text"):
                import datetime  # here: importing fastprof does not load it

                stamp = datetime.datetime.now().strftime("%Y-%m-%dT%H%M%S")
                paths.append(f"{self.output_prefix}_{stamp}.txt")
            for path in paths:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
                print(f"Wrote profile results to {path}")
        if self.write_config.get("lprof"):
            path = f"{self.output_prefix}.lprof"
            prof.dump_stats(path)
            print(f"Wrote profile results to {path}")
            print(f"To view details run:\n{sys.executable} -m fastprof view {path}")
