"""Helpers of the kernel tests: ``close``, how near a GPU kernel's result must come to the CPU
reference (the fake-device tests here and the device tests in tests/gpu); ``same_bits``, the
comparison of the ``exact=True`` tests with scipy; ``needs_scipy_axes``, their skip mark
where scipy has no axes= to compare with.  (A module of its own: tests/gpu has a conftest.py too,
so ``from conftest import`` would be ambiguous.)"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest


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


def same_bits(ref: np.ndarray, got: np.ndarray) -> None:
    """Asserts got holds ref's values bit for bit, with ref's shape and dtype.  A NaN matches
    any NaN: its sign and payload follow the order a compiler gives the operands of an add, in
    scipy as here."""
    assert ref.dtype == got.dtype and ref.shape == got.shape
    nan_r, nan_g = np.isnan(ref), np.isnan(got)
    np.testing.assert_array_equal(nan_r, nan_g)
    r, g = np.where(nan_r, 0, ref), np.where(nan_g, 0, got)
    bits = {4: np.uint32, 8: np.uint64}[ref.dtype.itemsize]
    diff = np.flatnonzero(r.view(bits) != g.view(bits))
    assert diff.size == 0, (
        f"{diff.size} of {r.size} differ, e.g. {r.flat[diff[:3]]} vs {g.flat[diff[:3]]}"
    )


def needs_scipy_axes(func: Any) -> Any:
    """A skip mark for tests that compare with ``func(..., axes=)``, where this scipy's func
    has no axes= (scipy before 1.11 for uniform_filter, 1.15 for correlate)."""
    import inspect

    return pytest.mark.skipif(
        "axes" not in inspect.signature(func).parameters,
        reason=f"this scipy.ndimage.{func.__name__} has no axes= to compare with",
    )


class _FastKernels:
    """A kernels module (fastprof.kernels or fastprof.kernels.gpu) with exact=False by default
    for correlate, convolve and uniform_filter: the tests of the fast kernels (separable passes,
    FMA rows, quarter rows, fused boxes, the GPU's tiled float32 kernels) call these; every
    other name is the module's own, looked up at each use (so a monkeypatched module counts)."""

    def __init__(self, module: str) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        import importlib

        fn = getattr(importlib.import_module(self._module), name)
        if name not in ("correlate", "convolve", "uniform_filter"):
            return fn

        def fast(*args: Any, **kw: Any) -> Any:
            kw.setdefault("exact", False)
            return fn(*args, **kw)

        return fast


fast_kernels = _FastKernels("fastprof.kernels")
fast_gpu = _FastKernels("fastprof.kernels.gpu")
