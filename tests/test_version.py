"""The version is written once (python/fastprof/_version.py) and every place a user reads it
agrees: the package metadata setuptools builds from pyproject.toml (what a wheel and
``importlib.metadata.version("fastprof")`` report), ``fastprof.__version__`` and
``python -m fastprof --version``."""

from __future__ import annotations

import ast
import email
import io
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import fastprof

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"

pytestmark = pytest.mark.skipif(
    not PYPROJECT.exists(), reason="needs the checkout's pyproject.toml"
)


def _version_file() -> str:
    """The string assigned to ``__version__`` in _version.py, read from its text."""
    tree = ast.parse((ROOT / "python" / "fastprof" / "_version.py").read_text())
    (value,) = [
        n.value.value
        for n in tree.body
        if isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Constant)
        and [getattr(t, "id", None) for t in n.targets] == ["__version__"]
    ]
    return str(value)


def _metadata_version(monkeypatch: pytest.MonkeyPatch) -> str:
    """The Version field of the PKG-INFO that setuptools writes from pyproject.toml (the same
    path a wheel build takes, without compiling anything)."""
    setuptools_dist = pytest.importorskip("setuptools.dist")
    pyprojecttoml = pytest.importorskip("setuptools.config.pyprojecttoml")
    monkeypatch.chdir(ROOT)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dist = pyprojecttoml.apply_configuration(setuptools_dist.Distribution(), str(PYPROJECT))
        buf = io.StringIO()
        dist.metadata.write_pkg_file(buf)
    return str(email.message_from_string(buf.getvalue())["Version"])


def test_pyproject_takes_the_version_from_the_package() -> None:
    text = PYPROJECT.read_text()
    project = text.split("[project]", 1)[1].split("\n[", 1)[0]
    assert 'dynamic = ["version"]' in project
    assert "\nversion =" not in project  # written once, in _version.py
    assert 'version = { attr = "fastprof._version.__version__" }' in text


def test_metadata_package_and_cli_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = _version_file()
    assert fastprof.__version__ == expected
    assert _metadata_version(monkeypatch) == expected
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(fastprof.__file__).resolve().parent.parent), env.get("PYTHONPATH", "")]
    )
    out = subprocess.run(
        [sys.executable, "-m", "fastprof", "--version"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"fastprof {expected}\n"


def test_an_installed_distribution_reports_the_same_version() -> None:
    from importlib import metadata

    try:
        dist = metadata.distribution("fastprof")
    except metadata.PackageNotFoundError:
        pytest.skip("fastprof is not installed (imported from the checkout)")
    init = Path(fastprof.__file__).resolve()
    if not any(Path(str(dist.locate_file(f))).resolve() == init for f in dist.files or []):
        pytest.skip("the installed fastprof is not the one imported here")
    assert dist.version == fastprof.__version__
