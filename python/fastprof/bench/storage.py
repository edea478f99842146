"""Saved runs: JSON in pytest-benchmark's layout (machine_info, commit_info, benchmarks,
datetime, version) plus fastprof's own section (machine, device, raw samples, profiles)."""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import subprocess
import sys
from typing import Any, Dict, List, Optional

FORMAT_VERSION = 1
_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
_FILE_RE = re.compile(r"^(\d{4})_(.+)\.json$")


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


def make_document(benchmarks: List[Dict[str, Any]], root: str, device: Dict[str, Any],
                  version: str) -> Dict[str, Any]:
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
    """Write doc to path as JSON (folders made as needed); return path."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2, allow_nan=True)
        fh.write("\n")
    os.replace(tmp, path)
    return path


def load(path: str) -> Dict[str, Any]:
    """Return the run saved at path; raises ValueError when it is not a benchmark JSON."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise ValueError(f"{path}: expected a benchmark JSON with a 'benchmarks' list")
    for bench in doc["benchmarks"]:
        if not isinstance(bench, dict) or "fullname" not in bench or "stats" not in bench:
            raise ValueError(f"{path}: each benchmark needs 'fullname' and 'stats'")
    return doc
