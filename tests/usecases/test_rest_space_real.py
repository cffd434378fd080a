"""Rest-space retarget on a real same-family pair (docs/methods.md#rest-space): two clips of the Quaternius FBX onto
its own armature and onto copies of it with a moved rest, read from and written to Blender.

Copies are made in Blender from the armature's own rest: one with every bone rolled by a random
angle and the whole rest turned 90 degrees and shifted (same joint positions, other joint axes,
other facing), one with both arms lowered 35 degrees as one piece (an A-pose of the same family).
The truth for every copy is known without either method: the same motion has each bone at the
source bone's skeleton-space orientation, turned by the copy's own rest change.
"""

from __future__ import annotations

import numpy as np
import pytest

from marionette.core.retarget.binding_cache import BindingCache, native_binding, native_refusal
from marionette.core.retarget.geometric import bind, retarget
from marionette.core.retarget.methods import retarget_with_methods
from marionette.core.retarget.rest_space import bind_rest_space, retarget_rest_space
from marionette.core.rig import rotations as R
from marionette.core.rig.skeleton import Skeleton
from tests.helpers.data import shared_file

pytestmark = [pytest.mark.bpy, pytest.mark.data]

FBX = "fbx/quaternius_male_casual.fbx"
CLIPS = ("Man_Walk", "Man_Run")
# Slots where the geometric-frame method itself does not reproduce this rig on itself (measured
# below, not assumed): the shins, whose segment ends at an IK-style foot hung from the root bone
# that does not stay on the shin's end (0.14 deg): the geometric method aims the shin at the
# foot, the rest-space method turns it as its bone turned. There the two methods cannot agree.
GEOMETRIC_SELF_MISMATCH = {"shin.L", "shin.R"}
TURN = R.matrix_from_quat(R.quat_from_axis_angle([0.0, 0.0, 1.0], np.pi / 2))  # the rolled copy's whole-rest turn
TURNS = {"own": np.eye(3), "rolled": TURN}


@pytest.fixture(scope="module")
def rigs():
    import bpy

    from marionette.bridge.action_write import create_armature
    from marionette.bridge.clip_read import clip_from_action
    from marionette.bridge.file_import import load_file
    from marionette.bridge.skeleton_read import rest_heads_tails
    from marionette.usecases.rigs import rig_input

    bpy.ops.wm.read_factory_settings(use_empty=True)
    loaded = load_file(shared_file(FBX))
    arm = max(loaded.armatures, key=lambda a: len(a.data.bones))
    twin = max(load_file(shared_file(FBX)).armatures, key=lambda a: len(a.data.bones))  # a second import
    source, mapping = rig_input(arm)
    sk = source.skeleton
    rest = sk.rest_placements()
    _, tails = rest_heads_tails(arm)
    parents = [None if p < 0 else sk.names[p] for p in sk.parents]

    rng = np.random.default_rng(6)
    roll = R.matrix_from_quat(R.quat_from_axis_angle([0.0, 1.0, 0.0], rng.uniform(-np.pi, np.pi, len(sk))))
    move = np.eye(4)
    move[:3, :3], move[:3, 3] = TURN, [1.0, 2.0, 0.0]
    rolled_rest = move @ rest
    rolled_rest[:, :3, :3] = rolled_rest[:, :3, :3] @ roll
    rolled = create_armature(Skeleton.from_rest_matrices(sk.names, parents, rolled_rest), "RolledTurned", tails=tails @ move[:3, :3].T + move[:3, 3])

    lowered_rest, lowered_tails = rest.copy(), tails.copy()
    for side, sign in (("L", 1.0), ("R", -1.0)):
        top = sk.index(f"UpperArm.{side}")
        pivot = lowered_rest[top, :3, 3].copy()
        g = R.matrix_from_quat(R.quat_from_axis_angle([0.0, 1.0, 0.0], sign * np.radians(35.0)))
        for i in [top, *sk.descendants(top)]:
            lowered_rest[i, :3, :3] = g @ lowered_rest[i, :3, :3]
            lowered_rest[i, :3, 3] = g @ (lowered_rest[i, :3, 3] - pivot) + pivot
            lowered_tails[i] = g @ (lowered_tails[i] - pivot) + pivot
    lowered = create_armature(Skeleton.from_rest_matrices(sk.names, parents, lowered_rest), "ArmsLowered", tails=lowered_tails)

    clips = {}
    for name in CLIPS:
        action = next(a for a in loaded.actions if a.name.split("|")[-1] == name)
        clips[name] = (action, clip_from_action(arm, action))
    targets = {
        "own": (arm, source),
        "twin": (twin, rig_input(twin, mapping)[0]),
        "rolled": (rolled, rig_input(rolled, mapping)[0]),
        "lowered": (lowered, rig_input(lowered, mapping)[0]),
    }
    yield bpy, source, targets, clips
    bpy.ops.wm.read_factory_settings(use_empty=True)


def _angle(a, b):
    return np.degrees(R.quat_angle_between(R.quat_from_matrix(a), R.quat_from_matrix(b)))


def _per_slot(rig, w1, w2, slots=None):
    """Largest angle over the clip between two placements of each slot's bone."""
    out = {}
    for slot, bone in rig.slots.items():
        if slots is None or slot in slots:
            i = rig.skeleton.index(bone)
            out[slot] = float(_angle(w1[:, i, :3, :3], w2[:, i, :3, :3]).max())
    return out


def _truth(source, target, clip, turn):
    """Skeleton-space orientations ``(T, B, 3, 3)`` of the copy playing the clip: the source's,
    turned with the copy's whole rest (``turn``), with each bone's own axis change (its roll)."""
    qs = source.skeleton.forward_kinematics(clip.rotations, clip.translations)[..., :3, :3]
    rs = R.orthonormalize(source.skeleton.rest_placements()[:, :3, :3])
    rt = R.orthonormalize(target.skeleton.rest_placements()[:, :3, :3])
    axes = np.swapaxes(rs, -1, -2) @ turn.T @ rt
    return turn @ qs @ axes


def test_native_binding_exactly_for_the_same_layout(rigs):
    _, source, targets, clips = rigs
    _, clip = clips["Man_Walk"]
    cache = BindingCache()
    for label, native in (("own", True), ("twin", True), ("rolled", False), ("lowered", False)):
        _, target = targets[label]
        assert (native_binding(clip, source.skeleton, target.skeleton) is not None) == native, label
        outcome = retarget_with_methods(cache, source, target, clip)
        assert outcome.native == native, label
        if native:
            assert outcome.result.clip.rotations.tobytes() == clip.rotations.tobytes(), label
            assert outcome.result.clip.translations.tobytes() == clip.translations.tobytes(), label
        else:
            assert "same joint names but a different layout" in native_refusal(clip, source.skeleton, target.skeleton), label


@pytest.mark.parametrize("clip_name", CLIPS)
def test_rest_space_equals_geometric_frames_where_both_apply(rigs, clip_name):
    _, source, targets, clips = rigs
    _, clip = clips[clip_name]
    ws = source.skeleton.forward_kinematics(clip.rotations, clip.translations)

    # Where the geometric frames apply: slots it reproduces on the rig itself.
    g_self = retarget(bind(source, source), clip)
    wg_self = source.skeleton.forward_kinematics(g_self.clip.rotations, g_self.clip.translations)
    self_error = _per_slot(source, wg_self, ws)
    both_apply = {s for s, e in self_error.items() if e <= 0.1}
    assert set(self_error) - both_apply == GEOMETRIC_SELF_MISMATCH
    # Rest-space reproduces the rig on itself everywhere, those slots included (float32 rests).
    r_self = retarget_rest_space(bind_rest_space(source, source), clip)
    wr_self = source.skeleton.forward_kinematics(r_self.clip.rotations, r_self.clip.translations)
    assert max(_per_slot(source, wr_self, ws).values()) < 1e-3

    for label in ("own", "rolled"):
        _, target = targets[label]
        g = retarget(bind(source, target), clip)
        r = retarget_rest_space(bind_rest_space(source, target), clip)
        wg = target.skeleton.forward_kinematics(g.clip.rotations, g.clip.translations)
        wr = target.skeleton.forward_kinematics(r.clip.rotations, r.clip.translations)
        diff = _per_slot(target, wg, wr, both_apply)
        assert len(diff) == len(source.slots) - len(GEOMETRIC_SELF_MISMATCH), label
        assert max(diff.values()) < 0.1, (label, {s: round(e, 4) for s, e in diff.items() if e >= 0.1})
        # Rest-space against the truth, on every slot; what is left is the single precision of
        # rests written to and read back from Blender (orthogonal to ~4e-5).
        truth = np.array(wr, copy=True)
        truth[..., :3, :3] = _truth(source, target, clip, TURNS[label])
        assert max(_per_slot(target, wr, truth).values()) < 5e-3, label


@pytest.mark.parametrize("clip_name", CLIPS)
def test_rest_matching_on_the_arms_lowered_copy_plays_the_true_motion(rigs, clip_name):
    _, source, targets, clips = rigs
    _, clip = clips[clip_name]
    _, lowered = targets["lowered"]
    truth = source.skeleton.forward_kinematics(clip.rotations, clip.translations)  # same joint axes: same orientations
    matched = retarget_rest_space(bind_rest_space(source, lowered, match_rest=True), clip)
    plain = retarget_rest_space(bind_rest_space(source, lowered), clip)
    wm = lowered.skeleton.forward_kinematics(matched.clip.rotations, matched.clip.translations)
    wp = lowered.skeleton.forward_kinematics(plain.clip.rotations, plain.clip.translations)
    assert max(_per_slot(lowered, wm, truth).values()) < 0.01
    off = _per_slot(lowered, wp, truth)
    assert min(off[s] for s in ("upper_arm.L", "forearm.R", "hand.L")) > 30.0  # what matching removes


def test_keys_written_to_blender_play_the_rest_space_motion(rigs):
    """The rest-space result on the rolled, turned copy, keyed into an Action and read back:
    what Blender plays equals the geometric-frame result where both apply."""
    from marionette.bridge.action_write import write_action
    from marionette.bridge.clip_read import clip_from_action

    _, source, targets, clips = rigs
    _, clip = clips["Man_Run"]
    obj, target = targets["rolled"]
    r = retarget_rest_space(bind_rest_space(source, target), clip)
    action = write_action(obj, r.clip, "Run_rest_space", fps=clip.fps)
    played = clip_from_action(obj, action, frames=clip.frame_numbers(), fps=clip.fps)
    wp = target.skeleton.forward_kinematics(played.rotations, played.translations)
    g = retarget(bind(source, target), clip)
    wg = target.skeleton.forward_kinematics(g.clip.rotations, g.clip.translations)
    slots = set(target.slots) - GEOMETRIC_SELF_MISMATCH
    assert max(_per_slot(target, wp, wg, slots).values()) < 0.1
    hips = target.skeleton.index(target.slots["hips"])
    assert np.abs(wp[:, hips, :3, 3] - wg[:, hips, :3, 3]).max() < 1e-3 * np.ptp(wg[:, hips, :3, 3], axis=0).max() + 1e-4
