"""What pyproject.toml, the README's two commands and .ci/run promise about dependencies agree:
NumPy is the `kernels` extra (the build needs its headers), the README's main command installs
what examples/hotspots.py imports, and CI runs the README's test command."""

from __future__ import annotations

import ast
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
