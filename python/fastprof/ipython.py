"""IPython and Jupyter: ``%load_ext fastprof`` gives

    %fastprof [options] statement      profile one statement (as %prun)
    %%fastprof [options]               profile the cell
    %flprun -f func [-f func ...] statement    line timings of func (as %lprun)

Options of %fastprof: ``-s SORT`` (cProfile's flat table sorted by SORT instead of the call
tree), ``--top N``, ``--min-percent P``, ``--expand-libs``, ``--html FILE`` (also save the HTML
report), ``--threads`` (every thread, not only the one running the code).  Options of %flprun,
as %lprun's: ``-f FUNC``, ``-m MODULE``, ``-u UNIT``, ``-s`` (leave out functions that never
ran), ``-D FILE`` (save the timings), ``-T FILE`` (save the text).  Each magic returns a result
object: a terminal shows its text (the call tree and the top functions, or the line timings);
a notebook shows the HTML report inline.
"""

from __future__ import annotations

import html as _html
import io
import math
from typing import Any, Optional, Tuple, Union

__all__ = ["ProfileResult", "LineResult", "load_ipython_extension"]

_FRAME_HEIGHT = 720
# what IPython's %prun and line_profiler's %lprun print when the profiled code raised one of
# these: the profile of what ran is still shown
_CAUGHT = "*** {} exception caught in code being profiled."


def _iframe(page: str) -> str:
    """``page`` in an iframe of its own (its script and styles stay apart from the
    notebook's)."""
    return (
        f'<iframe srcdoc="{_html.escape(page, quote=True)}" style="width: 100%; '
        f'height: {_FRAME_HEIGHT}px; border: 1px solid #ccc" '
        f'sandbox="allow-scripts"></iframe>'
    )


class ProfileResult:
    """What ``%fastprof`` returns: ``stats`` (``fastprof.Stats``), ``tree`` (the call tree,
    or None when the core records none), ``text()`` and ``html()``."""

    def __init__(
        self,
        stats: Any,
        tree: Any,
        title: str,
        *,
        sort: Union[str, Tuple[str, ...], None] = None,
        top: Optional[int] = None,
        min_percent: float = 1.0,
        expand_libs: bool = False,
    ) -> None:
        self.stats = stats
        self.tree = tree
        self.title = title
        self._sort = sort
        self._top = top
        self._min_percent = min_percent
        self._expand_libs = expand_libs

    def text(self) -> str:
        """The call tree and the top functions (or the flat table with a sort key, or when
        there is no tree)."""
        import argparse

        from .report.outputs import emit

        opts = argparse.Namespace(
            format=None,
            html=None,
            sort=self._sort,
            filter=None,
            min_percent=self._min_percent,
            expand_libs=self._expand_libs,
            merge_threads=False,
            color="never",
        )
        out = io.StringIO()
        top = self._top if self._top is not None else (15 if self.tree is not None else 40)
        emit(self.stats, self.tree, opts, out, title=self.title, top=top)
        return out.getvalue()

    def html(self) -> str:
        """The self-contained HTML report."""
        from .report.html import render_html

        return render_html(self.stats, self.tree, title=self.title)

    def save_html(self, path: str) -> None:
        """Writes the HTML report to ``path``."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.html())

    def __repr__(self) -> str:
        return self.text()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.text())

    def _repr_html_(self) -> str:
        return _iframe(self.html())


class LineResult:
    """What ``%flprun`` returns: ``stats`` (``fastprof.lines.LineStats``), ``text()`` (as
    line_profiler prints it) and ``html()``."""

    def __init__(
        self, stats: Any, title: str, *, output_unit: float = 1e-6, stripzeros: bool = False
    ) -> None:
        self.stats = stats
        self.title = title
        self._output_unit = output_unit
        self._stripzeros = stripzeros

    def text(self) -> str:
        """The line timings as ``LineProfiler.print_stats()`` prints them (in microseconds
        unless ``-u`` said otherwise)."""
        from .report.lines_text import show_text

        out = io.StringIO()
        show_text(
            self.stats.timings, self.stats.unit, self._output_unit, out, self._stripzeros, False
        )
        return out.getvalue()

    def html(self) -> str:
        from .report.html import render_html

        return render_html(None, None, self.stats, title=self.title)

    def __repr__(self) -> str:
        return self.text()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.text())

    def _repr_html_(self) -> str:
        return _iframe(self.html())


def _magics_class() -> Any:
    from IPython.core.error import UsageError  # type: ignore[import-not-found, unused-ignore]
    from IPython.core.magic import (  # type: ignore[import-not-found, unused-ignore]
        Magics,
        line_cell_magic,
        line_magic,
        magics_class,
        no_var_expand,
    )

    @magics_class
    class FastprofMagics(Magics):  # type: ignore[misc, unused-ignore]
        """The magics ``%fastprof``, ``%%fastprof`` and ``%flprun``."""

        @no_var_expand  # type: ignore[misc, unused-ignore]
        @line_cell_magic  # type: ignore[misc, unused-ignore]
        def fastprof(self, line: str, cell: Optional[str] = None) -> Optional[ProfileResult]:
            """Profile a statement (``%fastprof stmt``) or a cell (``%%fastprof``) with
            fastprof's call profiler; shows the call tree and the top functions (or, in a
            notebook, the HTML report).  Options: -s SORT, --top N, --min-percent P,
            --expand-libs, --html FILE, --threads (every thread: a notebook kernel's own
            threads too), and %prun's -l N (rows; a fraction 0-1 of them), -D FILE (save the
            pstats file), -T FILE (save the text), -q (show nothing) and -r (return the
            result even with -q).  The statement is run as written ({...} and $name are not
            expanded, as under %prun)."""
            from ._runstats import own_stats, own_tree
            from .profile import Profile
            from .report.source import tree_of
            from .stats import SORT_KEYS, Stats

            opts, stmt = self.parse_options(
                line,
                "s:l:D:T:qr",
                "top=",
                "min-percent=",
                "expand-libs",
                "html=",
                "threads",
                posix=False,
                strict=True,
                list_all=True,
            )
            # as %%prun: the statement on the magic's line runs first, then the cell
            code = stmt if cell is None else f"{stmt}\n{cell}"
            if not code.strip():
                raise UsageError(
                    "%fastprof: give a statement to profile (or use %%fastprof on a cell)"
                )
            sort = opts.get("s", [])  # -s given again adds a key, as %prun's -s
            for key in sort:
                if key not in SORT_KEYS:
                    raise UsageError(
                        f"%fastprof -s: unknown sort key {key!r}; expected one of "
                        f"{', '.join(SORT_KEYS)}"
                    )
            top = _number(_last(opts, "top"), "--top", int, 1, None)
            limit = _last(opts, "l")
            minp = _number(_last(opts, "min-percent"), "--min-percent", float, 0, 100)
            shell = _shell(self.shell)
            ns = shell.user_ns
            # IPython's own syntax (!cmd, %magic lines, an indented cell), as %prun reads it
            compiled = compile(shell.transform_cell(code), "<fastprof>", "exec")
            # the thread running the code, as %prun: a kernel's own threads (its I/O loops,
            # blocked in poll) are not the user's
            prof = Profile(threads="threads" in opts)
            caught = _run_caught(prof, compiled, ns)
            if cell is None:
                title = f"%fastprof {code.strip().splitlines()[0]}"
            else:
                title = f"%%fastprof {stmt.strip()}".strip()
            stats = Stats(own_stats(prof))  # without the call of disable, as the text omits it
            tree = own_tree(tree_of(prof))
            stats._tree = tree  # its per-thread tables (threads(), for_thread) and dump's tree
            if limit is not None:
                top = _prun_limit(limit, len(stats.rows))
            result = ProfileResult(
                stats,
                tree,
                title,
                sort=tuple(sort) or None,
                top=top,
                min_percent=1.0 if minp is None else minp,
                expand_libs="expand-libs" in opts,
            )
            html = _last(opts, "html")
            if html:
                result.save_html(html)
            dump = _last(opts, "D")
            if dump:  # as %prun -D: the pstats file (and fastprof's tree beside it)
                stats.dump(dump)
                print(f"\n*** Profile stats marshalled to file {dump!r}.")
            text_file = _last(opts, "T")
            if text_file:  # as %prun -T: the text shown
                with open(text_file, "w", encoding="utf-8") as f:
                    f.write(result.text())
                print(f"\n*** Profile printout saved to text file {text_file!r}.")
            quiet = "q" in opts
            if isinstance(caught, KeyboardInterrupt):
                # as under %prun, Ctrl-C fails the cell (a notebook's queued cells do not
                # run), once the profile of what ran is shown
                from IPython.display import display  # type: ignore[import-not-found, unused-ignore]

                if not quiet:
                    display(result)
                print(_CAUGHT.format("KeyboardInterrupt"))
                raise caught
            if caught is not None:
                print(_CAUGHT.format(type(caught).__name__))
            if quiet and "r" not in opts:  # as %prun -q: nothing shown, nothing returned
                return None
            return result

        @line_magic  # type: ignore[misc, unused-ignore]
        def flprun(self, line: str) -> LineResult:
            """Line timings, as line_profiler's ``%lprun``: ``%flprun -f func [-f func2]
            statement`` times each line of the functions while the statement runs."""
            from importlib import import_module

            from .lines import LineProfiler

            opts, stmt = self.parse_options(
                line, "f:m:u:sD:T:", list_all=True, posix=False, strict=True
            )
            funcs = opts.get("f", [])
            modules = opts.get("m", [])
            if not funcs and not modules:
                raise UsageError("%flprun: give at least one function with -f func")
            if not stmt.strip():
                raise UsageError("%flprun: give a statement to run")
            unit = _number(_last(opts, "u"), "-u", float, 0, None, magic="%flprun")
            if unit == 0:
                raise UsageError("%flprun -u: expected a unit in seconds above 0, got 0")
            shell = _shell(self.shell)
            ns = shell.user_ns
            lp = LineProfiler()
            for flag, names, add in (
                ("-m", modules, lp.add_module),
                ("-f", funcs, lp.add_function),
            ):
                for name in names:
                    try:
                        # as %lprun: -m names a module to import, -f an expression
                        target = import_module(name) if flag == "-m" else eval(name, ns, ns)
                    except Exception as e:
                        how = "import" if flag == "-m" else "evaluate"
                        raise UsageError(
                            f"%flprun {flag} {name}: could not {how} it: {type(e).__name__}: {e}"
                        ) from None
                    try:
                        add(target)
                    except (TypeError, ValueError) as e:
                        raise UsageError(f"%flprun {flag} {name}: {e}") from None
            compiled = compile(shell.transform_cell(stmt), "<flprun>", "exec")
            caught = _run_caught(lp, compiled, ns)
            targets = "".join(f" -m {m}" for m in modules) + "".join(f" -f {f}" for f in funcs)
            result = LineResult(
                lp.get_stats(),
                f"%flprun{targets} {stmt.strip()}",
                output_unit=1e-6 if unit is None else unit,
                stripzeros="s" in opts,
            )
            dump = _last(opts, "D")
            if dump:
                lp.dump_stats(dump)
                print(f"*** Profile stats pickled to file {dump!r}.")
            text_file = _last(opts, "T")
            if text_file:
                with open(text_file, "w", encoding="utf-8") as f:
                    f.write(result.text())
                print(f"*** Profile printout saved to text file {text_file!r}.")
            if caught is not None:  # as %lprun: the cell goes on, the timings are returned
                print(_CAUGHT.format(type(caught).__name__))
            return result

    return FastprofMagics


def _run_caught(prof: Any, compiled: Any, ns: Any) -> Optional[BaseException]:
    """Runs compiled in ns with prof on.  Returns None when it ran to its end, or the
    SystemExit or KeyboardInterrupt that ended it (caught, as %prun and %lprun catch them:
    the profile of what ran is still shown); any other error propagates.  prof is off before
    anything else of fastprof runs (no frame of the magic's own is profiled)."""
    caught: Optional[BaseException] = None
    prof.enable()
    try:
        exec(compiled, ns, ns)
    except (SystemExit, KeyboardInterrupt) as e:
        caught = e
    finally:
        prof.disable()
    return caught


def _prun_limit(text: str, nrows: int) -> int:
    """%prun's -l as a row count: an int N, or a fraction (0-1] of the rows.  UsageError
    for anything else (a regular expression: filter ``result.stats`` instead)."""
    from IPython.core.error import UsageError  # type: ignore[import-not-found, unused-ignore]

    try:
        if "." not in text and "e" not in text.lower():
            n = int(text)
            if n >= 1:
                return n
        else:
            frac = float(text)
            if 0 < frac <= 1:
                return max(1, math.ceil(frac * nrows))
    except ValueError:
        pass
    raise UsageError(
        f"%fastprof -l: expected a number of rows or a fraction between 0 and 1, got "
        f"{text!r} (to keep the functions matching a regular expression, use "
        f"result.stats.filter(REGEX))"
    )


def _last(opts: Any, name: str) -> Any:
    """The last value given for an option parsed with list_all (an option given twice: the
    later one wins, as on a command line), or None."""
    values = opts.get(name)
    return values[-1] if values else None


def _shell(shell: Any) -> Any:
    """The shell the magic runs in (a magic is always registered on one): its ``user_ns`` is
    the namespace the user's code runs in."""
    if shell is None:
        from IPython.core.error import UsageError  # type: ignore[import-not-found, unused-ignore]

        raise UsageError("fastprof's magics need an IPython shell")
    return shell


def _number(
    text: Any,
    name: str,
    kind: Any,
    low: float,
    high: Optional[float],
    *,
    magic: str = "%fastprof",
) -> Any:
    """text read as a kind between low and high (None when not given).  UsageError naming
    the magic's option otherwise."""
    from IPython.core.error import UsageError  # type: ignore[import-not-found, unused-ignore]

    if text is None:
        return None
    try:
        x = kind(text)
    except ValueError:
        raise UsageError(f"{magic} {name}: expected a number, got {text!r}") from None
    if not x >= low or (high is not None and x > high):
        bound = f"between {low:g} and {high:g}" if high is not None else f"at least {low:g}"
        raise UsageError(f"{magic} {name}: expected a number {bound}, got {text!r}")
    return x


def __getattr__(name: str) -> Any:
    if name == "FastprofMagics":
        return _magics_class()
    raise AttributeError(name)


def load_ipython_extension(ipython: Any) -> None:
    """Registers the magics (``%load_ext fastprof``)."""
    ipython.register_magics(_magics_class())
