"""Reading the files fastprof's commands are given: only regular files, whole."""

from __future__ import annotations

import os
import stat
from typing import Union

__all__ = ["read_regular_file"]


def read_regular_file(path: Union[str, "os.PathLike[str]"]) -> bytes:
    """The bytes of the regular file at path.  Raises OSError when it cannot be read (missing,
    a directory, no permission) and ValueError naming it when it is not a regular file (a
    device or a pipe would never end or block)."""
    name = os.fspath(path)
    mode = os.stat(name).st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(21, "Is a directory", name)
    if not stat.S_ISREG(mode):
        raise ValueError(f"{name}: not a regular file")
    with open(name, "rb") as f:
        return f.read()
