"""``close``: how near a GPU kernel's result must come to the CPU reference, shared by the
fake-device tests here and the device tests in tests/gpu.  (A module of its own: tests/gpu
has a conftest.py too, so ``from conftest import`` would be ambiguous.)"""

from __future__ import annotations

from typing import Any

import numpy as np


def close(got: Any, ref: np.ndarray) -> None:
    """Asserts got matches ref in shape and dtype, integers within 1 (rounding), floats within
    the dtype's tolerance relative to ref's largest magnitude."""
    got = np.asarray(got)
    assert got.shape == ref.shape and got.dtype == ref.dtype
    if ref.dtype.kind in "iu":
        assert np.abs(got.astype(np.float64) - ref).max(initial=0) <= 1
        return
    tol = 2e-5 if ref.dtype == np.float32 else 1e-11
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * float(np.abs(ref).max(initial=1.0)))
