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


def test_rotation_since_first_frame_ignores_bone_axes_and_sees_a_lost_twist() -> None:
    """The rotation since the first frame compares the motion itself: a rig onto itself is off by
    nothing; other bone axes (every bone's rest rotated about itself) change nothing; a hand that
    keeps its direction but stops turning about it on the second half of the clip is off by
    exactly that turn, which bone directions alone cannot show."""
    from marionette.core import rotations as R
    from marionette.core.measure import rotation_since_first_frame, rotation_since_first_frame_by_group
    from marionette.core.retarget import RigInput, bind, source_placements
    from marionette.core.samples import sample_humanoid, sample_walk

    rig = sample_humanoid()
    clip = sample_walk(rig, frames=40)
    binding = bind(RigInput(rig.skeleton, rig.slots, rig.tails), RigInput(rig.skeleton, rig.slots, rig.tails))
    src = source_placements(binding, clip)
    same = rotation_since_first_frame_by_group(binding, src, src)
    assert set(same) == {"trunk", "arms", "hands", "legs", "feet/toes", "head"}
    assert all(g["off_max"] < 1e-6 for g in same.values())
    assert same["legs"]["source"] > 5.0 and abs(same["legs"]["target"] - same["legs"]["source"]) < 1e-9

    rng = np.random.default_rng(3)
    axes = R.matrix_from_quat(R.quat_from_axis_angle(rng.normal(size=(len(rig.skeleton), 3)), rng.uniform(-np.pi, np.pi, len(rig.skeleton))))
    rolled = src.copy()
    rolled[..., :3, :3] = src[..., :3, :3] @ axes
    assert max(g["off_max"] for g in rotation_since_first_frame_by_group(binding, src, rolled).values()) < 1e-6

    hand = binding.source.slots["hand.L"]
    twisted = src.copy()
    along = src[:, hand, :3, 1]  # the hand bone's own axis (Y), frame by frame
    turn = R.matrix_from_quat(R.quat_from_axis_angle(along, np.radians(np.where(np.arange(40) >= 20, 5.0, 0.0))))
    twisted[:, hand, :3, :3] = turn @ src[:, hand, :3, :3]
    off = rotation_since_first_frame(binding, src, twisted)["hand.L"]["off"]
    assert np.allclose(off, np.where(np.arange(40) >= 20, 5.0, 0.0), atol=1e-6)
    assert abs(rotation_since_first_frame_by_group(binding, src, twisted)["hands"]["off"] - 5.0 * 20 / 40 / 2) < 1e-6
