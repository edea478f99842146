"""`python -m fastprof run` against `python -m cProfile`: multiprocessing start methods, where
-o is written, the profiler's own frames, and --lines-of naming the running script.

Each test runs the command line in a subprocess, bounded by a timeout that kills the whole
process group (pool workers included), so a hang fails the test instead of the suite.
"""

from __future__ import annotations

import marshal
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any, Dict, List, Optional, Tuple

import pytest

import fastprof

TIMEOUT = 90


def _env() -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def run_cli(
    args: List[str],
    cwd: Any = None,
    *,
    prog: Tuple[str, ...] = ("-m", "fastprof"),
    timeout: int = TIMEOUT,
) -> subprocess.CompletedProcess:
    """Runs ``python -m fastprof ARGS`` (or ``python PROG ARGS``); fails the test on a hang."""
    cmd = [sys.executable, *prog, *args]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=cwd,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{cmd} did not finish in {timeout} s (hung)\nstdout:\n{out}\nstderr:\n{err}")
    finally:
        try:  # leftover workers of the process group
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def run_plain(args: List[str], cwd: Any) -> subprocess.CompletedProcess:
    """Runs ``python ARGS`` without fastprof: what a profiled run must look like."""
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=cwd, timeout=TIMEOUT
    )


def load(path: Any) -> Dict[Any, Any]:
    with open(path, "rb") as f:
        data = marshal.load(f)
    assert isinstance(data, dict)
    return data


# -- 1. multiprocessing with spawn and forkserver ------------------------------------------

POOL_SCRIPT = textwrap.dedent("""
    import sys
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    def square(x):
        return x * x

    def main(method, kind):
        ctx = mp.get_context(method)
        if kind == "pool":
            with ctx.Pool(2) as pool:
                total = sum(pool.map(square, range(10)))
        else:
            with ProcessPoolExecutor(2, mp_context=ctx) as ex:
                total = sum(ex.map(square, range(10)))
        print("result", total)

    if __name__ == "__main__":
        main(sys.argv[1], sys.argv[2])
""")

METHODS = [
    m for m in ("spawn", "forkserver") if m in __import__("multiprocessing").get_all_start_methods()
]


@pytest.mark.parametrize("kind", ["pool", "executor"])
@pytest.mark.parametrize("method", METHODS)
def test_script_with_a_process_pool_completes(tmp_path: Any, method: str, kind: str) -> None:
    script = tmp_path / "pooled.py"
    script.write_text(POOL_SCRIPT)
    prof = tmp_path / "pooled.prof"
    r = run_cli(["run", "-o", str(prof), str(script), method, kind], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "result 285" in r.stdout
    stats = load(prof)
    names = {(os.path.basename(k[0]), k[2]) for k in stats}
    assert ("pooled.py", "<module>") in names and ("pooled.py", "main") in names
    # square ran in the workers, not in the parent
    assert ("pooled.py", "square") not in names


@pytest.mark.parametrize("kind", ["pool", "executor"])
def test_module_with_a_process_pool_completes(tmp_path: Any, kind: str) -> None:
    pkg = tmp_path / "fp_pool_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "job.py").write_text(POOL_SCRIPT)
    r = run_cli(["run", "--all", "-m", "fp_pool_pkg.job", METHODS[0], kind], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "result 285" in r.stdout
    assert re.search(r"job\.py:\d+\(<module>\)", r.stdout)  # its line differs by version


def test_main_module_is_set_up_as_python_does(tmp_path: Any) -> None:
    probe = textwrap.dedent("""
        import sys, os
        m = sys.modules["__main__"]
        print("spec", m.__spec__)
        print("file", m.__file__ == os.path.abspath(sys.argv[0]))
        print("path0", sys.path[0] == os.path.dirname(os.path.abspath(sys.argv[0])))
        print("argv", sys.argv[1:])
        print("same", m.__dict__ is globals())
        def annotated(x: int) -> None:
            pass
        print("annotations", annotated.__annotations__)  # no __future__ flag leaks in
        print("module annotations", __annotations__)
    """)
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "probe.py").write_text(probe)
    plain = run_plain(["sub/probe.py", "a"], tmp_path)
    r = run_cli(["run", "sub/probe.py", "a"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    expected = plain.stdout
    assert expected.startswith("spec None\nfile True\npath0 True\nargv ['a']\nsame True\n")
    assert r.stdout.startswith(expected)


def test_script_state_stays_for_its_atexit_handlers_and_threads(tmp_path: Any) -> None:
    # after the top level returns, the script's atexit handlers and its threads still see its
    # sys.argv and its __main__ (whose classes pickle), as without fastprof
    probe = textwrap.dedent("""
        import atexit, pickle, sys, threading, time
        X = 42
        class K:
            pass
        def late():
            time.sleep(0.2)
            print("thread", type(pickle.loads(pickle.dumps(K()))).__name__, flush=True)
        def bye():
            import __main__
            print("atexit", sys.argv[1:], getattr(__main__, "X", None))
            print("pickle", type(pickle.loads(pickle.dumps(K()))).__name__)
        atexit.register(bye)
        threading.Thread(target=late).start()
    """)
    (tmp_path / "probe.py").write_text(probe)
    plain = run_plain(["probe.py", "a", "b"], tmp_path)
    assert plain.stdout == "thread K\natexit ['a', 'b'] 42\npickle K\n", plain.stderr
    r = run_cli(["run", "-o", str(tmp_path / "p.prof"), "probe.py", "a", "b"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain.stdout


@pytest.mark.skipif(sys.version_info < (3, 11), reason="-P / PYTHONSAFEPATH is 3.11+")
@pytest.mark.parametrize("module", [False, True])
def test_safe_path_adds_no_folder_to_sys_path(tmp_path: Any, module: bool) -> None:
    # python -P puts neither the script's folder nor the current one first: sys.path[0] stays
    # the first PYTHONPATH entry, where the script's own library may be
    lib, app = tmp_path / "lib", tmp_path / "app"
    lib.mkdir()
    app.mkdir()
    (lib / "fp_safe_lib.py").write_text("NAME = 'lib ok'\n")
    (app / "fp_safe_app.py").write_text("import sys, fp_safe_lib\nprint(fp_safe_lib.NAME)\n")
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([str(lib), str(app), env["PYTHONPATH"]])
    env["PYTHONSAFEPATH"] = "1"
    target = ["-m", "fp_safe_app"] if module else ["app/fp_safe_app.py"]
    args = [sys.executable, "-m", "fastprof", "run", "-o", str(tmp_path / "p.prof"), *target]
    r = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "lib ok\n"


def test_module_main_is_set_up_as_python_dash_m(tmp_path: Any) -> None:
    pkg = tmp_path / "fp_probe_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "probe.py").write_text(
        textwrap.dedent("""
        import sys, os
        m = sys.modules["__main__"]
        print("spec", m.__spec__.name, m.__package__, os.path.basename(m.__file__))
        print("argv0", os.path.basename(sys.argv[0]), sys.argv[1:])
        print("path0", sys.path[0] == os.getcwd())
    """)
    )
    plain = run_plain(["-m", "fp_probe_pkg.probe", "b"], tmp_path)
    assert plain.stdout == (
        "spec fp_probe_pkg.probe fp_probe_pkg probe.py\nargv0 probe.py ['b']\npath0 True\n"
    )
    r = run_cli(["run", "-m", "fp_probe_pkg.probe", "b"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(plain.stdout)


def test_missing_module_is_a_usage_error(tmp_path: Any) -> None:
    r = run_cli(["run", "-m", "fp_no_such_module_here"], cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "fastprof run: error: -m fp_no_such_module_here: No module named 'fp_no_such_module_here'"
    ]


# -- 2. -o resolved and checked before the script runs -------------------------------------

CHDIR_SCRIPT = textwrap.dedent("""
    import os, sys
    print("script ran")
    os.makedirs("elsewhere", exist_ok=True)
    os.chdir("elsewhere")
    def f():
        return 1
    f()
""")


@pytest.mark.parametrize("mode", [[], ["--lines-of", "__main__:f"]])
def test_outfile_is_resolved_before_the_script_changes_directory(
    tmp_path: Any, mode: List[str]
) -> None:
    script = tmp_path / "mover.py"
    script.write_text(CHDIR_SCRIPT)
    r = run_cli(["run", *mode, "-o", "out.prof", "mover.py"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out.prof").is_file()
    assert not (tmp_path / "elsewhere" / "out.prof").exists()
    assert str(tmp_path / "out.prof") in r.stderr


def _unwritable_targets(tmp_path: Any) -> List[Tuple[str, str]]:
    (tmp_path / "afile").write_text("")
    return [
        (str(tmp_path / "no_such_dir" / "x.prof"), "no such directory"),
        (str(tmp_path), "is a directory"),
        (str(tmp_path / "afile" / "x.prof"), "not a directory"),
    ]


@pytest.mark.parametrize("which", [0, 1, 2])
def test_unwritable_outfile_fails_before_the_script_runs(tmp_path: Any, which: int) -> None:
    script = tmp_path / "side.py"
    script.write_text("print('script ran')\nopen('ran.txt', 'w').close()\n")
    target, why = _unwritable_targets(tmp_path)[which]
    r = run_cli(["run", "-o", target, str(script)], cwd=tmp_path)
    assert r.returncode == 2
    assert "script ran" not in r.stdout and not (tmp_path / "ran.txt").exists()
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"fastprof run: error: -o {target}: cannot write the profile")
    assert why in lines[0]


@pytest.mark.parametrize(
    "outputs",
    [
        ["--timeline", "same.out", "-o", "same.out"],
        ["--timeline", "x.json", "--html", "./x.json"],
        ["-o", "y.prof", "--html", "sub/../y.prof"],
        ["-o", "link.prof", "--html", "z.html"],  # link.prof: a link to z.html
        ["-o", "old.prof", "--html", "old.prof"],  # a file there already
    ],
)
def test_two_outputs_naming_one_file_fail_before_the_script_runs(
    tmp_path: Any, outputs: List[str]
) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "old.prof").write_text("kept")
    os.symlink("z.html", tmp_path / "link.prof")
    script = tmp_path / "side.py"
    script.write_text("print('script ran')\n")
    r = run_cli(["run", *outputs, str(script)], cwd=tmp_path)
    assert r.returncode == 2 and "script ran" not in r.stdout
    assert "the same file as" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert (tmp_path / "old.prof").read_text() == "kept"
    # devices may be shared: both to /dev/null
    r = run_cli(["run", "-o", os.devnull, "--html", os.devnull, str(script)], cwd=tmp_path)
    assert r.returncode == 0 and "script ran" in r.stdout


@pytest.mark.parametrize("option", ["-o", "--timeline", "--html"])
def test_an_empty_output_name_is_refused_as_such(tmp_path: Any, option: str) -> None:
    script = tmp_path / "side.py"
    script.write_text("print('script ran')\n")
    r = run_cli(["run", f"{option}=", str(script)], cwd=tmp_path)
    assert r.returncode == 2 and "script ran" not in r.stdout
    assert f"{option}: expected a file name" in r.stderr


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes into a read-only folder"
)
def test_outfile_without_permission_fails_before_the_script_runs(tmp_path: Any) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    script = tmp_path / "side.py"
    script.write_text("print('script ran')\n")
    try:
        r = run_cli(["run", "-o", str(ro / "x.prof"), str(script)], cwd=tmp_path)
    finally:
        ro.chmod(0o700)
    assert r.returncode == 2 and "script ran" not in r.stdout
    assert "Permission denied" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_checking_the_outfiles_leaves_the_script_s_folder_untouched(tmp_path: Any) -> None:
    """-o and --timeline are checked without making a file: a file made and removed would
    change the folder's time stamp, and the script's first import would read the folder again,
    a call `python -m cProfile` does not show."""
    script = tmp_path / "side.py"
    seen = tmp_path / "elsewhere"
    seen.mkdir()
    script.write_text(
        "import os, sys\n"
        f"open({str(seen / 'm')!r}, 'w').write(str(os.stat(os.path.dirname(__file__)).st_mtime_ns))\n"
    )
    before = os.stat(tmp_path).st_mtime_ns
    time.sleep(0.05)  # past the file system's clock tick: a change would show
    r = run_cli(["run", "-o", "x.prof", "--timeline", "t.json", str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert int((seen / "m").read_text()) == before
    assert (tmp_path / "x.prof").exists() and (tmp_path / "t.json").exists()


@pytest.mark.parametrize("read_only", [False, True])
def test_an_outfile_the_system_refuses_names_why(
    tmp_path: Any, monkeypatch: Any, read_only: bool
) -> None:
    """The answer of os.access, as a user without the right (or a read-only mount) gets it:
    root, running the tests, is let write anywhere."""
    from fastprof import cli

    class Vfs:
        f_flag = os.ST_RDONLY if read_only else 0

    asked = []
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: asked.append((p, mode)) and False)
    monkeypatch.setattr(os, "statvfs", lambda p: Vfs(), raising=False)
    with pytest.raises(cli._UsageError) as e:
        cli._outfile(str(tmp_path / "x.prof"))
    why = "Read-only file system" if read_only else "Permission denied"
    assert str(e.value) == f"-o {tmp_path / 'x.prof'}: cannot write the profile: {why}"
    assert asked == [(str(tmp_path), os.W_OK | os.X_OK)]  # the folder: the file is not there
    if hasattr(os, "mkfifo"):  # a file there that is not a regular file: asked of it
        os.mkfifo(tmp_path / "x.prof")
        with pytest.raises(cli._UsageError):
            cli._outfile(str(tmp_path / "x.prof"))
        assert asked[1] == (str(tmp_path / "x.prof"), os.W_OK)
        assert sorted(os.listdir(tmp_path)) == ["x.prof"]


@pytest.mark.parametrize("case", ["dangling", "loop", "long", "proc"])
def test_an_outfile_that_cannot_be_written_is_refused_before_the_script_runs(
    tmp_path: Any, case: str
) -> None:
    """Paths whose file the check could not open: a link into a missing folder, a loop of
    links, a name longer than the system's, a file of /proc (which root may not write)."""
    script = tmp_path / "side.py"
    script.write_text("print('script ran')\n")
    if case == "dangling":
        target, why = tmp_path / "d.prof", "it links into no such directory"
        os.symlink(tmp_path / "missing" / "x.prof", target)
    elif case == "loop":
        target, why = tmp_path / "l.prof", "Too many levels of symbolic links"
        os.symlink(tmp_path / "l.prof", target)
    elif case == "long":
        target, why = tmp_path / ("x" * 300 + ".prof"), "File name too long"
    else:
        target, why = __import__("pathlib").Path("/proc/version"), ""
        if not target.exists():
            pytest.skip("no /proc/version")
    r = run_cli(["run", "-o", str(target), str(script)], cwd=tmp_path)
    assert r.returncode == 2 and "script ran" not in r.stdout, (r.stdout, r.stderr)
    assert f"-o {target}: cannot write the profile: {why}" in r.stderr, r.stderr


# -- 3. none of the profiler's own frames in the report -----------------------------------

FRAMES_SCRIPT = textwrap.dedent("""
    def leaf(x):
        return len([x]) + abs(-x)

    def middle(n):
        out = []
        for i in range(n):
            out.append(leaf(i))
        return sum(out)

    middle(7)
""")


def _counts(stats: Dict[Any, Any]) -> Dict[Tuple[str, str], int]:
    return {(os.path.basename(k[0]), k[2]): v[1] for k, v in stats.items()}


def _fastprof_keys(stats: Dict[Any, Any]) -> List[Any]:
    pkg = os.path.dirname(os.path.abspath(fastprof.__file__))
    return [
        k for k in stats if "fastprof" in k[2] or os.path.abspath(k[0]).startswith(pkg + os.sep)
    ]


def test_saved_profile_has_the_same_functions_as_cprofile(tmp_path: Any) -> None:
    script = tmp_path / "frames.py"
    script.write_text(FRAMES_SCRIPT)
    r = run_cli(["run", "-o", "fp.prof", "frames.py"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    c = run_cli(["-o", "cp.prof", "frames.py"], cwd=tmp_path, prog=("-m", "cProfile"))
    assert c.returncode == 0, c.stderr
    ours, theirs = load(tmp_path / "fp.prof"), load(tmp_path / "cp.prof")
    assert _fastprof_keys(ours) == []
    expected = {k: n for k, n in _counts(theirs).items() if "_lsprof.Profiler" not in k[1]}
    assert _counts(ours) == expected
    assert expected[("~", "<built-in method builtins.exec>")] == 1
    assert expected[("frames.py", "leaf")] == 7
    # exec is the one root, as in cProfile's run
    roots = [k for k, v in ours.items() if not v[4]]
    assert [k[2] for k in roots] == ["<built-in method builtins.exec>"]


def test_printed_table_has_no_profiler_frames(tmp_path: Any) -> None:
    script = tmp_path / "frames.py"
    script.write_text(FRAMES_SCRIPT)
    for args in (["run", "--all", "frames.py"], ["run", "--all", "--clock", "cpu", "frames.py"]):
        r = run_cli(args, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        rows = r.stdout.split("function\n", 1)[1]
        assert "fastprof" not in rows and "cli.py" not in rows
        assert "frames.py:2(leaf)" in rows and "{built-in method builtins.exec}" in rows


def test_module_mode_profile_starts_at_the_module(tmp_path: Any) -> None:
    pkg = tmp_path / "fp_frames_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "frames.py").write_text(FRAMES_SCRIPT)
    r = run_cli(["run", "-o", "m.prof", "-m", "fp_frames_pkg.frames"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    ours = load(tmp_path / "m.prof")
    assert _fastprof_keys(ours) == []
    assert not [k for k in ours if "runpy" in k[0] or "importlib" in k[0]]
    counts = _counts(ours)
    assert counts[("frames.py", "<module>")] == 1 and counts[("frames.py", "leaf")] == 7


def test_report_after_the_script_raises_has_no_profiler_frames(tmp_path: Any) -> None:
    script = tmp_path / "boom.py"
    script.write_text("def f():\n    raise ValueError('boom')\nf()\n")
    r = run_cli(["run", "-o", "b.prof", "boom.py"], cwd=tmp_path)
    assert r.returncode == 1 and "ValueError: boom" in r.stderr
    assert _fastprof_keys(load(tmp_path / "b.prof")) == []


# -- 4. --lines-of naming the running script ----------------------------------------------

LINES_SCRIPT = textwrap.dedent("""
    print("top level ran")

    def work(n):
        total = 0
        for i in range(n):
            total += i
        return total

    if __name__ == "__main__":
        work(5)
""")


def _hits(out: str, text: str) -> Optional[int]:
    for line in out.splitlines():
        if line.rstrip().endswith(text):
            fields = line.split()
            return int(fields[1]) if len(fields) > 2 and fields[1].isdigit() else None
    return None


@pytest.mark.parametrize("spec", ["__main__:work", "lscript.py:work", "ABS:work"])
def test_lines_of_the_running_script(tmp_path: Any, spec: str) -> None:
    (tmp_path / "lscript.py").write_text(LINES_SCRIPT)
    spec = spec.replace("ABS", str(tmp_path / "lscript.py"))
    r = run_cli(["run", "--lines-of", spec, "lscript.py"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("top level ran") == 1
    assert _hits(r.stdout, "total += i") == 5


@pytest.mark.parametrize("spec", ["__main__:work", "fp_lines_pkg.tool:work"])
def test_lines_of_the_running_module(tmp_path: Any, spec: str) -> None:
    pkg = tmp_path / "fp_lines_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "tool.py").write_text(LINES_SCRIPT)
    r = run_cli(["run", "--lines-of", spec, "-m", "fp_lines_pkg.tool"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("top level ran") == 1
    assert _hits(r.stdout, "total += i") == 5


def test_lines_of_a_missing_function_of_the_script(tmp_path: Any) -> None:
    (tmp_path / "lscript.py").write_text(LINES_SCRIPT)
    r = run_cli(["run", "--lines-of", "__main__:nope", "lscript.py"], cwd=tmp_path)
    assert r.returncode == 2 and "top level ran" not in r.stdout
    assert "--lines-of __main__:nope" in r.stderr and "'nope'" in r.stderr


# -- a script that ends through os._exit ------------------------------------------------------

EXIT_SCRIPT = textwrap.dedent(
    """\
    import os
    def work(n):
        return sum(range(n))
    def finish():
        work(7)
        print("script done", flush=False)
        os._exit(4)
    if os.fork() == 0:  # a fork child ends through os._exit too: it reports nothing
        os._exit(0)
    os.wait()
    finish()
    """
)

EXIT_KEY = ("~", 0, "<built-in method posix._exit>")


def _own_names(stats: Dict[Any, Any]) -> List[str]:
    """The functions of fastprof's own code, or its profiler's calls, in a profile."""
    return [
        k[2]
        for k in stats
        if "fastprof" in k[0] or "disable" in k[2] or "getpid" in k[2] or "flush" in k[2]
    ]


@pytest.mark.parametrize("job", [False, True], ids=["run", "subprocesses"])
def test_a_script_ending_in_os_exit_is_reported(tmp_path: Any, job: bool) -> None:
    """os._exit runs no finally block and no atexit callback: cProfile writes nothing. fastprof
    ends the profile in the script's call of os._exit, writes -o, and keeps the status."""
    (tmp_path / "ends.py").write_text(EXIT_SCRIPT)
    out = tmp_path / "ends.prof"
    r = run_cli(["run", *(["--subprocesses"] if job else []), "-o", str(out), "ends.py"], tmp_path)
    assert r.returncode == 4, r.stderr
    assert r.stdout.count("script done") == 1  # the script's own buffered output is not lost
    stats = load(out)
    assert stats[(str(tmp_path / "ends.py"), 2, "work")][:2] == (1, 1)
    cc, nc, tt, ct, callers = stats[EXIT_KEY]
    assert nc == (2 if job else 1)  # with --subprocesses, the fork child's own call too
    assert (str(tmp_path / "ends.py"), 4, "finish") in callers
    assert _own_names(stats) == []


def test_a_script_ending_in_os_exit_prints_its_table(tmp_path: Any) -> None:
    (tmp_path / "ends.py").write_text(EXIT_SCRIPT)
    r = run_cli(["run", "-s", "calls", "ends.py"], tmp_path)
    assert r.returncode == 4, r.stderr
    assert r.stdout.count("sorted by calls") == 1  # the parent's table, not the fork child's
    assert r.stdout.index("script done") < r.stdout.index("sorted by calls")
    assert "{built-in method posix._exit}" in r.stdout and "ends.py:4(finish)" in r.stdout


def test_os_exit_is_the_gate_only_while_the_script_runs(tmp_path: Any) -> None:
    import builtins

    from fastprof import cli

    real = os._exit
    (tmp_path / "plain.py").write_text("import os\nSEEN.append(os._exit)\n")
    seen: List[Any] = []
    builtins.SEEN = seen  # type: ignore[attr-defined]
    try:
        assert cli.main(["run", "-o", str(tmp_path / "p.prof"), str(tmp_path / "plain.py")]) == 0
    finally:
        del builtins.SEEN  # type: ignore[attr-defined]
    assert seen[0] is not real and seen[0].__name__ == "_exit"  # the gate, named as os._exit
    assert os._exit is real
