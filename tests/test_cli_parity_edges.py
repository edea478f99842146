"""`python -m fastprof run` against plain `python` on the command lines cProfile users write:
the script's own BrokenPipeError, a script folder holding json.py or html.py, a symlinked
script, an output that cannot encode the tree's lines, abbreviated long options, `-m ''`, and
a `-m` package whose own import fails."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Dict, List, Optional

from test_cli_run import run_cli


def _python(args: List[str], cwd: Any, env: Optional[Dict[str, str]] = None) -> Any:
    full = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    full.update(env or {})
    return subprocess.run(
        [sys.executable, *args], cwd=str(cwd), env=full, capture_output=True, text=True, timeout=90
    )


def test_the_scripts_own_broken_pipe_is_its_error(tmp_path: Any) -> None:
    (tmp_path / "s.py").write_text('def send():\n    raise BrokenPipeError(32, "gone")\n\nsend()\n')
    plain = _python(["s.py"], tmp_path)
    r = run_cli(["-o", "f.prof", "s.py"], tmp_path)
    assert plain.returncode == r.returncode == 1
    assert "BrokenPipeError: [Errno 32] gone" in r.stderr and "in send" in r.stderr


def test_the_report_does_not_import_the_scripts_modules(tmp_path: Any) -> None:
    (tmp_path / "s.py").write_text("print('hello')\n")
    for name in ("sysconfig", "json", "html"):
        (tmp_path / f"{name}.py").write_text(f"raise SystemExit('the folder s {name}.py ran')\n")
    for extra in ([], ["--html", "r.html"], ["-o", "s.prof"]):
        r = run_cli([*extra, "s.py"], tmp_path)
        assert r.returncode == 0, (extra, r.stderr)
        assert "ran" not in r.stderr and r.stdout.startswith("hello")
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")


def test_a_symlinked_scripts_folder_is_its_targets(tmp_path: Any) -> None:
    real, links = tmp_path / "real", tmp_path / "bin"
    real.mkdir()
    links.mkdir()
    (real / "helper.py").write_text("WHERE = 'real'\n")
    (real / "tool.py").write_text("import sys, helper\nprint(sys.path[0], helper.WHERE)\n")
    (links / "tool.py").symlink_to(real / "tool.py")
    plain = _python([str(links / "tool.py")], tmp_path)
    r = run_cli(["-s", "calls", str(links / "tool.py")], tmp_path)
    assert plain.returncode == r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == plain.stdout.strip() == f"{real} real"


def test_an_ascii_output_gets_the_tree_in_ascii(tmp_path: Any) -> None:
    (tmp_path / "s.py").write_text(
        "def f():\n    return sum(range(9))\n\nfor _ in range(3):\n    f()\n"
    )
    full = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    full["PYTHONIOENCODING"] = "ascii"
    r = subprocess.run(
        [sys.executable, "-m", "fastprof", "--min-percent", "0", "s.py"],
        cwd=str(tmp_path),
        env=full,
        capture_output=True,
        timeout=90,
    )
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode("ascii")  # nothing else in it
    assert "`- " in text and "f  s.py:1" in text


def test_abbreviated_long_options_take_their_values(tmp_path: Any) -> None:
    (tmp_path / "argv.py").write_text("import sys\nprint(sys.argv[1:])\n")
    r = run_cli(["--out", "a.prof", "--so", "cumulative", "argv.py", "X"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "['X']" and (tmp_path / "a.prof").exists()
    r = run_cli(["--so", "cumulative", "--min-p", "0", "argv.py", "X"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "['X']" and "sorted by cumulative" in r.stdout


def test_an_empty_module_name_and_a_package_whose_import_fails(tmp_path: Any) -> None:
    r = run_cli(["-m", ""], tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith("fastprof run: error: -m ")
    pkg = tmp_path / "badpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import nonexistent_dep\n")
    (pkg / "m.py").write_text("print('ran')\n")
    plain = _python(["-m", "badpkg.m"], tmp_path)
    r = run_cli(["-m", "badpkg.m"], tmp_path)
    assert plain.returncode == r.returncode == 1
    assert "No module named 'nonexistent_dep'" in r.stderr
    assert 'badpkg/__init__.py", line 1' in r.stderr  # the traceback, as python's
    r = run_cli(["-m", "nopkg.m"], tmp_path)
    assert r.returncode == 2 and "No module named 'nopkg'" in r.stderr


def test_a_script_that_does_not_compile_gets_pythons_message(tmp_path: Any) -> None:
    (tmp_path / "s.py").write_text("def f(:\n    pass\n")
    plain = _python(["s.py"], tmp_path)
    r = run_cli(["s.py"], tmp_path)
    assert plain.returncode == r.returncode == 1
    assert r.stderr == plain.stderr  # File "...s.py", line 1 ... SyntaxError, no fastprof frame
    (tmp_path / "n.py").write_bytes(b"x = 1\0\n")
    r = run_cli(["n.py"], tmp_path)
    assert r.returncode == 1 and "null bytes" in r.stderr and "Traceback" not in r.stderr


def test_a_tree_that_cannot_be_saved_is_a_note_even_under_w_error(tmp_path: Any) -> None:
    (tmp_path / "s.py").write_text("import sys\nsys.exit(3)\n")
    (tmp_path / "p.prof.tree.json").mkdir()  # the tree's file cannot be written
    r = run_cli(["-o", "p.prof", "s.py"], tmp_path, prog=("-W", "error", "-m", "fastprof"))
    assert r.returncode == 3, r.stderr
    assert "fastprof: the call tree was not saved beside" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_deleted_current_folder_still_runs_a_script_given_by_its_path(tmp_path: Any) -> None:
    script = tmp_path / "work.py"
    script.write_text("print(sum(range(10)))\n")
    gone = tmp_path / "gone"
    gone.mkdir()
    full = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    cmd = (
        f'cd "{gone}" && rmdir "{gone}" && exec "{sys.executable}" -m fastprof -s calls "{script}"'
    )
    r = subprocess.run(["sh", "-c", cmd], env=full, capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "45" and "work.py:1(<module>)" in r.stdout


NO_STDOUT = """\
import sys
import fastprof

def work():
    return sum(range(10))

p = fastprof.Profile()
p.runcall(work)
fastprof.Stats(p).print()
with fastprof.profile():
    work()

@fastprof.profile(report="call")
def decorated():
    return work()

print(decorated(), file=sys.stderr)
"""


def test_reports_without_a_stdout_print_nothing_and_raise_nothing(tmp_path: Any) -> None:
    """A program run without a console (sys.stdout is None): the reports are skipped, as
    print() skips them, and the decorated call still returns its value."""
    (tmp_path / "s.py").write_text(NO_STDOUT)
    full = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    cmd = f'exec "{sys.executable}" s.py >&-'
    r = subprocess.run(
        ["sh", "-c", cmd], cwd=str(tmp_path), env=full, capture_output=True, text=True, timeout=90
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == "45"


def test_no_temporary_folder_for_a_job_is_one_line(
    tmp_path: Any, monkeypatch: Any, capsys: Any
) -> None:
    from fastprof import cli

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cli.os, "mkdir", refuse)  # no candidate folder takes a new one
    (tmp_path / "s.py").write_text("print('ran')\n")
    assert cli.main(["run", "--subprocesses", str(tmp_path / "s.py")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fastprof run: error: --subprocesses needs a temporary folder")
    assert "TMPDIR" in err and "Traceback" not in err


def test_a_copy_without_the_compiled_core_says_so(tmp_path: Any) -> None:
    import shutil

    import fastprof

    pkg = tmp_path / "fastprof"
    shutil.copytree(
        os.path.dirname(fastprof.__file__), pkg, ignore=shutil.ignore_patterns("*.so", "*.pyd")
    )
    full = dict(os.environ, PYTHONPATH=str(tmp_path))
    r = subprocess.run(
        [sys.executable, "-c", "import fastprof"],
        env=full,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert r.returncode == 1
    assert "fastprof's compiled core (fastprof._fastprof) could not be imported" in r.stderr
    assert "built for this Python" in r.stderr


OOM_SCRIPT = """\
import resource
ns = {}
exec("\\n".join(f"def f{i}(): return {i}" for i in range(30000)), ns)
fs = [ns[f"f{i}"] for i in range(30000)]
def fill():
    keep = []
    size = 1 << 24
    while size >= 64:
        try:
            keep.append(bytearray(size))
        except MemoryError:
            size //= 2
    return keep
def main():
    keep = fill()
    try:
        for f in fs:
            f()
    except MemoryError:
        pass
    del keep
    print("done")
main()
"""


def test_a_hook_out_of_memory_gives_one_line_and_the_scripts_status(tmp_path: Any) -> None:
    """Memory runs out inside the profiler's hook: no report of numbers that do not add up,
    no traceback of fastprof's, one line that says why, and the script's exit status."""
    import pytest

    if "asan" in os.environ.get("LD_PRELOAD", "") or os.environ.get("ASAN_OPTIONS"):
        pytest.skip("an address-space limit cannot be set under AddressSanitizer")
    (tmp_path / "mem.py").write_text(OOM_SCRIPT)
    full = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    cmd = f'ulimit -v 400000 && exec "{sys.executable}" -m fastprof -s tottime mem.py'
    r = subprocess.run(
        ["sh", "-c", cmd], cwd=str(tmp_path), env=full, capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in r.stderr, r.stderr
    if "no report" not in r.stderr:
        pytest.skip("memory did not run out inside a hook on this run")
    assert r.returncode == 0 and r.stdout.strip() == "done"
    assert "fastprof: no report: the profile stopped recording" in r.stderr
    assert "MemoryError" in r.stderr
