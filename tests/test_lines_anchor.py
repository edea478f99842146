"""line_profiler 5.1's own tests (tests/test_line_profiler.py of its sdist) run with
``LineProfiler`` taken from fastprof.

The file is not part of this repository: the sdist is fetched once from PyPI's simple index
(pinned by its sha256) and cached under the pytest cache; without network, or without
line_profiler installed (the test extra), the test is skipped with the reason.  Only the tests
that assert line_profiler's internals are deselected, each with why."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import urllib.request
from pathlib import Path
from typing import Any, Dict

import pytest

import fastprof

SDIST = "line_profiler-5.1.0.tar.gz"
SDIST_SHA256 = "5717a2dccf0ced65fd19ba5e479581c47412831fe768bc211c6d0f5ba1ad9b47"
MEMBER = "line_profiler-5.1.0/tests/test_line_profiler.py"
INDEX = "https://pypi.org/simple/line-profiler/"
HERE = Path(__file__).resolve().parent

# name -> why it is not run against fastprof (each asserts an internal of line_profiler's
# Cython core that fastprof's C tracer does not copy)
DESELECTED: Dict[str, str] = {
    "test_init": "asserts LineProfiler.code_map, the Cython core's per-code dict",
    "test_last_time": "asserts c_last_time/last_time, keyed by line_profiler's code hashes",
    "test_enable_disable": "asserts last_time == {} (enable_count itself is tested in "
    "test_lines_compat.py)",
    "test_interleaved_generator_timing": "asserts c_last_time between steps",
    "test_exception_frame_timing": "asserts c_last_time between calls",
    "test_abandoned_generator_and_coroutine_timing": "asserts c_last_time between steps",
    "test_sys_monitoring": "asserts line_profiler's sys.monitoring tool name",
    "test_multiple_profilers_identical_bytecode": "reads __line_profiler_id__ and asserts "
    "line_profiler's bytecode padding",
}


def _download() -> bytes:
    """The sdist's bytes from PyPI's simple index (PEP 691 JSON); raises OSError/ValueError."""
    req = urllib.request.Request(INDEX, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        files = json.load(r)["files"]
    url = next(f["url"] for f in files if f["filename"] == SDIST)
    with urllib.request.urlopen(url, timeout=60) as r:
        data: bytes = r.read()
    if hashlib.sha256(data).hexdigest() != SDIST_SHA256:
        raise ValueError(f"{SDIST}: sha256 does not match")
    return data


@pytest.fixture(scope="session")
def anchor_tests(request: Any, tmp_path_factory: Any) -> Path:
    """The path of line_profiler 5.1's test_line_profiler.py (cached), with its conftest."""
    pytest.importorskip("line_profiler", reason="line_profiler (the test extra) is not installed")
    import line_profiler

    if not line_profiler.__version__.startswith("5.1"):
        pytest.skip(f"line_profiler {line_profiler.__version__} is installed, the anchor is 5.1")
    store = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider
    cache = Path(
        store.mkdir("line_profiler-5.1.0")
        if store is not None
        else tmp_path_factory.mktemp("line_profiler-5.1.0")
    )
    target = cache / "test_line_profiler.py"
    if not target.exists():
        try:
            data = _download()
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
                member = tar.extractfile(MEMBER)
                assert member is not None
                text = member.read()
        except Exception as e:  # no network, index unreachable, file moved
            pytest.skip(f"line_profiler 5.1.0's sdist could not be had: {e!r}")
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(text)
        os.replace(tmp, target)
    shutil.copyfile(HERE / "anchor" / "lp_conftest.py", cache / "conftest.py")
    return target


def test_line_profiler_51_suite(anchor_tests: Path) -> None:
    """Every test of line_profiler 5.1's test_line_profiler.py but the listed internals
    passes with fastprof's LineProfiler."""
    env = dict(os.environ)
    # the fastprof these tests import (an installed one, or the checkout's in-place build)
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(fastprof.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in [env.get("PYTHONPATH")] if p])
    args = [
        sys.executable,
        "-m",
        "pytest",
        str(anchor_tests),
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        "--rootdir",
        str(anchor_tests.parent),
        "-k",
        " and ".join(f"not {name}" for name in DESELECTED),
    ]
    proc = subprocess.run(
        args, cwd=anchor_tests.parent, env=env, capture_output=True, text=True, timeout=600
    )
    tail = proc.stdout[-6000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    summary = re.findall(r"(\d+) (passed|failed|error)", proc.stdout)
    counts = {kind: int(n) for n, kind in summary}
    assert counts.get("passed", 0) > 0, tail
    assert not counts.get("failed") and not counts.get("error"), tail
