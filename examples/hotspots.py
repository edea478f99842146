"""Find the bright spots in a noisy image: a small analysis pipeline.

    1. simulate a 448x448 image: a tilted background, a few Gaussian spots, noise;
    2. smooth it with a 5x5 neighbourhood mean;
    3. fit the background as a cubic polynomial surface (least squares over every pixel);
    4. subtract it, threshold, and label the connected spots.

Which step takes the time?  The least-squares fit builds a 200704x10 matrix and solves it, so
it looks like the expensive part.  Guess, then measure:

    python -m fastprof run examples/hotspots.py

and compare with the same pipeline using a vectorised smoothing step:

    python -m fastprof run examples/hotspots.py --fast
"""

from __future__ import annotations

import sys

import numpy as np


def simulate(n: int, nspots: int, seed: int = 0) -> np.ndarray:
    """An n x n image: tilted background, Gaussian spots and noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:n, 0:n] / n
    img = 2.0 + 1.5 * x - 0.8 * y + 0.6 * x * y
    for _ in range(nspots):
        cy, cx = rng.uniform(0.1, 0.9, size=2)
        width = rng.uniform(0.01, 0.03)
        img += 3.0 * np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2 * width**2))
    return img + rng.normal(0.0, 0.5, size=img.shape)


def window_mean(img: np.ndarray, i: int, j: int, r: int) -> float:
    """Mean of the (2r+1)^2 window around (i, j), clipped at the borders."""
    return float(img[max(i - r, 0) : i + r + 1, max(j - r, 0) : j + r + 1].mean())


def smooth_loop(img: np.ndarray, r: int) -> np.ndarray:
    """Neighbourhood mean, one pixel at a time."""
    out = np.empty_like(img)
    for i in range(img.shape[0]):
        for j in range(img.shape[1]):
            out[i, j] = window_mean(img, i, j, r)
    return out


def smooth_fast(img: np.ndarray, r: int) -> np.ndarray:
    """The same neighbourhood mean from 2-D cumulative sums (summed-area table)."""
    n0, n1 = img.shape
    s = np.zeros((n0 + 1, n1 + 1))
    s[1:, 1:] = img.cumsum(0).cumsum(1)
    i0 = np.clip(np.arange(n0) - r, 0, n0)
    i1 = np.clip(np.arange(n0) + r + 1, 0, n0)
    j0 = np.clip(np.arange(n1) - r, 0, n1)
    j1 = np.clip(np.arange(n1) + r + 1, 0, n1)
    total = s[i1][:, j1] - s[i0][:, j1] - s[i1][:, j0] + s[i0][:, j0]
    count = np.outer(i1 - i0, j1 - j0)
    return total / count


def fit_background(img: np.ndarray, degree: int = 3) -> np.ndarray:
    """Least-squares polynomial surface of the given degree through every pixel."""
    n0, n1 = img.shape
    y, x = np.mgrid[0:n0, 0:n1] / max(n0, n1)
    terms = [x**a * y**b for a in range(degree + 1) for b in range(degree + 1 - a)]
    design = np.stack([t.ravel() for t in terms], axis=1)
    coef, *_ = np.linalg.lstsq(design, img.ravel(), rcond=None)
    return (design @ coef).reshape(img.shape)


def label_spots(mask: np.ndarray) -> list[list[tuple[int, int]]]:
    """Connected groups of True pixels (4-neighbourhood), by flood fill."""
    seen = np.zeros_like(mask, dtype=bool)
    spots = []
    for i, j in zip(*np.nonzero(mask)):
        if seen[i, j]:
            continue
        stack, pixels = [(int(i), int(j))], []
        seen[i, j] = True
        while stack:
            a, b = stack.pop()
            pixels.append((a, b))
            for c, d in ((a + 1, b), (a - 1, b), (a, b + 1), (a, b - 1)):
                if (
                    0 <= c < mask.shape[0]
                    and 0 <= d < mask.shape[1]
                    and mask[c, d]
                    and not seen[c, d]
                ):
                    seen[c, d] = True
                    stack.append((c, d))
        spots.append(pixels)
    return spots


def main(argv: list[str]) -> int:
    fast = "--fast" in argv
    img = simulate(448, nspots=6)
    smooth = smooth_fast(img, 2) if fast else smooth_loop(img, 2)
    residual = smooth - fit_background(smooth)
    spots = [s for s in label_spots(residual > 1.0) if len(s) >= 5]
    print(f"{len(spots)} spots found ({'vectorised' if fast else 'loop'} smoothing):")
    for s in sorted(spots, key=len, reverse=True):
        ci = sum(p[0] for p in s) / len(s)
        cj = sum(p[1] for p in s) / len(s)
        print(f"  centre ({ci:6.1f}, {cj:6.1f})  {len(s):4d} pixels")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
