"""Onto a copy of a clip's own skeleton with other bone rolls (same rest positions), every mapped
bone must turn as the clip turns it: rotation in skeleton space relative to its rest, twist
included, compared after undoing the roll change. Hands (a BVH hand whose finger base is a bone of
its own), toes, eyes and jaw are the bones geometric frames used to lose; a hips bone that starts
below the thigh roots must not move the spine away from the clip either."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from marionette.core.batch.baking import bvh_rest_tails
from marionette.core.formats.bvh import read_bvh
from marionette.core.mapping.auto_map import auto_map_skeleton
from marionette.core.measure.figures import bone_direction_errors
from marionette.core.retarget.geometric import RigInput, bind, retarget, source_placements
from marionette.core.rig import rotations as R
from marionette.core.rig.clip import Clip
from marionette.core.rig.samples import SampleRig, bone_matrix, sample_humanoid, sample_walk
from marionette.core.rig.skeleton import Skeleton
from tests.helpers.data import shared_file

BVH_CLIPS = ["bvh/cmu/12_03_motionbuilder.bvh", "bvh/cmu/02_02_daz.bvh", "bvh/makehuman/walk1_zup.bvh"]


def rolled_copy(skeleton: Skeleton, tails: np.ndarray, seed: int) -> Skeleton:
    """The same joints at the same rest positions, each bone turned about its own head-to-tail
    axis by a random roll."""
    rng = np.random.default_rng(seed)
    rest = skeleton.rest_placements().copy()
    for b in range(len(skeleton)):
        axis = rest[b, :3, :3].T @ (tails[b] - rest[b, :3, 3])
        if np.linalg.norm(axis) < 1e-9:
            axis = np.array([0.0, 1.0, 0.0])
        roll = R.matrix_from_quat(R.quat_from_axis_angle(axis / np.linalg.norm(axis), rng.uniform(-np.pi, np.pi)))
        rest[b, :3, :3] = rest[b, :3, :3] @ roll
    parents = [None if p < 0 else skeleton.names[p] for p in skeleton.parents]
    return Skeleton.from_rest_matrices(skeleton.names, parents, rest)


def every_joint_moving(clip: Clip, bones: list[str], degrees: float = 20.0, seed: int = 3) -> Clip:
    """``clip`` with a smooth turn of up to ``degrees`` about each local axis added to each of
    ``bones`` (wrist twist, toe bend, eyes and jaw included)."""
    rng = np.random.default_rng(seed)
    t = clip.frame_count
    cols = [clip.names.index(b) for b in bones]
    phase = rng.uniform(0.0, 2.0 * np.pi, (len(cols), 3))
    q = clip.rotations.copy()
    frames = np.arange(t)[:, None]
    for a in range(3):
        angle = np.radians(degrees) * np.sin(0.05 * frames * (1 + a) + phase[None, :, a])
        axis = np.broadcast_to(np.eye(3)[a], (t, len(cols), 3))
        q[:, cols] = R.quat_multiply(q[:, cols], R.quat_from_axis_angle(axis, angle))
    return replace(clip, rotations=q)


def rotation_errors(source: Skeleton, target: Skeleton, slots: dict[str, str], clip: Clip, seed: int = 0):
    """Per mapped slot, the angle (degrees, per frame) between the source bone's rotation from its
    rest and the target's, both in skeleton space; and the binding and placements."""
    tails = _tails[id(source)]
    binding = bind(RigInput(source, slots, tails), RigInput(target, slots, tails))
    result = retarget(binding, clip)
    ws = source_placements(binding, clip)
    wt = target.forward_kinematics(result.clip.rotations, result.clip.translations)
    rs, rt = source.rest_placements()[:, :3, :3], target.rest_placements()[:, :3, :3]
    out = {}
    for slot, name in slots.items():
        i = source.index(name)
        ds = ws[:, i, :3, :3] @ rs[i].T
        dt = wt[:, i, :3, :3] @ rt[i].T
        out[slot] = np.degrees(R.quat_angle_between(R.quat_from_matrix(ds), R.quat_from_matrix(dt)))
    return out, binding, ws, wt


_tails: dict[int, np.ndarray] = {}


def _bvh(relative: str) -> tuple[Skeleton, np.ndarray, dict[str, str], Clip]:
    bvh = read_bvh(shared_file(relative))
    sk = bvh.skeleton()
    tails = bvh_rest_tails(bvh)
    _tails[id(sk)] = tails
    return sk, tails, auto_map_skeleton(sk, tails).bones(), bvh.clip()


def _sample() -> tuple[Skeleton, np.ndarray, dict[str, str], Clip]:
    rig = sample_humanoid()
    _tails[id(rig.skeleton)] = rig.tails
    return rig.skeleton, rig.tails, rig.slots, sample_walk(rig, frames=48)


def _relative_turn(w: np.ndarray, rest: np.ndarray, parent: int, child: int) -> np.ndarray:
    """Angle (degrees) of ``child``'s turn relative to ``parent`` away from their rest relation."""
    rel = np.swapaxes(w[:, parent, :3, :3], -1, -2) @ w[:, child, :3, :3]
    at_rest = rest[parent, :3, :3].T @ rest[child, :3, :3]
    return np.degrees(R.quat_angle_between(R.quat_from_matrix(rel), R.quat_from_matrix(at_rest)[None]))


@pytest.mark.parametrize("moving", [False, True], ids=["as recorded", "every mapped joint moving"])
@pytest.mark.parametrize("clip_file", [*BVH_CLIPS, "sample"])
def test_a_roll_randomised_copy_reproduces_every_mapped_bone(clip_file, moving):
    sk, tails, slots, clip = _sample() if clip_file == "sample" else _bvh(clip_file)
    if moving:
        clip = every_joint_moving(clip, list(slots.values()))
    errors, binding, ws, wt = rotation_errors(sk, rolled_copy(sk, tails, seed=7), slots, clip)
    worst = {slot: float(e.max()) for slot, e in errors.items()}
    assert max(worst.values()) < 0.1, sorted(worst.items(), key=lambda kv: -kv[1])[:5]
    assert set(errors) == set(slots)  # every mapped bone was compared
    directions = bone_direction_errors(binding, ws, wt)
    assert max(float(np.nanmax(v)) for v in directions.values()) < 0.01
    # The comparison can fail: the source's toes do turn against the feet (CMU's as recorded;
    # the others' only once every mapped joint moves), and its hands against the forearms.
    rest = sk.rest_placements()
    if moving or clip_file == BVH_CLIPS[0]:
        for side in ("L", "R"):
            if f"toes.{side}" not in slots:
                continue  # Daz's clip maps no toes
            toe, foot = sk.index(slots[f"toes.{side}"]), sk.index(slots[f"foot.{side}"])
            assert _relative_turn(ws, rest, foot, toe).max() > 5.0
    if moving:
        for side in ("L", "R"):
            hand, forearm = sk.index(slots[f"hand.{side}"]), sk.index(slots[f"forearm.{side}"])
            assert _relative_turn(ws, rest, forearm, hand).max() > 5.0


def test_cmu_hands_keep_their_own_rotation_not_the_finger_base_bend():
    """CMU's hand is a zero-length wrist whose finger base is a bone of its own, bent ~20 degrees
    over the clip: before, the hand took that bend and was 19-23 degrees away from the clip."""
    sk, tails, slots, clip = _bvh(BVH_CLIPS[0])
    errors, _, ws, _ = rotation_errors(sk, rolled_copy(sk, tails, seed=1), slots, clip)
    base = sk.index("LeftFingerBase")
    rest = sk.rest_placements()
    assert _relative_turn(ws, rest, sk.index("LeftHand"), base).mean() > 10.0
    for slot in ("hand.L", "hand.R", "toes.L", "toes.R", "neck", "upper_chest"):
        assert errors[slot].max() < 0.1, slot


def hips_below_thighs(rig: SampleRig, drop: float) -> SampleRig:
    """The rig with its hips bone starting ``drop`` below the thigh roots (straight below its own
    head): it rises from under the pelvis to the spine (thighs, spine and everything else where
    they were)."""
    sk = rig.skeleton
    rest = sk.rest_placements().copy()
    h = sk.index(rig.slots["hips"])
    thighs = [sk.index(rig.slots[f"thigh.{s}"]) for s in ("L", "R")]
    head = rest[h, :3, 3].copy()
    head[2] = rest[thighs, 2, 3].min() - drop
    rest[h] = bone_matrix(head, rig.tails[h])
    parents = [None if p < 0 else sk.names[p] for p in sk.parents]
    return SampleRig(Skeleton.from_rest_matrices(sk.names, parents, rest), rig.slots, rig.tails)


@pytest.mark.parametrize("drop", [0.45, 0.9])
def test_hips_starting_below_the_thigh_roots_change_nothing_but_that_head(drop):
    """A character whose hips bone rises from under the pelvis (its head ``drop`` below the thigh
    roots; 0.9 puts it at the floor) plays the clip as the same character whose hips bone starts
    0.3 below them: every bone turns alike (the hips' frame comes from the thigh roots and the
    spine, never from where the hips bone starts) and every other joint is at the same place,
    since a head that low is measured 15 % of hip height under the roots. Before, the hip height
    that scales the travel was taken at the low head (3 % of it for a head at the floor) and the
    pelvis swung about it."""
    source = sample_humanoid()
    clip = every_joint_moving(sample_walk(source, frames=40), list(source.slots.values()))
    plain = sample_humanoid(arms_down_angle=0.4, rolls=np.random.default_rng(4).uniform(-3.0, 3.0, 51))
    reference, low = hips_below_thighs(plain, 0.3), hips_below_thighs(plain, drop)
    rest = low.skeleton.rest_placements()
    hips = low.skeleton.index(low.slots["hips"])
    thigh_roots = [low.skeleton.index(low.slots[f"thigh.{s}"]) for s in ("L", "R")]
    assert rest[hips, 2, 3] < rest[thigh_roots, 2, 3].min() - 0.9 * drop
    out, scales = [], []
    for rig in (plain, reference, low):
        binding = bind(RigInput(source.skeleton, source.slots, source.tails), RigInput(rig.skeleton, rig.slots, rig.tails))
        result = retarget(binding, clip)
        out.append(rig.skeleton.forward_kinematics(result.clip.rotations, result.clip.translations))
        scales.append((binding.horizontal_scale, binding.vertical_scale))
    assert scales[2] == pytest.approx(scales[1], rel=1e-12)
    assert min(scales[2]) > 0.8 * min(scales[0])  # the travel keeps its size (3 % of it before)
    rest_a, rest_b = reference.skeleton.rest_placements()[:, :3, :3], rest[:, :3, :3]
    # Rotation of each bone from its rest, in skeleton space.
    da = out[1][..., :3, :3] @ np.swapaxes(rest_a, -1, -2)[None]
    db = out[2][..., :3, :3] @ np.swapaxes(rest_b, -1, -2)[None]
    angle = np.degrees(R.quat_angle_between(R.quat_from_matrix(da), R.quat_from_matrix(db)))
    assert angle.max() < 1e-6
    others = [i for i in range(len(plain.skeleton)) if i != hips]
    height = float(np.ptp(out[1][..., 2, 3]))
    assert np.abs(out[1][:, others, :3, 3] - out[2][:, others, :3, 3]).max() < 1e-6 * height


@pytest.mark.parametrize("target_fingers", [False, True])
def test_a_hand_without_fingers_keeps_its_wrist_twist_on_another_character(target_fingers):
    """A clip without finger bones whose wrists twist and bend: onto a character of other
    proportions, rest (A-pose) and rolls, with or without fingers, each hand turns relative to its
    forearm as the source's does (rotation since the first frame, in each rig's own space; the
    bodies face alike)."""
    source = sample_humanoid(fingers=False)
    walk = sample_walk(source, frames=40)
    hands = [source.slots["hand.L"], source.slots["hand.R"]]
    clip = every_joint_moving(walk, hands, degrees=35.0, seed=11)
    target = sample_humanoid(arms_down_angle=0.6, proportions=1.15, fingers=target_fingers,
                             rolls=np.random.default_rng(8).uniform(-3.0, 3.0, 51 if target_fingers else 21))
    binding = bind(RigInput(source.skeleton, source.slots, source.tails), RigInput(target.skeleton, target.slots, target.tails))
    result = retarget(binding, clip)
    ws = source_placements(binding, clip)
    wt = target.skeleton.forward_kinematics(result.clip.rotations, result.clip.translations)
    for side in ("L", "R"):
        turns = []
        for rig, w in ((source, ws), (target, wt)):
            sk = rig.skeleton
            hand, forearm = sk.index(rig.slots[f"hand.{side}"]), sk.index(rig.slots[f"forearm.{side}"])
            rel = np.swapaxes(w[:, forearm, :3, :3], -1, -2) @ w[:, hand, :3, :3]  # hand in forearm axes
            # Rotation since the first frame, in the forearm's frame at that time (skeleton space).
            turns.append(w[:, forearm, :3, :3] @ rel @ np.swapaxes(rel[:1], -1, -2) @ np.swapaxes(w[:, forearm, :3, :3], -1, -2))
        src_turn = np.degrees(R.quat_angle_between(R.quat_from_matrix(turns[0]), np.array([1.0, 0.0, 0.0, 0.0])))
        assert src_turn.max() > 30.0  # the wrist really turns against the forearm
        err = np.degrees(R.quat_angle_between(R.quat_from_matrix(turns[0]), R.quat_from_matrix(turns[1])))
        assert err.max() < 0.01, side
