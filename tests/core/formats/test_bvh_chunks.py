"""A long BVH take converted a piece at a time (``BvhData.clip_at_rate``) gives the clip of the whole
file resampled in one piece (``clip().resample``), to the last bit, whatever the piece size."""

from __future__ import annotations

import numpy as np
import pytest

from marionette.core.formats.bvh import parse_bvh


def _take(frames: int = 157) -> str:
    """A three-joint BVH at 120 fps with two rotation orders and a moving root; its angles wrap
    at +-180 degrees as mocap files write them, so its quaternions change hemisphere there
    (continuity matters)."""
    rng = np.random.default_rng(7)
    t = np.arange(frames) / 120.0
    rows = np.column_stack(
        [
            np.sin(t) * 40.0, 90.0 + 3.0 * np.cos(5 * t), t * 60.0,  # root position
            400.0 * t, 30.0 * np.sin(3 * t), 10.0 * t,  # root Z X Y rotation: more than a turn
            rng.normal(0.0, 20.0, frames), 200.0 * t, rng.normal(0.0, 5.0, frames),  # spine Y X Z
            45.0 * np.sin(7 * t), rng.normal(0.0, 3.0, frames), (700.0 * t + 180.0) % 360.0 - 180.0,  # head Z X Y
        ]
    )
    motion = "\n".join(" ".join(f"{v:.6f}" for v in r) for r in rows)
    return f"""HIERARCHY
ROOT Hips
{{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
  JOINT Spine
  {{
    OFFSET 0 10 0
    CHANNELS 3 Yrotation Xrotation Zrotation
    JOINT Head
    {{
      OFFSET 0 12 1
      CHANNELS 3 Zrotation Xrotation Yrotation
      End Site
      {{
        OFFSET 0 5 0
      }}
    }}
  }}
}}
MOTION
Frames: {frames}
Frame Time: 0.0083333
{motion}
"""


@pytest.mark.parametrize("fps", [24.0, 25.0, 30.0, 59.94, 120.0, None])
@pytest.mark.parametrize("chunk", [1, 2, 7, 64, 10_000])
def test_pieces_give_the_whole_clip_resampled(fps: float | None, chunk: int) -> None:
    data = parse_bvh(_take(), "take.bvh")
    whole = data.clip().resample(data.fps if fps is None else fps)
    pieces = data.clip_at_rate(fps, chunk_frames=chunk)
    assert pieces.frame_count == whole.frame_count
    for field in ("times", "rotations", "translations"):
        assert np.array_equal(getattr(pieces, field), getattr(whole, field)), field
    assert (pieces.fps, pieces.first_frame, pieces.name, pieces.names) == (whole.fps, whole.first_frame, whole.name, whole.names)
    # The test means something only if hemispheres change in the take.
    q = data.local_rotations()
    assert np.any(np.einsum("tbi,tbi->tb", q[1:], q[:-1]) < 0.0)


def test_a_single_frame_and_a_bad_rate() -> None:
    data = parse_bvh(_take(1), "one.bvh")
    assert np.array_equal(data.clip_at_rate(24.0, chunk_frames=1).rotations, data.clip().resample(24.0).rotations)
    with pytest.raises(Exception, match="cannot resample"):
        parse_bvh(_take(), "take.bvh").clip_at_rate(-1.0)
