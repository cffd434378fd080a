"""Clip container: validation, timing and resampling."""

from __future__ import annotations

import numpy as np
import pytest

from marionette.core.errors import ClipError
from marionette.core.rig import rotations as R
from marionette.core.rig.clip import Clip


def spin_clip(frames=121, fps=120.0, speed=1.0):
    t = np.arange(frames) / fps
    rot = R.quat_from_axis_angle([0.0, 0.0, 1.0], speed * t)[:, None, :]
    tr = np.stack([t, np.zeros_like(t), np.zeros_like(t)], -1)[:, None, :]
    return Clip.from_frames(["root"], rot, tr, fps=fps, first_frame=1)


def test_resampling_keeps_timing_not_frame_count():
    clip = spin_clip()
    at24 = clip.resample(24.0)
    assert at24.frame_count == 25  # one second of motion at 24 fps, both ends included
    assert abs(at24.duration - clip.duration) < 1e-12
    # The motion at a shared instant is the same: angle = speed * time.
    assert np.abs(R.quat_angle(at24.rotations[:, 0]) - at24.times).max() < 1e-9
    assert np.abs(at24.translations[:, 0, 0] - at24.times).max() < 1e-12


def test_frame_numbers_keep_or_restart():
    clip = spin_clip(frames=11, fps=30.0)
    assert np.allclose(clip.frame_numbers(), np.arange(1, 12))
    assert np.allclose(clip.frame_numbers(60.0, keep_frames=False), 1 + np.arange(11) * 2)
    # A 120 fps clip starting on frame 1 starts on frame 1 of a 24 fps scene, on whole frames.
    at24 = spin_clip(frames=121, fps=120.0).resample(24.0)
    assert np.allclose(at24.frame_numbers(), np.arange(1, 26))
    late = Clip.from_frames(["root"], np.tile([1.0, 0, 0, 0], (5, 1, 1)), np.zeros((5, 1, 3)), fps=120.0, first_frame=121)
    assert late.frame_numbers(24.0)[0] == pytest.approx(25.0)  # one second in, at either rate


def test_nan_keys_are_refused_naming_bone_and_frame():
    clip = spin_clip(frames=5, fps=24.0)
    rot = clip.rotations.copy()
    rot[3, 0, 1] = np.nan
    bad = Clip.from_frames(["root"], rot, clip.translations, fps=24.0, name="Walk")
    with pytest.raises(ClipError, match=r"'Walk'.*'root'.*frame 4"):
        bad.validate()


def test_empty_clip_is_refused():
    empty = Clip(("a",), np.zeros(0), 24.0, np.zeros((0, 1, 4)), np.zeros((0, 1, 3)), name="Empty")
    with pytest.raises(ClipError, match="no frames"):
        empty.validate()


def test_shape_mismatch_names_expected_shape():
    with pytest.raises(ClipError, match=r"\(2, 1, 4\)"):
        Clip(("a",), np.arange(2.0), 24.0, np.zeros((2, 2, 4)), np.zeros((2, 1, 3)))
