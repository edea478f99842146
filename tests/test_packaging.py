"""What pyproject.toml, the README's two commands and .ci/run promise about dependencies agree:
NumPy is the `kernels` extra (the build needs its headers), the README's main command installs
what examples/hotspots.py imports, and CI runs the README's test command."""

from __future__ import annotations

import ast
import os
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Set

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    not (ROOT / "pyproject.toml").exists() or sys.version_info < (3, 11),
    reason="needs the checkout's pyproject.toml and tomllib (3.11+)",
)


def _pyproject() -> Dict[str, Any]:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _names(requirements: List[str]) -> Set[str]:
    """The distribution names in a list of requirement strings."""
    return {re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower() for r in requirements}  # type: ignore[union-attr]


def _readme_commands() -> List[str]:
    """The one-line commands of the README's code blocks."""
    text = (ROOT / "README.md").read_text()
    return [
        line.strip()
        for block in re.findall(r"```\n(.*?)```", text, re.S)
        for line in block.splitlines()
        if line.startswith("python -m pip install")
    ]


def test_numpy_is_the_kernels_extra_and_a_build_requirement() -> None:
    meta = _pyproject()
    assert "numpy" not in _names(meta["project"].get("dependencies", []))
    extras = meta["project"]["optional-dependencies"]
    assert "numpy" in _names(extras["kernels"])
    assert "numpy" in _names(extras["test"])
    assert "numpy" in _names(meta["build-system"]["requires"])


def test_the_readme_main_command_installs_what_the_example_imports() -> None:
    tree = ast.parse((ROOT / "examples" / "hotspots.py").read_text())
    imported = {
        a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    (main,) = [c for c in _readme_commands() if "examples/hotspots.py" in c]
    install = main.split("&&")[0]
    extras = set(re.findall(r"\.\[([a-z,]+)\]", install)[0].split(",")) if "[" in install else set()
    provided = (
        set().union(*(_names(_pyproject()["project"]["optional-dependencies"][e]) for e in extras))
        if extras
        else set()
    )
    assert "numpy" in imported and "numpy" in provided, main


def test_ci_runs_the_readme_test_command() -> None:
    (test_cmd,) = [c for c in _readme_commands() if "pytest" in c]
    assert test_cmd in (ROOT / ".ci" / "run").read_text()


def test_the_sdist_holds_what_the_readme_commands_need(tmp_path: Path) -> None:
    """An unpacked sdist runs both README commands: it holds every source, test file (the
    helpers and stand-in sources the tests import or build included) and the example."""
    import shutil
    import subprocess
    import tarfile

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to list the tracked files")
    pytest.importorskip("setuptools")
    tracked = subprocess.run(
        ["git", "ls-files", "src", "tests", "examples", "python"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    env = dict(os.environ, FASTPROF_CUDA="0")
    subprocess.run(
        [sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        check=True,
        env=env,
    )
    (archive,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    missing = sorted(set(tracked) - names)
    assert not missing, f"tracked files missing from the sdist: {missing[:20]}"
    assert not [n for n in names if n.endswith((".pyc", ".so", ".o"))]
