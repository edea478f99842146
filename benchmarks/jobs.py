"""The cost of following children: a pool of 8 spawn workers under `fastprof run` and under
`fastprof run --subprocesses`, side by side in one run.

Each repeat starts the same script (a spawn Pool of 8 workers mapping a small task over 64
items) four ways: plain `python`, `python -m fastprof run -o FILE`,
`python -m fastprof run --subprocesses -o FILE`, and the same with `--no-worker-startup` (the
opt-in that leaves out each spawn worker's start-up); the order rotates each repeat, and the
table shows the median wall time of each and the ratio of `--subprocesses` to `run` (the bar:
at most 1.10).  Record the figures, with the command and the machine, in docs/performance.md.

    python benchmarks/jobs.py [--repeats N] [--quick]

With ``--instructions``, no wall clock: one spawn worker's whole life (a Pool(1) mapping the
same task over 8 items) runs under valgrind's callgrind in each mode, and the instructions
it executed are printed (they do not depend on the machine's load).  The worker's start
(the bootstrap's imports), its profile and its write at exit are all in the count.

    python benchmarks/jobs.py --instructions

With ``--job-instructions``, the whole 8-worker pool runs under callgrind in each mode and
the instructions of the runner (the process ``python -m fastprof`` started: the script's own
parent side, and the reading and writing of the run directory after it), of the workers
summed, and of every process of the job are printed (a few minutes).

    python benchmarks/jobs.py --job-instructions
"""

from __future__ import annotations

import argparse
import glob
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(HERE, "..", "python")

SCRIPT = """\
import multiprocessing as mp

def task(n):
    return sum(i * i for i in range(n))

if __name__ == "__main__":
    with mp.get_context("spawn").Pool(8) as pool:
        print(sum(pool.map(task, [2000] * 64)))
"""

SUB = "run --subprocesses"
NO_START = "  --no-worker-startup"  # the opt-in that leaves out a spawn worker's start-up
MODES = ("python", "run", SUB, NO_START)

SCRIPT_ONE = SCRIPT.replace("Pool(8)", "Pool(1)").replace("[2000] * 64", "[2000] * 8")


def worker_instructions(mode: str) -> int:
    """The instructions callgrind counts in the spawn worker of SCRIPT_ONE run by mode."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.abspath(PACKAGE) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    with tempfile.TemporaryDirectory(prefix="fastprof-bench-jobs-") as tmp:
        script = os.path.join(tmp, "pool1.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent(SCRIPT_ONE))
        cmd = _command(mode, script, os.path.join(tmp, "out.prof"))
        out = os.path.join(tmp, "cg.%p")
        subprocess.run(
            ["valgrind", "--tool=callgrind", "--trace-children=yes", f"--callgrind-out-file={out}"]
            + cmd,
            env=env,
            cwd=tmp,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for path in glob.glob(os.path.join(tmp, "cg.*")):
            with open(path) as f:
                text = f.read()
            if "spawn_main" in text.partition("\ncmd:")[2].partition("\n")[0]:
                for line in text.splitlines():
                    if line.startswith(("summary:", "totals:")):
                        return int(line.split()[1])
    raise RuntimeError("no spawn worker found among callgrind's outputs")


def _callgrind(script_text: str, mode: str) -> List[Tuple[str, int]]:
    """(command line, instructions) of each process of script_text run by mode under
    callgrind."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.abspath(PACKAGE) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    out_list = []
    with tempfile.TemporaryDirectory(prefix="fastprof-bench-jobs-") as tmp:
        script = os.path.join(tmp, "job.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent(script_text))
        cmd = _command(mode, script, os.path.join(tmp, "out.prof"))
        out = os.path.join(tmp, "cg.%p")
        subprocess.run(
            ["valgrind", "--tool=callgrind", "--trace-children=yes", f"--callgrind-out-file={out}"]
            + cmd,
            env=env,
            cwd=tmp,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for path in glob.glob(os.path.join(tmp, "cg.*")):
            with open(path) as f:
                text = f.read()
            argv = text.partition("\ncmd:")[2].partition("\n")[0].strip()
            for line in text.splitlines():
                if line.startswith(("summary:", "totals:")):
                    out_list.append((argv, int(line.split()[1])))
                    break
    return out_list


def job_instructions(mode: str) -> Tuple[int, int, int]:
    """(runner, spawn workers summed, every process) instructions of SCRIPT run by mode."""
    procs = _callgrind(SCRIPT, mode)
    runner = sum(
        n for argv, n in procs if " -m fastprof " in f" {argv} " or argv.endswith("job.py")
    )
    workers = sum(n for argv, n in procs if "spawn_main" in argv)
    return runner, workers, sum(n for _, n in procs)


def _command(mode: str, script: str, out: str) -> List[str]:
    if mode == "python":
        return [sys.executable, script]
    extra = {SUB: ["--subprocesses"], NO_START: ["--subprocesses", "--no-worker-startup"]}.get(
        mode, []
    )
    return [sys.executable, "-m", "fastprof", "run", *extra, "-o", out, script]


def _time_once(cmd: List[str], env: Dict[str, str], cwd: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        cmd, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return time.perf_counter() - t0


def measure(repeats: int) -> Dict[str, List[float]]:
    times: Dict[str, List[float]] = {m: [] for m in MODES}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.abspath(PACKAGE) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    with tempfile.TemporaryDirectory(prefix="fastprof-bench-jobs-") as tmp:
        script = os.path.join(tmp, "pool8.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent(SCRIPT))
        out = os.path.join(tmp, "out.prof")
        for r in range(repeats):
            order = MODES[r % len(MODES) :] + MODES[: r % len(MODES)]
            for mode in order:
                times[mode].append(_time_once(_command(mode, script, out), env, tmp))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--quick", action="store_true", help="2 repeats (a smoke run)")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count one spawn worker's instructions under callgrind instead of timing",
    )
    parser.add_argument(
        "--job-instructions",
        action="store_true",
        help="count the instructions of the whole 8-worker job under callgrind",
    )
    opts = parser.parse_args()
    if opts.job_instructions:
        print(
            f"pool of 8 spawn workers, instructions (callgrind); Python {platform.python_version()}"
        )
        print(f"{'mode':<22} {'runner':>15} {'8 workers':>15} {'all processes':>15}")
        for mode in MODES[1:]:
            runner, workers, total = job_instructions(mode)
            print(f"{mode:<22} {runner:>15,} {workers:>15,} {total:>15,}")
        return
    if opts.instructions:
        print(f"one spawn worker's instructions (callgrind); Python {platform.python_version()}")
        base = None
        for mode in MODES:
            n = worker_instructions(mode)
            base = n if mode == "run" else base
            extra = f"  {n / base:.2f}x of run's" if base and mode != "run" else ""
            print(f"{mode:<22} {n:>14,}{extra}")
        return
    repeats = 2 if opts.quick else max(1, opts.repeats)
    times = measure(repeats)
    print(
        f"pool of 8 spawn workers, {repeats} repeats, medians; Python "
        f"{platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs"
    )
    print(f"{'mode':<22} {'median s':>9} {'min s':>9}")
    for mode in MODES:
        print(f"{mode:<22} {statistics.median(times[mode]):9.3f} {min(times[mode]):9.3f}")
    ratio = statistics.median(times[SUB]) / statistics.median(times["run"])
    print(f"--subprocesses / run: {ratio:.3f} (the bar: at most 1.10)")
    ratio = statistics.median(times[NO_START]) / statistics.median(times["run"])
    print(f"--subprocesses --no-worker-startup / run: {ratio:.3f} (opt-in)")


if __name__ == "__main__":
    main()
