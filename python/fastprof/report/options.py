"""The view options (``--format``, ``--html``, ...) as one table, with their choices,
defaults and value types, in a module that does not load argparse: ``fastprof run`` reads its
command line from these tables without it (see fastprof._run_args), so that a profiled
script's own ``import argparse`` shows in its profile; the argparse parsers (``--help``, the
errors, ``view``) are built from the same tables by ``add_option``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, Tuple

if TYPE_CHECKING:
    import argparse

__all__ = [
    "FORMATS",
    "COLOR_CHOICES",
    "DEFAULT_MIN_PERCENT",
    "Option",
    "VIEW_OPTIONS",
    "add_option",
    "check_view_options",
    "nonnegative_float",
    "percent",
    "positive_int",
]

FORMATS = ("text", "pstats", "speedscope", "collapsed", "callgrind")
COLOR_CHOICES = ("auto", "always", "never")
DEFAULT_MIN_PERCENT = 1.0


class Option(NamedTuple):
    """One command-line option, as ``argparse.ArgumentParser.add_argument`` takes it."""

    flags: Tuple[str, ...]
    dest: str
    action: str  # "store", "store_true" or "append"
    help: str
    default: Any = None
    type: Optional[Callable[[str], Any]] = None
    choices: Optional[Tuple[str, ...]] = None
    metavar: Optional[str] = None


def add_option(parser: "argparse.ArgumentParser", option: Option) -> None:
    """Adds ``option`` to ``parser``; returns None."""
    kwargs: dict = {"dest": option.dest, "action": option.action, "help": option.help}
    if option.action == "append":
        kwargs["default"] = list(option.default)
    elif option.action != "store_true":
        kwargs["default"] = option.default
    for name in ("type", "choices", "metavar"):
        if getattr(option, name) is not None:
            kwargs[name] = getattr(option, name)
    parser.add_argument(*option.flags, **kwargs)


def _type_error(message: str) -> Exception:
    """argparse's ArgumentTypeError with ``message`` (argparse loads here: a bad value is
    reported by the argparse parser)."""
    import argparse

    return argparse.ArgumentTypeError(message)


def _number(text: str, convert: Callable[[str], Any], ok: Callable[[Any], bool], what: str) -> Any:
    """convert(text) when ok() takes it, else argparse's ArgumentTypeError naming ``what``."""
    try:
        value = convert(text)
    except ValueError:
        value = None
    if value is None or not ok(value):
        raise _type_error(f"expected {what}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: the positive integer text names, else an ArgumentTypeError."""
    return int(_number(text, int, lambda n: n >= 1, "a positive integer"))


def percent(text: str) -> float:
    """An argparse type: the number 0 to 100 text names, else an ArgumentTypeError."""
    return float(_number(text, float, lambda x: 0 <= x <= 100, "a percentage between 0 and 100"))


def nonnegative_float(text: str) -> float:
    """An argparse type: a finite number >= 0, else an ArgumentTypeError."""
    return float(_number(text, float, lambda x: 0 <= x < float("inf"), "a finite number >= 0"))


#: the options of the views, shared by ``run`` and ``view``
VIEW_OPTIONS = (
    Option(
        ("--format",),
        "format",
        "store",
        "what to write: text (the call tree, the default view), pstats "
        "(with -o; the default there), speedscope (JSON), collapsed (folded "
        "stacks: flamegraph.pl, inferno, speedscope), callgrind (KCachegrind); "
        "to -o FILE, or to the standard output",
        choices=FORMATS,
    ),
    Option(
        ("--html",),
        "html",
        "store",
        "write one self-contained HTML report to FILE (flame graph, "
        "function table, callers and callees, threads, line timings)",
        metavar="FILE",
    ),
    Option(
        ("--min-percent",),
        "min_percent",
        "store",
        f"call tree: leave out paths below P%% of the run (default {DEFAULT_MIN_PERCENT:g})",
        default=DEFAULT_MIN_PERCENT,
        type=percent,
        metavar="P",
    ),
    Option(
        ("--expand-libs",),
        "expand_libs",
        "store_true",
        "call tree: show the frames inside libraries (stdlib, site-packages, "
        "builtins) instead of one row per library call",
    ),
    Option(
        ("--merge-threads",),
        "merge_threads",
        "store_true",
        "call tree: one tree of all threads, summed by path",
    ),
    Option(
        ("--threads",),
        "threads",
        "store_true",
        "print each thread's table (headed by the thread's name, ident and own time), "
        "then the merged table (headed by the run's wall time); sorted by -s",
    ),
    Option(
        ("--color",),
        "color",
        "store",
        "colour the call tree: auto (on a terminal, unless NO_COLOR is set), always, never",
        default="auto",
        choices=COLOR_CHOICES,
    ),
)


def check_view_options(opts: Any) -> Optional[str]:
    """A usage error in the view options of ``opts`` (a parsed command line), or None."""
    if opts.format == "pstats" and not getattr(opts, "outfile", None):
        return "--format pstats writes a binary file: give -o FILE"
    if getattr(opts, "threads", False) and opts.format not in (None, "text", "pstats"):
        return f"--threads prints tables as text: it does not combine with --format {opts.format}"
    if getattr(opts, "filter", None) and opts.format in ("speedscope", "collapsed"):
        return (
            f"--filter selects rows of the tables (text, pstats, callgrind): --format "
            f"{opts.format} exports the whole call tree"
        )
    return None
