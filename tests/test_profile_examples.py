"""The example a newcomer profiles first (examples/hotspots.py): its fast path agrees with its
slow one, and the README's command shows the per-pixel loop."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "hotspots.py")

pytestmark = pytest.mark.skipif(not os.path.exists(EXAMPLE), reason="examples/ not present")


@pytest.fixture(scope="module")
def hotspots() -> Any:
    spec = importlib.util.spec_from_file_location("hotspots_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (12, 5), (20, 20)])
@pytest.mark.parametrize("r", [0, 1, 2, 6])
def test_fast_smoothing_matches_the_loop(hotspots: Any, shape: Any, r: int) -> None:
    img = np.random.default_rng(sum(shape) + r).normal(size=shape)
    ref = hotspots.smooth_loop(img, r)
    # the plain definition: mean over the clipped window
    for i in range(shape[0]):
        for j in range(shape[1]):
            win = img[max(i - r, 0) : i + r + 1, max(j - r, 0) : j + r + 1]
            assert ref[i, j] == pytest.approx(win.mean())
    np.testing.assert_allclose(hotspots.smooth_fast(img, r), ref, rtol=1e-12, atol=1e-12)


def test_readme_command_points_at_the_loop(tmp_path: Any) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    out = tmp_path / "h.prof"
    r = subprocess.run(
        [sys.executable, "-m", "fastprof", "run", "-o", str(out), EXAMPLE],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "spots found" in r.stdout
    import fastprof

    st = fastprof.Stats(str(out))
    wm = st.row("window_mean")
    assert wm.ncalls == 448 * 448
    assert [c.name for c in wm.callers] == ["smooth_loop"]
    assert st.row("fit_background").ncalls == 1
    assert st.row("smooth_loop").ncalls == 1
