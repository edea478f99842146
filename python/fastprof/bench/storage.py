"""Saved runs: JSON in pytest-benchmark's layout (machine_info, commit_info, benchmarks,
datetime, version) plus fastprof's own section (machine, device, the summary of a long run's
samples, profiles).

A benchmark of up to sample_stats.KEEP_SAMPLES rounds keeps its raw samples (stats.data); a
longer one keeps their summary instead (fastprof.samples: the count, the sorted samples at
some ranks, the mean and central moments m2, m3), unless every sample is asked for
(--fastprof-save-data), as pytest-benchmark keeps stats.data only with --benchmark-save-data.
Files that hold every sample, older fastprof's among them, are read as before."""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import re
import reprlib
import subprocess
import sys
from typing import Any, Dict, List, Optional

from .._files import read_regular_file

# 2: a long run keeps fastprof.samples (a summary) in place of stats.data
FORMAT_VERSION = 2
_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
_FILE_RE = re.compile(r"^(\d{4})_(.+)\.json$")
_REPR = reprlib.Repr()
_REPR.maxlevel = 2
_REPR.maxstring = 40
_REPR.maxother = 40


def machine_id() -> str:
    """Return the folder name runs of this interpreter and OS are saved under."""
    bits = 64 if sys.maxsize > 2**32 else 32
    impl = platform.python_implementation()
    ver = ".".join(platform.python_version_tuple()[:2])
    return f"{impl}-{platform.system()}-{ver}-{bits}bit"


def _cpu_brand() -> str:
    """Return the CPU model name (from /proc/cpuinfo on Linux, else platform.processor())."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> Dict[str, Any]:
    """Return pytest-benchmark's machine_info fields, with the CPU's name and count."""
    uname = platform.uname()
    return {
        "node": uname.node,
        "processor": uname.processor,
        "machine": uname.machine,
        "python_compiler": platform.python_compiler(),
        "python_implementation": platform.python_implementation(),
        "python_implementation_version": platform.python_version(),
        "python_version": platform.python_version(),
        "python_build": list(platform.python_build()),
        "release": uname.release,
        "system": uname.system,
        "cpu": {"brand_raw": _cpu_brand(), "count": os.cpu_count(), "arch": uname.machine},
    }


def commit_info(root: str) -> Dict[str, Any]:
    """Return the git commit id, branch and dirtiness of root ({"error": ...} when not a repo)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()

    try:
        return {
            "id": git("rev-parse", "HEAD"),
            "branch": git("rev-parse", "--abbrev-ref", "HEAD"),
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
            "project": os.path.basename(os.path.abspath(root)),
        }
    except (OSError, subprocess.SubprocessError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def make_document(
    benchmarks: List[Dict[str, Any]], root: str, device: Dict[str, Any], version: str
) -> Dict[str, Any]:
    """Return the JSON document for a run."""
    return {
        "machine_info": machine_info(),
        "commit_info": commit_info(root),
        "benchmarks": benchmarks,
        "datetime": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "version": version,
        "fastprof": {"format": FORMAT_VERSION, "machine_id": machine_id(), "device": device},
    }


def check_name(name: str) -> str:
    """Return name when it can be part of a file name; raises ValueError otherwise."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValueError(
            f"--fastprof-save: expected a name of letters, digits, '_', '.' or '-', got {name!r}"
        )
    return name


def _numbered(folder: str) -> List[tuple]:
    """Return [(number, name, path)] of the saved runs in folder, oldest first."""
    if not os.path.isdir(folder):
        return []
    out = []
    for entry in os.listdir(folder):
        m = _FILE_RE.match(entry)
        if m:
            out.append((int(m.group(1)), m.group(2), os.path.join(folder, entry)))
    out.sort()
    return out


def next_path(folder: str, name: str) -> str:
    """Return the path the next run named `name` is saved to: NNNN_name.json in folder."""
    runs = _numbered(folder)
    number = runs[-1][0] + 1 if runs else 1
    return os.path.join(folder, f"{number:04d}_{check_name(name)}.json")


def find(folder: str, spec: Optional[str]) -> str:
    """Return the saved run that spec names: None/"latest" for the newest, NNNN, a name, a
    file name, or a path. Raises FileNotFoundError saying what was looked for."""
    if spec and os.path.isfile(spec):
        return spec
    runs = _numbered(folder)
    if not runs:
        raise FileNotFoundError(f"--fastprof-compare: no saved runs in {folder}")
    if spec in (None, "", "latest"):
        return runs[-1][2]
    for number, name, path in reversed(runs):
        if spec in (f"{number:04d}", str(number), name, os.path.basename(path)):
            return path
    raise FileNotFoundError(
        f"--fastprof-compare: no saved run {spec!r} in {folder} "
        f"(have: {', '.join(os.path.basename(p) for _, _, p in runs)})"
    )


def save(doc: Dict[str, Any], path: str) -> str:
    """Write doc to path as JSON (folders made as needed); return path.

    The file appears whole or not at all: it is written to path + ".tmp", renamed, and the
    temporary file is removed when anything fails. Raises OSError when the folder or file
    cannot be written, TypeError or ValueError when doc holds what JSON cannot (a value of
    another type, a container inside itself)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2, allow_nan=True)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    return path


_COMPARED = ("min", "mean", "median")  # the statistics a comparison reads


def _is_number(x: Any) -> bool:
    """True for a finite, non-negative int or float (not a bool)."""
    return type(x) in (int, float) and 0 <= x < math.inf


_MAX_COUNT = 2**53  # sample counts above are not exact in a float


def _summary_error(summary: Any) -> Optional[str]:
    """What is wrong with a fastprof.samples summary, or None when a comparison can read it."""
    if not isinstance(summary, dict):
        return "not an object"
    count, ranks, values = summary.get("count"), summary.get("ranks"), summary.get("values")
    if type(count) is not int or not 1 <= count <= _MAX_COUNT:
        return f"'count' must be a positive integer, got {_REPR.repr(count)}"
    if not isinstance(ranks, list) or not isinstance(values, list):
        return "'ranks' and 'values' must be lists"
    if not 1 <= len(ranks) == len(values) <= count:
        return "'ranks' and 'values' must be as long as each other, 1 to 'count' entries"
    if not all(type(r) is int for r in ranks) or ranks[0] != 0 or ranks[-1] != count - 1:
        return "'ranks' must be integers from 0 to count - 1"
    if any(b <= a for a, b in zip(ranks, ranks[1:])):
        return "'ranks' must increase"
    if not all(_is_number(v) for v in values):
        return "'values' must be finite non-negative numbers"
    if any(b < a for a, b in zip(values, values[1:])):
        return "'values' must be sorted"
    for key in ("mean", "m2"):
        if not _is_number(summary.get(key)):
            return f"'{key}' must be a finite non-negative number"
    m3 = summary.get("m3")
    if not (isinstance(m3, (int, float)) and not isinstance(m3, bool) and math.isfinite(m3)):
        return "'m3' must be a finite number"
    return None


def raw_samples(bench: Dict[str, Any]) -> Optional[List[float]]:
    """Return the raw samples of a benchmark (as load() checks it), None when it has none."""
    data = bench.get("stats", {}).get("data")
    return [float(x) for x in data] if data else None


def sample_summary(bench: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """Return the summary of a benchmark's samples (fastprof.samples), None when it has none."""
    extra = bench.get("fastprof")
    return extra.get("samples") if isinstance(extra, dict) else None


def for_saving(benchmarks: List[Dict[str, Any]], keep_data: bool) -> List[Dict[str, Any]]:
    """Return the benchmarks as a saved run holds them (copies where they differ).

    A benchmark that carries the summary of its samples (fastprof.samples, made for runs of
    more than sample_stats.KEEP_SAMPLES rounds) keeps it in place of its raw samples
    (stats.data, and the host time's fastprof.host.data); with keep_data it keeps its raw
    samples and no summary."""
    out = []
    for bench in benchmarks:
        section = bench.get("fastprof")
        if not isinstance(section, dict) or "samples" not in section:
            out.append(bench)
            continue
        bench, section = dict(bench), dict(section)
        if keep_data:
            del section["samples"]
        else:
            bench["stats"] = {k: v for k, v in bench["stats"].items() if k != "data"}
            host = section.get("host")
            if isinstance(host, dict) and "data" in host:
                section["host"] = {k: v for k, v in host.items() if k != "data"}
        bench["fastprof"] = section
        out.append(bench)
    return out


def _bench_error(bench: Any) -> Optional[str]:
    """What is wrong with one saved benchmark, or None when a comparison can read it."""
    if not isinstance(bench, dict):
        return f"a benchmark is a {type(bench).__name__}, expected an object"
    fullname = bench.get("fullname")
    if not isinstance(fullname, str):
        return "each benchmark needs 'fullname' (a string) and 'stats'"
    where = f"benchmark {_REPR.repr(fullname)}"
    if not isinstance(bench.get("name", fullname), str):
        return f"{where}: 'name' must be a string"
    st = bench.get("stats")
    if not isinstance(st, dict):
        return f"{where}: 'stats' must be an object"
    for stat in _COMPARED:
        if not _is_number(st.get(stat)):
            return (
                f"{where}: stats.{stat} must be a finite non-negative number, "
                f"got {_REPR.repr(st.get(stat))}"
            )
    data = st.get("data")
    if data is not None and (not isinstance(data, list) or not all(_is_number(x) for x in data)):
        return f"{where}: stats.data must be a list of finite non-negative numbers"
    extra = bench.get("fastprof")
    if extra is None:
        return None
    if not isinstance(extra, dict):
        return f"{where}: 'fastprof' must be an object"
    if extra.get("samples") is not None:
        problem = _summary_error(extra["samples"])
        if problem is not None:
            return f"{where}: fastprof.samples (the summary of the samples): {problem}"
    prof = extra.get("profile")
    if prof is None:
        return None
    rows = prof.get("rows") if isinstance(prof, dict) else None
    if (
        not isinstance(prof, dict)
        or not isinstance(rows, list)
        or not isinstance(prof.get("iterations", 1), int)
        or not all(
            isinstance(r, dict) and isinstance(r.get("func"), str) and _is_number(r.get("tottime"))
            for r in rows
        )
    ):
        return (
            f"{where}: fastprof.profile must hold 'iterations' and 'rows' of "
            f"{{'func': str, 'tottime': seconds}}"
        )
    return None


def load(path: str) -> Dict[str, Any]:
    """Return the run saved at path.  Raises OSError when it cannot be read, ValueError
    naming the file when it is not a benchmark JSON a comparison can read (wrong types,
    negative or non-finite figures, nesting too deep)."""
    try:
        doc = json.loads(read_regular_file(path).decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not JSON (not UTF-8 text)") from None
    except RecursionError:
        raise ValueError(f"{path}: not a benchmark JSON (nested too deeply)") from None
    except ValueError as exc:  # e.g. an integer too long to convert
        raise ValueError(f"{path}: not a benchmark JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise ValueError(f"{path}: expected a benchmark JSON with a 'benchmarks' list")
    for bench in doc["benchmarks"]:
        problem = _bench_error(bench)
        if problem is not None:
            raise ValueError(f"{path}: {problem}")
    return doc


def check_baseline(doc: Dict[str, Any], path: str) -> Dict[str, Any]:
    """Return doc (a load() result) when every benchmark in it can be a baseline; raises
    ValueError naming the file and the benchmark whose figures are zero, since a ratio to
    zero means nothing (a comparison with it is an error, never a pass)."""
    for bench in doc["benchmarks"]:
        st = bench["stats"]
        zero = [stat for stat in _COMPARED if st[stat] <= 0]
        data = st.get("data")
        summary = sample_summary(bench)
        if not data and summary:
            data = summary["values"]
        if zero or (data and not any(x > 0 for x in data)):
            what = f"{', '.join(zero)} of 0" if zero else "all samples 0"
            raise ValueError(
                f"{path}: benchmark {_REPR.repr(bench['fullname'])} has "
                f"{what}: a zero baseline cannot be compared"
            )
    return doc
