"""The one place fastprof's version is written.

pyproject.toml reads it through setuptools' dynamic version (``attr``, read from this file's
text without importing the package), ``fastprof.__version__`` re-exports it and
``python -m fastprof --version`` prints it.  Change it here only.
"""

__version__ = "0.1.0"
