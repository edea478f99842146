"""The separable path's last step writes its sums straight into an output whose rows are
contiguous and of the accumulation type, else through a row buffer: both give the same bits."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_helpers import fast_kernels as kernels  # the fast paths (exact=False)

ndi = pytest.importorskip("scipy.ndimage")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size", [3, 5, 12])
def test_direct_and_buffered_stores_agree_bit_for_bit(dtype, size):
    rng = np.random.default_rng(size)
    x = rng.standard_normal((7, 9, 37)).astype(dtype)
    direct = np.empty_like(x)  # contiguous rows: summed in place
    kernels.uniform_filter(x, size, output=direct)
    wide = np.zeros((7, 9, 74), dtype=dtype)
    strided = wide[:, :, ::2]  # every other element: through the row buffer
    kernels.uniform_filter(x, size, output=strided)
    rows_apart = np.zeros((7, 18, 37), dtype=dtype)[:, ::2]  # contiguous rows, strided slices
    kernels.uniform_filter(x, size, output=rows_apart)
    np.testing.assert_array_equal(direct, strided)
    np.testing.assert_array_equal(direct, rows_apart)
    assert (wide[:, :, 1::2] == 0).all()
    np.testing.assert_allclose(
        direct,
        ndi.uniform_filter(x, size),
        **(dict(rtol=2e-6, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)),
    )


def test_float32_input_into_a_float64_output():
    # another output type than the sums': stored through the buffer, converted once
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 8, 33)).astype(np.float32)
    w = np.multiply.outer(np.multiply.outer([1.0, 2.0, 1.0], [0.5, 1.0]), [1.0, -1.0, 3.0])
    out = np.empty(x.shape, dtype=np.float64)
    kernels.correlate(x, w, output=out)
    np.testing.assert_allclose(out, ndi.correlate(x, w, output=np.float64), rtol=2e-6, atol=2e-5)
