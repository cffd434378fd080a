"""Settings of the Controls panel in Blender: joint limits, look-at turn weights and the closure
solver reach the core, and objects sharing one Armature keep their own controls."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.helpers.controls_scenes import _arm_ik, _assign, _key_path, _pose_matrices, _walking_body, _world_heads

pytestmark = pytest.mark.bpy


# --- settings of the Controls panel: joint limits, look-at weights, closure solver ------------


def _local_quat(obj, bone):
    from marionette.core.rig.rotations import quat_from_matrix

    return quat_from_matrix(np.array(obj.pose.bones[bone].matrix_basis)[:3, :3])


def test_cone_and_hinge_limits_hold_an_arm_within_them(sample):
    """An arm reaching for a point in front of the chest: with the panel's hinge the forearm
    turns only about its X axis, within the range; with the cone the upper arm stays within its
    swing and twist. Measured on Blender's pose; without the limits the same reach leaves both."""
    bpy, arm = sample
    from marionette.core.controls.joint_limits import signed_angle_about
    from marionette.core.rig.rotations import quat_angle, swing_twist
    from marionette.viewport import live_preview

    scene = bpy.context.scene
    row = _arm_ik(bpy, arm)
    row.bone_start, row.bone_end, row.end_bone = "UpperArm.L", "Forearm.L", "Hand.L"
    frames = range(1, 48, 4)
    chest = []
    for f in frames:
        scene.frame_set(f)
        chest.append(_world_heads(arm, ["Chest"])[0])
    # A point in front of the chest, carried along with the walk.
    bpy.ops.object.empty_add()
    empty = bpy.context.active_object
    _key_path(bpy, empty, np.array(list(frames), dtype=float), np.array(chest) + np.array([0.05, -0.3, 0.0]))
    row.target_object = empty
    bpy.context.view_layer.objects.active = arm

    def measure():
        off_hinge, hinge, swing, twist, residual = [], [], [], [], []
        for f in frames:
            scene.frame_set(f)
            sw, tw = swing_twist(_local_quat(arm, "Forearm.L"), [1.0, 0.0, 0.0])
            off_hinge.append(float(quat_angle(sw)))
            hinge.append(float(signed_angle_about(tw, [1.0, 0.0, 0.0])))
            sw, tw = swing_twist(_local_quat(arm, "UpperArm.L"), [0.0, 1.0, 0.0])
            swing.append(float(quat_angle(sw)))
            twist.append(abs(float(signed_angle_about(tw, [0.0, 1.0, 0.0]))))
            residual.append(live_preview.summary(arm)[row.name]["residual"])
        return {k: np.array(v) for k, v in zip(("off", "hinge", "swing", "twist", "residual"), (off_hinge, hinge, swing, twist, residual), strict=True)}

    arm.marionette_controls.live_preview = True
    free = measure()
    lo, hi = math.radians(-20.0), math.radians(20.0)
    cone, cone_twist = math.radians(30.0), math.radians(10.0)
    row.use_hinge_limit, row.hinge_axis, row.hinge_min, row.hinge_max = True, "POS_X", lo, hi
    row.use_cone_limit, row.cone_angle, row.cone_twist = True, cone, cone_twist
    assert live_preview.validation(arm) == {}
    held = measure()
    print(
        f"\nforearm off its hinge axis: free {math.degrees(free['off'].max()):.1f} deg, limited {held['off'].max():.1e} rad; "
        f"hinge angle limited {math.degrees(held['hinge'].min()):.2f}..{math.degrees(held['hinge'].max()):.2f} deg "
        f"(free {math.degrees(np.abs(free['hinge']).max()):.1f}); upper arm swing free {math.degrees(free['swing'].max()):.1f}, "
        f"limited {math.degrees(held['swing'].max()):.3f} deg, twist {math.degrees(held['twist'].max()):.3f} deg; "
        f"residual free {free['residual'].max():.1e}, limited {held['residual'].min():.3f}"
    )
    # Free, the reach bends the elbow beyond the range (or off one axis) and swings the upper
    # arm beyond the cone; held, both stay inside, and the target is out of reach.
    assert max(free["off"].max(), np.abs(free["hinge"]).max() - hi) > math.radians(5.0)
    assert max(free["swing"].max() - cone, free["twist"].max() - cone_twist) > math.radians(5.0)
    assert held["off"].max() <= 1e-4
    assert held["hinge"].min() >= lo - 1e-4 and held["hinge"].max() <= hi + 1e-4
    assert held["swing"].max() <= cone + 1e-4 and held["twist"].max() <= cone_twist + 1e-4
    assert free["residual"].max() <= 1e-3 < held["residual"].min()


def test_look_at_turn_weights_share_the_turn(sample):
    """The panel's turn weights of a neck-to-head look-at: each bone's turn (its pose against the
    animation's, measured on Blender's pose) takes its weight over their sum of the whole turn."""
    bpy, arm = sample
    from marionette.core.rig.rotations import quat_angle_between

    scene = bpy.context.scene
    assert bpy.ops.marionette.control_add(kind="LOOK_AT", create_target=False) == {"FINISHED"}
    row = arm.marionette_controls.controls[-1]
    assert (row.bone_start, row.bone_end) == ("Neck", "Head")
    assert tuple(row.look_weights[:2]) == (1.0, 2.0)  # the head takes two thirds by default
    row.yaw_min, row.yaw_max = -math.radians(170.0), math.radians(170.0)
    scene.frame_set(10)
    head = _world_heads(arm, ["Head"])[0]
    # Far away (so the neck's turn barely moves the eye against it), to the side and a little up.
    bpy.ops.object.empty_add(location=tuple(head + np.array([8.0, -3.0, 1.5])))
    row.target_object = bpy.context.active_object
    bpy.context.view_layer.objects.active = arm
    animated = {b: _local_quat(arm, b) for b in ("Neck", "Head")}
    arm.marionette_controls.live_preview = True
    shares = {}
    for weights in ((1.0, 2.0), (1.0, 1.0), (1.0, 3.0), (0.0, 1.0)):
        row.look_weights[0], row.look_weights[1] = weights
        scene.frame_set(10)
        neck, head_turn = (float(quat_angle_between(_local_quat(arm, b), animated[b])) for b in ("Neck", "Head"))
        shares[weights] = (neck / (neck + head_turn), neck + head_turn)
    print("\nneck's share of the turn by weights: " + ", ".join(f"{w}: {s:.3f} of {math.degrees(t):.1f} deg" for w, (s, t) in shares.items()))
    for (w_neck, w_head), (share, total) in shares.items():
        assert total > math.radians(30.0)
        assert abs(share - w_neck / (w_neck + w_head)) <= 0.02
    assert shares[(0.0, 1.0)][0] <= 1e-5


@pytest.mark.slow
def test_closure_solver_choice_reaches_the_core(addon):
    """Both arms closing on one point with each solver of the panel: every one closes the loop,
    CCD (which turns the bones in their own axes) lands on another pose than FABRIK, and the
    two-bone solver refuses branches of three bones."""
    bpy = addon
    from marionette.viewport import live_preview

    arm, skeleton, rot, tr = _walking_body(bpy, "Body", 12)
    scene = bpy.context.scene
    bpy.context.view_layer.objects.active = arm
    assert bpy.ops.marionette.control_add(kind="CLOSURE") == {"FINISHED"}
    closure = arm.marionette_controls.controls[-1]
    closure.bone_start, closure.bone_end = "upper_arm.L", "forearm.L"
    closure.second_start, closure.second_end = "upper_arm.R", "forearm.R"
    bpy.ops.object.empty_add(location=(0.0, -0.35, 1.25))
    closure.target_object = closure.second_object = bpy.context.active_object
    bpy.context.view_layer.objects.active = arm
    arm.marionette_controls.live_preview = True
    names = [pb.name for pb in arm.pose.bones]
    poses, gaps = {}, {}
    for solver in ("FABRIK", "CCD", "TWO_BONE"):
        closure.closure_solver = solver
        assert live_preview.validation(arm) == {}
        out, gap = [], 0.0
        for f in range(1, 13):
            scene.frame_set(f)
            m = _pose_matrices(arm)
            tips = [m[names.index(b)][:3, 3] + m[names.index(b)][:3, 1] * arm.data.bones[b].length for b in ("forearm.L", "forearm.R")]
            gap = max(gap, float(np.linalg.norm(tips[0] - tips[1])))
            out.append(m)
        poses[solver], gaps[solver] = np.array(out), gap
    apart = float(np.abs(poses["CCD"] - poses["FABRIK"]).max())
    closure.closure_solver = "TWO_BONE"
    closure.bone_start = closure.second_start = ""
    closure.bone_start, closure.second_start = "shoulder.L", "shoulder.R"
    error = live_preview.validation(arm).get(0, "")
    print(f"\nclosure gaps by solver: {gaps}; CCD vs FABRIK poses {apart:.1e}; three-bone branches with two-bone: {error!r}")
    assert all(g <= 1e-3 for g in gaps.values())
    assert apart > 1e-3
    assert "two_bone" in error


# --- objects sharing one Armature ------------------------------------------------------------


def test_two_objects_sharing_an_armature_keep_their_own_controls(sample):
    bpy, arm = sample
    scene = bpy.context.scene
    twin = arm.copy()  # shares arm.data
    scene.collection.objects.link(twin)
    twin.location.x = 1.5
    assert twin.data == arm.data
    _assign(twin, arm.animation_data.action)
    bpy.context.view_layer.objects.active = arm
    assert bpy.ops.marionette.control_add(kind="TWO_BONE_IK", create_target=True) == {"FINISHED"}
    target_a = arm.marionette_controls.controls[0].target_object
    target_a.location = (0.45, -0.35, 1.25)
    arm.marionette_controls.live_preview = True
    twin.marionette_controls.controls.clear()
    scene.frame_set(3)
    hand_a = _world_heads(arm, ["Hand.L"])[0]
    hand_twin = _world_heads(twin, ["Hand.L"])[0] - np.array([1.5, 0.0, 0.0])
    # The twin has no controls: its hand is where the walk puts it, far from arm's target.
    assert np.linalg.norm(hand_a - np.array(target_a.location)) < 1e-5
    assert np.linalg.norm(hand_twin - np.array(target_a.location)) > 0.05
    # Now the twin reaches its own target; arm keeps reaching its own.
    bpy.context.view_layer.objects.active = twin
    assert bpy.ops.marionette.control_add(kind="TWO_BONE_IK", create_target=True) == {"FINISHED"}
    target_b = twin.marionette_controls.controls[0].target_object
    target_b.location = (1.5 + 0.4, -0.3, 1.1)
    twin.marionette_controls.live_preview = True
    for f in (4, 5, 6):
        scene.frame_set(f)
        assert np.linalg.norm(_world_heads(arm, ["Hand.L"])[0] - np.array(target_a.location)) < 1e-5
        assert np.linalg.norm(_world_heads(twin, ["Hand.L"])[0] - np.array(target_b.location)) < 1e-5
