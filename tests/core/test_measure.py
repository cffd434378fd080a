"""Measurement building blocks checked against direct definitions."""

from __future__ import annotations

import numpy as np

from marionette.core.measure import capsule_rasters


def _dense_raster(segments: np.ndarray, radius: float, size: int) -> np.ndarray:
    """Every pixel centre against every segment: the definition, at full cost."""
    g = np.linspace(-1.5, 1.5, size)
    py, px = np.meshgrid(g, g, indexing="ij")
    inside = np.zeros((size, size), dtype=bool)
    for (ax, ay), (bx, by) in segments:
        d = np.array([bx - ax, by - ay])
        denom = max(float(d @ d), 1e-300)
        t = np.clip(((px - ax) * d[0] + (py - ay) * d[1]) / denom, 0.0, 1.0)
        ex, ey = px - ax - t * d[0], py - ay - t * d[1]
        inside |= ex * ex + ey * ey <= radius * radius
    return inside


def test_capsule_rasters_match_the_dense_definition() -> None:
    rng = np.random.default_rng(11)
    # Segments inside, crossing the border, wholly outside, and of zero length.
    segs = rng.uniform(-2.0, 2.0, size=(6, 25, 2, 2))
    segs[:, 0, 1] = segs[:, 0, 0]
    segs[:, 1] += 5.0
    for size, radius in ((48, 0.1), (31, 0.23)):
        fast = capsule_rasters(segs, radius, size)
        for r in range(segs.shape[0]):
            dense = _dense_raster(segs[r], radius, size)
            assert dense.sum() > 0
            assert np.array_equal(fast[r], dense), f"raster {r} differs in {int((fast[r] != dense).sum())} pixels"


def test_capsule_rasters_skip_non_finite_segments() -> None:
    segs = np.array([[[[0.0, 0.0], [0.5, 0.0]], [[np.nan, 0.0], [1.0, 1.0]]]])
    fast = capsule_rasters(segs, 0.1, 48)
    assert np.array_equal(fast[0], _dense_raster(segs[0, :1], 0.1, 48))
