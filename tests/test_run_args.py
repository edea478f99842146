"""``fastprof run``'s command line read without argparse (fastprof._run_args): the same
options argparse reads, and a profiled script's own imports of argparse, shutil, signal and
struct in its profile, as under cProfile."""

from __future__ import annotations

import json
import os
import pstats
import random
import subprocess
import sys
import textwrap
from typing import Any, List, Optional

import pytest

from fastprof import _run_args, cli


def _argparse_reading(head: List[str]) -> Optional[dict]:
    """vars() of what argparse's parser reads from head, or None where it refuses it."""
    try:
        return vars(cli._run_parser().parse_args(head))
    except SystemExit:
        return None


# command lines as users write them: read without argparse, exactly as argparse reads them
COMMON = [
    [],
    ["-o", "out.prof"],
    ["-oout.prof"],
    ["--outfile", "x.prof", "-s", "cumtime", "--top", "5"],
    ["--outfile=x.prof", "--sort=ncalls", "--top=7"],
    ["-s", "cumulative", "--all", "--no-builtins", "--clock", "cpu"],
    ["--lines"],
    ["--lines-of", "mod:f", "--lines-of", "pkg.mod:C.g", "--lines-of=a.py:h"],
    ["--subprocesses", "--no-worker-startup", "--run-dir", "d"],
    ["--timeline", "t.json", "--timeline-buffer", "100", "--timeline-min-us", "0.5"],
    ["--format", "speedscope", "--html", "r.html", "--min-percent", "2.5"],
    ["--expand-libs", "--merge-threads", "--threads", "--color", "never"],
    ["-o", "", "-m", "json.tool"],
    ["--top", "+3", "--min-percent", "1e1", "--timeline-min-us", " 2 "],
    ["-o", "a.prof", "-o", "b.prof", "--clock", "wall", "--clock", "process_cpu"],
]

# left to argparse: abbreviations, values that start with '-', bad values, --help
LEFT = [
    ["--out", "x.prof"],
    ["--top", "-3"],
    ["--top", "0"],
    ["--top", "x"],
    ["--clock", "gpu"],
    ["--format", "svg"],
    ["--min-percent", "101"],
    ["--timeline-min-us", "inf"],
    ["-o"],
    ["-o", "-x"],
    ["--outfile=-x"],
    ["--lines=1"],
    ["--help"],
    ["-h"],
    ["--nope"],
    ["-o=x.prof"],
    ["--line"],
]


@pytest.mark.parametrize("head", COMMON, ids=repr)
def test_common_command_lines_read_as_argparse_reads_them(head: List[str]) -> None:
    fast = _run_args.read(head)
    assert fast is not None, f"{head} should be read without argparse"
    assert vars(fast) == _argparse_reading(head)


@pytest.mark.parametrize("head", LEFT, ids=repr)
def test_the_rest_is_left_to_argparse(head: List[str], capsys: Any) -> None:
    assert _run_args.read(head) is None


def _random_head(rng: random.Random) -> List[str]:
    """A command line of the table's options with values good and bad, in all spellings."""
    values = ["x.prof", "", "5", "0", "-1", "2.5", "cpu", "wall", "never", "text", "pstats",
              "tottime", "nan", "1e308", "m:f", "-o", "--top", "a=b", " 7", "٣"]  # fmt: skip
    head: List[str] = []
    for _ in range(rng.randrange(6)):
        option = rng.choice(_run_args.RUN_OPTIONS)
        flag = rng.choice(option.flags)
        if option.action == "store_true":
            head.append(flag if rng.random() < 0.9 else flag + "=1")
            continue
        value = rng.choice(values + list(option.choices or ()))
        form = rng.randrange(4)
        if form == 0 and flag.startswith("--"):
            head.append(f"{flag}={value}")
        elif form == 1 and not flag.startswith("--"):
            head.append(flag + value)
        elif form == 2 and flag.startswith("--") and len(flag) > 4:
            head += [flag[: rng.randrange(3, len(flag))], value]  # an abbreviation
        else:
            head += [flag, value]
    return head


@pytest.mark.parametrize("seed", range(4))
def test_every_command_line_the_reader_takes_is_argparse_s_reading(seed: int) -> None:
    """Random command lines over the whole table: where the reader takes one, argparse reads
    the same values; where argparse refuses one, the reader leaves it to argparse."""
    rng = random.Random(seed)
    taken = 0
    for _ in range(300):
        head = _random_head(rng)
        fast = _run_args.read(head)
        slow = _argparse_reading(head)
        if fast is not None:
            taken += 1
            assert vars(fast) == slow, head
    assert taken > 50  # the reader takes most of them: the comparison is not vacuous


def test_split_finds_the_target_after_every_kind_of_option() -> None:
    split = _run_args.split
    assert split(["--out", "x", "s.py", "a"]) == (["--out", "x"], ["s.py", "a"])
    assert split(["--lines", "s.py"]) == (["--lines"], ["s.py"])
    assert split(["--lines-of", "m:f", "s.py"]) == (["--lines-of", "m:f"], ["s.py"])
    assert split(["--timeline-m", "1", "s.py"]) == (["--timeline-m", "1"], ["s.py"])
    # --h could be --help or --html: argparse refuses it, as it did before the split
    assert split(["--h", "s.py"]) == (["--h"], ["s.py"])


PROBE = textwrap.dedent("""
    import json, sys
    json.dump(sorted(sys.modules), open(sys.argv[1], "w"))
    import argparse, shutil, signal, struct
    def parse():
        return argparse.ArgumentParser(prog="probe").parse_args([])
    parse()
""")


def _modules_at_start(tmp_path: Any, *runner: str) -> set:
    out = tmp_path / f"mods{len(list(tmp_path.iterdir()))}.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run(
        [sys.executable, *runner, str(tmp_path / "probe.py"), str(out)],
        capture_output=True, text=True, env=env, timeout=120, cwd=str(tmp_path),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return set(json.loads(out.read_text()))


_NEW = sys.version_info >= (3, 12)
# what each option loads before the script beyond fastprof's own modules (docs/cli.md)
_FIRST = {
    "-o": set(),
    "--html": set(),
    "--threads": set(),
    "--run-dir": set(),
    "--subprocesses": {"threading", "warnings"},
    "--timeline": set(),
    "--lines": set(),
    "--lines-of": set(),
}


def _options(option: str, tmp_path: Any) -> List[str]:
    if option == "--run-dir":
        return ["--run-dir", str(tmp_path / "rd"), "-o", "f.prof"]
    if option in ("--html", "--timeline"):
        return [option, str(tmp_path / "out"), "-o", "f.prof"]
    if option == "-o":
        return ["-o", "f.prof"]
    if option == "--lines-of":
        return [option, str(tmp_path / "probe.py") + ":parse", "-o", "f.prof"]
    return [option, "-o", "f.prof"] if option != "--threads" else [option]


@pytest.mark.parametrize("option", sorted(_FIRST))
def test_a_run_script_finds_no_module_loaded_that_cprofile_would_not_have(
    tmp_path: Any, option: str
) -> None:
    (tmp_path / "probe.py").write_text(PROBE)
    plain = _modules_at_start(tmp_path)
    under_cprofile = _modules_at_start(tmp_path, "-m", "cProfile", "-o", str(tmp_path / "c"))
    under_fastprof = _modules_at_start(
        tmp_path, "-m", "fastprof", "run", *_options(option, tmp_path)
    )
    extra = {m for m in under_fastprof - plain - under_cprofile if not m.startswith("fastprof")}
    # __future__ (its name less the leading underscores) and atexit: fastprof's own modules;
    # threading below 3.12: the profiler's hook for threads started later
    # (threading.setprofile), which cProfile does not profile
    allowed = {"future__", "atexit"} | _FIRST[option] | ({"threading"} if not _NEW else set())
    assert {m.lstrip("_") for m in extra} <= allowed, extra
    assert not {"argparse", "shutil", "signal", "tempfile"} & under_fastprof


# what typing's caches hold when the script starts (the probe's "modules": their sizes)
TYPING_PROBE = textwrap.dedent("""
    import json, sys, typing
    sizes = [
        f.__self__.cache_info().currsize
        for f in typing._cleanups
        if hasattr(getattr(f, "__self__", None), "cache_info")
    ]
    json.dump([sum(sizes)], open(sys.argv[1], "w"))
    def parse():  # what --lines-of names
        pass
""")


@pytest.mark.parametrize("option", sorted(_FIRST))
def test_typing_s_caches_at_the_script_s_start_hold_what_plain_python_s_do(
    tmp_path: Any, option: str
) -> None:
    """fastprof's modules loaded before the script subscript no typing generic at import:
    that would fill typing's caches, and the script's own first `Dict[str, int]` would then
    show none of the calls it makes under cProfile."""
    (tmp_path / "probe.py").write_text(TYPING_PROBE)
    (plain,) = _modules_at_start(tmp_path)
    (under_fastprof,) = _modules_at_start(
        tmp_path, "-m", "fastprof", "run", *_options(option, tmp_path)
    )
    assert under_fastprof <= plain


def test_the_script_s_own_imports_show_in_its_profile(tmp_path: Any) -> None:
    (tmp_path / "probe.py").write_text(PROBE)
    _modules_at_start(tmp_path, "-m", "fastprof", "run", "-o", "f.prof", "--top", "3")
    st = pstats.Stats(str(tmp_path / "f.prof"))
    modules = {os.path.basename(k[0]) for k in st.stats if k[2] == "<module>"}  # type: ignore
    assert {"argparse.py", "shutil.py", "signal.py", "struct.py"} <= modules, modules
