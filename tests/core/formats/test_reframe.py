"""A clip keyed on one rig's joint frames, put on the bone frames of the same rig held otherwise
(every joint's frame turned about its head, the whole rig moved rigidly): every joint plays where
it played, and a rig whose joints stand elsewhere is not taken for the same one."""

from __future__ import annotations

import numpy as np

from marionette.core.formats.reframe import reframing
from marionette.core.rig.rotations import matrix_from_quat, quat_normalize
from marionette.core.rig.samples import sample_humanoid, sample_walk
from marionette.core.rig.skeleton import Skeleton


def _turned_copy(sk: Skeleton, rng: np.random.Generator, move: np.ndarray, nudge: float = 0.0) -> tuple[Skeleton, np.ndarray]:
    """``sk`` moved by ``move`` with every joint frame turned by a random rotation (returned)."""
    turns = np.tile(np.eye(4), (len(sk), 1, 1))
    turns[:, :3, :3] = matrix_from_quat(quat_normalize(rng.normal(size=(len(sk), 4))))
    rest = move @ sk.rest_placements() @ turns
    rest[:, :3, 3] += nudge * rng.normal(size=(len(sk), 3))
    return Skeleton.from_rest_matrices(sk.names, [int(p) for p in sk.parents], rest, np.eye(4)), turns


def test_every_joint_plays_where_it_played_on_the_turned_frames() -> None:
    rig = sample_humanoid()
    clip = sample_walk(rig, frames=30)
    sk = rig.skeleton
    move = np.eye(4)
    move[:3, :3] = matrix_from_quat(quat_normalize(np.array([0.9, 0.3, -0.2, 0.1])))
    move[:3, 3] = [2.0, -1.0, 0.5]
    other, turns = _turned_copy(sk, np.random.default_rng(7), move)
    r = reframing(sk, other)
    assert r is not None and r.skeleton.signature() == other.signature()
    assert np.abs(r.motion - move).max() < 1e-9
    moved = r.clip(clip)
    before = move @ sk.placement @ sk.forward_kinematics(*_full(sk, clip)) @ turns
    after = other.forward_kinematics(*_full(other, moved))
    assert np.abs(after - before).max() < 1e-9


def _full(sk: Skeleton, clip) -> tuple[np.ndarray, np.ndarray]:
    """The clip's keys on every joint of ``sk`` (identity where the clip names none)."""
    rot = np.zeros((clip.frame_count, len(sk), 4))
    rot[..., 0] = 1.0
    tr = np.zeros((clip.frame_count, len(sk), 3))
    cols = [sk.index(n) for n in clip.names]
    rot[:, cols], tr[:, cols] = clip.rotations, clip.translations
    return rot, tr


def test_joints_standing_elsewhere_are_not_the_same_rig() -> None:
    sk = sample_humanoid().skeleton
    other, _ = _turned_copy(sk, np.random.default_rng(3), np.eye(4), nudge=0.01)
    assert reframing(sk, other) is None
