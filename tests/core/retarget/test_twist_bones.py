"""Forearm and shin twist bones (twist splits are handled, not left at rest: docs/pipeline.md#rigs-as-they-really-are): a twist
bone turns about its limb's axis by a share of the wrist's (ankle's) twist, the share being how
far along the limb it lies; every segment keeps its direction and the hand its orientation."""

from __future__ import annotations

import numpy as np
import pytest
from test_retarget import rig_input, with_extra_bone

from marionette.core.measure.figures import bone_direction_errors
from marionette.core.retarget.geometric import RetargetOptions, bind, retarget, source_placements
from marionette.core.rig import rotations as R
from marionette.core.rig.samples import SampleRig, bone_matrix, sample_humanoid, sample_walk
from marionette.core.rig.skeleton import Skeleton

SOURCE = sample_humanoid()


def twisting_walk(frames: int = 48):
    """The sample walk with the left hand turning about the forearm, back and forth to 80 deg."""
    clip = sample_walk(SOURCE, frames=frames)
    sk = SOURCE.skeleton
    hand = sk.index("Hand.L")
    rest = sk.rest_placements()
    # The hand's own Y runs along the forearm at rest: a turn about local Y is a wrist twist.
    angle = np.radians(80.0) * np.sin(np.linspace(0.0, 2.0 * np.pi, frames))
    twist = R.quat_from_axis_angle(np.array([0.0, 1.0, 0.0])[None], angle)
    rot = clip.rotations.copy()
    rot[:, hand] = R.quat_multiply(rot[:, hand], twist)
    assert np.allclose(rest[hand, :3, 1], [1.0, 0.0, 0.0], atol=1e-9)  # the sample's arm runs along +X
    return type(clip)(**{**clip.__dict__, "rotations": rot})


def with_leaf_twist(rig: SampleRig, limb: str, toward: str, new: str, at: float) -> SampleRig:
    """A twist bone hanging from ``limb`` (an engine-style leaf), a tenth of the limb long,
    starting ``at`` of the way from the limb's head to the head of ``toward``."""
    sk = rig.skeleton
    rest = sk.rest_placements()
    head, tail = rest[sk.index(limb), :3, 3], rest[sk.index(toward), :3, 3]
    start = head + at * (tail - head)
    end = start + 0.1 * (tail - head)
    names = [*sk.names, new]
    parents = [None if p < 0 else sk.names[p] for p in sk.parents] + [limb]
    mats = np.concatenate([rest, bone_matrix(start, end)[None]])
    out = Skeleton.from_rest_matrices(names, parents, mats)
    tails = dict(zip(names, np.concatenate([rig.tails, end[None]]), strict=True))
    return SampleRig(out, rig.slots, np.stack([tails[n] for n in out.names]))


def _twist_about(rel, axis):
    """Twist angles (deg) of rotations ``rel`` (T, 3, 3) about ``axis`` (swing-twist split)."""
    q = R.quat_from_matrix(rel)
    q = q * np.where(q[:, :1] < 0.0, -1.0, 1.0)
    return np.degrees(2.0 * np.arctan2(q[:, 1:] @ axis, q[:, 0]))


@pytest.mark.parametrize("kind", ["split", "leaf"])
def test_a_forearm_twist_bone_takes_its_share_of_the_wrist_twist(kind):
    clip = twisting_walk()
    base = sample_humanoid(arms_down_angle=0.5, proportions=0.95)
    if kind == "split":
        target = with_extra_bone(base, "Forearm.L", "Hand.L", "ForearmTwist.L")  # the elbow half keeps the name
        expected_share = 0.75  # the wrist half's middle lies three quarters down the forearm
    else:
        target = with_leaf_twist(base, "Forearm.L", "Hand.L", "ForearmTwist.L", at=0.6)
        expected_share = 0.65
    slots = {**target.slots, "forearm_twist.L": "ForearmTwist.L"}
    mapped = SampleRig(target.skeleton, slots, target.tails)
    b = bind(rig_input(SOURCE), rig_input(mapped), RetargetOptions())
    b_plain = bind(rig_input(SOURCE), rig_input(target), RetargetOptions())
    (bone, limb, distal, share), = b.twists
    assert (limb, distal) == ("forearm.L", "hand.L") and share == pytest.approx(expected_share, abs=1e-9)
    result, plain = retarget(b, clip), retarget(b_plain, clip)
    assert result.clip.coverage[bone] == 1.0
    sk = target.skeleton
    w = sk.forward_kinematics(result.clip.rotations, result.clip.translations)
    wp = sk.forward_kinematics(plain.clip.rotations, plain.clip.translations)
    fore, hand, tw = sk.index("Forearm.L"), sk.index("Hand.L"), sk.index("ForearmTwist.L")
    # The hand, every segment and every other bone are where they are without the twist slot.
    for j in range(len(sk)):
        if j != tw:
            assert np.abs(w[:, j] - wp[:, j]).max() < 1e-9, sk.names[j]
    errors = bone_direction_errors(b, source_placements(b, clip), w)
    errors_plain = bone_direction_errors(b_plain, source_placements(b_plain, clip), wp)
    assert max(float(np.nanmax(v)) for v in errors.values()) <= max(float(np.nanmax(v)) for v in errors_plain.values()) + 1e-9 < 1e-5
    # Both turns measured against the rest: the hand's and the twist bone's rotation relative to
    # the forearm beyond their rest relation, in the forearm's own axes (Y runs along it).
    rest = sk.rest_placements()[:, :3, :3]

    def relative(j):
        return np.swapaxes(w[:, fore, :3, :3], -1, -2) @ w[:, j, :3, :3] @ (rest[fore].T @ rest[j]).T

    y = np.array([0.0, 1.0, 0.0])
    hand_twist = _twist_about(relative(hand), y)
    bone_rel = relative(tw)
    bone_twist = _twist_about(bone_rel, y)
    assert np.ptp(hand_twist) > 100.0  # the clip turns the wrist back and forth
    assert np.abs(bone_twist - share * hand_twist).max() < 1e-6
    # A turn about the forearm's axis only: the bone's Y stays on the forearm's.
    assert np.abs(bone_rel[:, :, 1] - y).max() < 1e-9
