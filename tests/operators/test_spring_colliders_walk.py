"""Spring colliders on a real character in Blender (docs/controls.md#colliders): Quaternius' walking
man (tests/data/fbx/quaternius_male_casual.fbx, Man_Walk) given a ponytail on the head, with a
head sphere, shoulder and back capsules added from the Controls tab. Every point of the ponytail
stays outside every collider on every frame, live and baked, and Diagnostics shows the deepest
penetration; without the colliders the same ponytail goes into the body."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.data import shared_file

pytestmark = pytest.mark.bpy

#: The ponytail's joints from the back of the head down (armature space: Z up, facing -Y; the
#: man is 4.8 units tall). It hangs behind the back, clear of it, and the walk swings it in.
TAIL = [(0.0, 0.42, 4.62), (0.0, 0.56, 4.42), (0.0, 0.62, 4.17), (0.0, 0.64, 3.92), (0.0, 0.64, 3.67), (0.0, 0.62, 3.42), (0.0, 0.60, 3.17)]


def _man(bpy):
    from marionette.bridge import compat
    from marionette.bridge.file_import import load_file

    f = load_file(shared_file("fbx/quaternius_male_casual.fbx"))
    arm = max(f.armatures, key=lambda a: len(a.data.bones))
    walk = next(a for a in f.actions if a.name.endswith("Man_Walk"))
    compat.assign_action(arm, walk, compat.action_slot_for(walk, arm))
    bpy.context.view_layer.objects.active = arm
    bpy.ops.object.mode_set(mode="EDIT")
    bones = arm.data.edit_bones
    parent = bones["Head"]
    for k in range(len(TAIL) - 1):
        b = bones.new(f"Hair.{k}")
        b.head, b.tail = TAIL[k], TAIL[k + 1]
        b.parent = parent
        b.use_connect = k > 0
        parent = b
    bpy.ops.object.mode_set(mode="OBJECT")
    first, last = (int(round(x)) for x in walk.frame_range)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = first, last
    return arm, first, last


def _hair_points(arm) -> np.ndarray:
    world = np.array(arm.matrix_world)
    pts = []
    for k in range(len(TAIL) - 1):
        m = world @ np.array(arm.pose.bones[f"Hair.{k}"].matrix)
        pts.append(m[:3, 3] + m[:3, 1] * arm.data.bones[f"Hair.{k}"].length)
    return np.array(pts)


def _depths(arm, points: np.ndarray) -> np.ndarray:
    """Penetration of each point into each collider of ``arm`` (> 0 inside), from the pose
    bones and the colliders' settings alone."""
    world = np.array(arm.matrix_world)
    out = []
    for c in arm.marionette_controls.colliders:
        m = world @ np.array(arm.pose.bones[c.bone].matrix)
        a = m[:3, :3] @ np.array(c.offset) + m[:3, 3]
        if c.kind == "SPHERE":
            out.append(c.radius - np.linalg.norm(points - a, axis=1))
        else:
            b = m[:3, :3] @ np.array(c.tail) + m[:3, 3]
            t = np.clip((points - a) @ (b - a) / np.dot(b - a, b - a), 0.0, 1.0)
            out.append(c.radius - np.linalg.norm(points - (a + t[:, None] * (b - a)), axis=1))
    return np.array(out)


def _frames_depths(bpy, arm, first: int, last: int) -> tuple[list[float], list[float]]:
    """Per frame: the deepest point of the ponytail inside a collider, and what Diagnostics shows."""
    from marionette.viewport import live_preview

    deepest, shown = [], []
    for f in range(first, last + 1):
        bpy.context.scene.frame_set(f)
        deepest.append(float(_depths(arm, _hair_points(arm)).max()))
        if arm.marionette_controls.live_preview:
            shown.append(live_preview.summary(arm)["Ponytail"]["penetration"])
    return deepest, shown


def test_a_walking_character_keeps_its_ponytail_outside_the_head_and_shoulders(addon):
    bpy = addon
    arm, first, last = _man(bpy)
    s = arm.marionette_controls
    assert bpy.ops.marionette.control_add(kind="SPRING") == {"FINISHED"}
    row = s.controls[-1]
    row.name = "Ponytail"
    row.bone_start, row.bone_end = "Hair.0", f"Hair.{len(TAIL) - 2}"
    row.stiffness, row.damping = 4.0, 1.0
    # Added from the Controls tab on each bone, sized from it, then the sizes the body needs.
    arm.data.bones.active = arm.data.bones["Head"]
    assert bpy.ops.marionette.collider_add(kind="SPHERE") == {"FINISHED"}
    s.colliders[-1].radius = 0.34
    for side in "LR":
        assert bpy.ops.marionette.collider_add(kind="CAPSULE", bone=f"Shoulder.{side}") == {"FINISHED"}
        s.colliders[-1].radius = 0.18
    assert bpy.ops.marionette.collider_add(kind="CAPSULE", bone="Torso") == {"FINISHED"}
    s.colliders[-1].radius = 0.32
    assert {c.group for c in s.colliders} == {"Body"}
    sphere = s.colliders[0]
    assert sphere.bone == "Head" and abs(sphere.offset[1] - arm.data.bones["Head"].length / 2) < 1e-6

    s.live_preview = True
    free_frames, _ = _frames_depths(bpy, arm, first, last)
    free = max(free_frames)
    row.collider_groups = "Body"
    bpy.ops.marionette.controls_reset()
    live_frames, shown = _frames_depths(bpy, arm, first, last)
    live = max(live_frames)
    from marionette.usecases.bake_controls import bake_controls, frames_of

    outcome = bake_controls(arm, frames_of(bpy.context.scene, None, None), disable_live=True, scene=bpy.context.scene)
    baked = max(_frames_depths(bpy, arm, first, last)[0])
    print(
        f"\nponytail on the walking man ({last - first + 1} frames), deepest inside a collider: without colliders "
        f"{free * 1e3:.0f} mm (first frame {free_frames[0] * 1e3:.0f} mm); with them live {live * 1e3:.3f} mm "
        f"(Diagnostics up to {max(shown) * 1e3:.3f} mm), baked {baked * 1e3:.3f} mm"
    )
    assert free_frames[0] <= 0.0 and free > 0.02  # it starts outside; the walk swings it into the body
    assert live <= 1e-3 and baked <= 1e-3
    assert max(shown) <= 1e-3
    # The bake's report: the deepest after any fixed step of the bake.
    assert outcome.controls["Ponytail"]["max_penetration"] <= 1e-3


def test_a_bad_collider_is_refused_on_the_spring_that_uses_it(addon):
    bpy = addon
    from marionette.viewport import live_preview

    arm, _first, _last = _man(bpy)
    s = arm.marionette_controls
    bpy.ops.marionette.control_add(kind="SPRING")
    row = s.controls[-1]
    row.bone_start, row.bone_end, row.collider_groups = "Hair.0", "Hair.3", "Body"
    bpy.ops.marionette.collider_add(kind="SPHERE", bone="Head")
    s.colliders[-1].radius = 0.0
    assert "radius must be above 0" in live_preview.validation(arm)[0]
    s.colliders[-1].radius = 0.3
    s.colliders[-1].bone = "Hat"
    assert "'Hat'" in live_preview.validation(arm)[0]
    s.colliders[-1].bone = "Head"
    row.collider_groups = "Body, Skirt"
    assert "no collider group called 'Skirt'" in live_preview.validation(arm)[0]
    row.collider_groups = "Body"
    assert 0 not in live_preview.validation(arm)
    bpy.context.view_layer.objects.active = arm
    arm.data.bones.active = None
    before = len(s.colliders)
    with pytest.raises(RuntimeError, match="pick a bone"):
        bpy.ops.marionette.collider_add(kind="SPHERE")
    assert len(s.colliders) == before


def test_the_drawn_colliders_follow_the_pose_shown(addon):
    """What the viewport overlay draws (its segments; drawing itself needs a window): each
    collider's outline on its bone as posed, at its radius, the active one marked."""
    bpy = addon
    from marionette.viewport import collider_overlay

    arm, first, _last = _man(bpy)
    bpy.ops.marionette.collider_add(kind="SPHERE", bone="Head")
    bpy.ops.marionette.collider_add(kind="CAPSULE", bone="Shoulder.L")
    bpy.context.scene.frame_set(first + 5)
    drawn = collider_overlay.segments_of(arm)
    assert [active for active, _ in drawn] == [False, True]
    head = np.array(arm.matrix_world) @ np.array(arm.pose.bones["Head"].matrix)
    centre = head[:3, :3] @ np.array(arm.marionette_controls.colliders[0].offset) + head[:3, 3]
    radii = np.linalg.norm(drawn[0][1].reshape(-1, 3) - centre, axis=1)
    assert np.abs(radii - arm.marionette_controls.colliders[0].radius).max() < 1e-5


def test_the_collider_handles_sit_on_the_collider_as_posed(addon):
    """The viewport handles of the active collider (their placements; dragging needs a window):
    the centre handle's offset is the collider's offset in its bone's placement, a capsule's
    second handle its tail, and the radius arrow starts on the collider's surface, square to a
    capsule's axis, scaled with the armature's placement (here under a parent twice its size)."""
    bpy = addon
    from marionette.core.controls.colliders import Collider, depth, place
    from marionette.viewport import collider_gizmos

    arm, first, _last = _man(bpy)
    assert "bl_rna" in collider_gizmos.MARIONETTE_GGT_collider.__dict__  # registered with Blender
    bpy.ops.marionette.collider_add(kind="SPHERE", bone="Head")
    bpy.ops.marionette.collider_add(kind="CAPSULE", bone="Shoulder.L")
    holder = bpy.data.objects.new("Holder", None)
    bpy.context.scene.collection.objects.link(holder)
    holder.scale = (2.0, 2.0, 2.0)
    arm.parent = holder
    bpy.context.scene.frame_set(first + 5)
    s = arm.marionette_controls
    for i, kind in enumerate(("sphere", "capsule")):
        c = s.colliders[i]
        mats = collider_gizmos.handle_matrices(arm, i)
        assert mats is not None and ("tail" in mats) == (kind == "capsule")
        bone = np.array(arm.matrix_world) @ np.array(arm.pose.bones[c.bone].matrix)
        placed = place([Collider(kind, 0, tuple(c.offset), tuple(c.tail), c.radius)], bone[None, None])[0][0]
        at = mats["offset"] @ [*c.offset, 1.0]
        assert np.abs(at[:3] - placed[1:4]).max() < 1e-6
        if kind == "capsule":
            end = mats["tail"] @ [*c.tail, 1.0]
            assert np.abs(end[:3] - placed[4:7]).max() < 1e-6
            axis = np.array(placed[4:7]) - placed[1:4]
            assert abs(mats["radius"][:3, 2] @ axis) < 1e-6 * np.linalg.norm(axis) * np.linalg.norm(mats["radius"][:3, 2])
        tip = mats["radius"] @ [0.0, 0.0, c.radius, 1.0]
        assert abs(np.linalg.norm(tip[:3] - mats["radius"][:3, 3]) - placed[7]) < 1e-6 and placed[7] > 1.9 * c.radius
        assert abs(depth(placed, tip[:3], 0.0)) < 1e-6
    s.colliders[1].bone = "nothing"
    assert collider_gizmos.handle_matrices(arm, 1) is None
    assert collider_gizmos.handle_matrices(arm, 7) is None
