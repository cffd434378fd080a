"""Spring and ground controls in Blender (docs/controls.md#ground-feet, docs/controls.md#springs): a spring tail live, scrubbed and baked,
feet on sloped and moving ground, and inheritance, fixed axis and closure live and baked."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.helpers.controls_scenes import _control_rigs, _key_path, _play, _pose_matrices, _walking_body

pytestmark = pytest.mark.bpy


# --- springs and ground (docs/controls.md#ground-feet, docs/controls.md#springs) ------------------------------------------------------


def _soles(skeleton):
    """Each foot joint with the point under its ankle at ground height, in the foot's own space."""
    rest = skeleton.rest_placements()
    out = []
    for side in "LR":
        f = skeleton.index(f"foot.{side}")
        ankle = rest[f, :3, 3]
        out.append((f, np.linalg.solve(rest[f], [ankle[0], ankle[1], 0.0, 1.0])))
    return out


@pytest.fixture
def tail(addon):
    """A carrier bone swaying sideways (0.3 units at 1 Hz) with a 4-bone, 1-unit tail hanging
    from it, a spring on the tail."""
    bpy = addon
    from marionette.bridge.action_write import create_armature, write_action
    from marionette.core.rig.clip import Clip

    skeleton, _path = _control_rigs().hanging_chain(4, 1.0)
    rest = skeleton.rest_placements()
    tails = rest[:, :3, 3] + rest[:, :3, 1] * np.array([0.1, 0.25, 0.25, 0.25, 0.25])[:, None]
    arm = create_armature(skeleton, "Tail", tails=tails)
    t = np.arange(48) / 24.0
    rot = np.zeros((48, len(skeleton), 4))
    rot[..., 0] = 1.0
    tr = np.zeros((48, len(skeleton), 3))
    tr[:, 0] = np.stack([0.3 * np.sin(2 * math.pi * t), np.zeros_like(t), np.zeros_like(t)], axis=1) @ rest[0, :3, :3]
    write_action(arm, Clip(skeleton.names, t, 24.0, rot, tr, name="Sway"), "Sway")
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 48
    bpy.context.view_layer.objects.active = arm
    assert bpy.ops.marionette.control_add(kind="SPRING") == {"FINISHED"}
    row = arm.marionette_controls.controls[-1]
    row.bone_start, row.bone_end = "s0", "s3"
    return bpy, arm


def _tip(obj):
    m = np.array(obj.matrix_world) @ np.array(obj.pose.bones["s3"].matrix)
    return m[:3, 3] + m[:3, 1] * obj.data.bones["s3"].length


def test_spring_tail_live_scrubbed_and_baked(tail):
    bpy, arm = tail
    from marionette.viewport import live_preview

    scene = bpy.context.scene
    frames = np.arange(1, 49)
    animated = []
    for f in frames:
        scene.frame_set(int(f))
        animated.append(_tip(arm))
    arm.marionette_controls.live_preview = True
    first = _play(bpy, arm, frames)
    lag = []
    for k, f in enumerate(frames):
        scene.frame_set(int(f))
        lag.append(float(np.linalg.norm(_tip(arm) - animated[k])))
    # Scrub back to frame 20 and play on: the same poses, bit for bit; jump ahead and back too.
    again = _play(bpy, arm, [20, 30, 10, 40, 25])
    replay = _play(bpy, arm, frames[19:])
    resets = live_preview.summary(arm)[arm.marionette_controls.controls[0].name]["reset"]
    assert bpy.ops.marionette.bake_controls() == {"FINISHED"}
    baked = _play(bpy, arm, frames)
    scrub_diff = max(float(np.abs(replay - first[19:]).max()), float(np.abs(again - first[[19, 29, 9, 39, 24]]).max()))
    bake_diff = float(np.abs(baked - first).max())
    print(
        f"\nspring tail (1 unit, 4 bones) under a 0.3-unit sway: tip lag max {max(lag):.3f}; scrubbed vs played "
        f"{scrub_diff:.1e}; live vs baked {bake_diff:.1e}; last reset reason {resets!r}"
    )
    assert max(lag) > 0.05  # the tail does swing behind
    assert lag[0] < 1e-6  # the first frame starts at the animation
    assert scrub_diff == 0.0
    assert bake_diff <= 1e-5


def test_objects_sharing_an_armature_keep_their_own_spring_state(tail):
    bpy, arm = tail
    scene = bpy.context.scene
    frames = np.arange(1, 49)
    arm.marionette_controls.live_preview = True
    alone = _play(bpy, arm, frames)
    bpy.ops.marionette.controls_reset()
    twin = arm.copy()
    scene.collection.objects.link(twin)
    twin.location.x = 3.0
    assert twin.data == arm.data and twin.marionette_controls.controls[0].kind == "SPRING"
    twin.marionette_controls.live_preview = False
    together, twin_tips = [], []
    for f in frames:
        if f == 24:
            twin.marionette_controls.live_preview = True  # the twin starts its own simulation here
        scene.frame_set(int(f))
        together.append(_pose_matrices(arm))
        twin_tips.append(_tip(twin) - np.array([3.0, 0.0, 0.0]))
    together = np.array(together)
    arm_tips = [(np.array(arm.matrix_world) @ np.append(p[-1][:3, 3], 1.0))[:3] for p in together]
    print(
        f"\ntwo objects, one Armature: arm's poses with the twin running vs alone {np.abs(together - alone).max():.1e}; "
        f"tips apart when the twin starts {np.linalg.norm(twin_tips[23] - _tip_of(arm, together[23])):.3f}"
    )
    assert np.abs(together - alone).max() == 0.0
    assert np.linalg.norm(twin_tips[23] - _tip_of(arm, together[23])) > 0.02
    del arm_tips


def _tip_of(obj, pose):
    names = [pb.name for pb in obj.pose.bones]
    m = np.array(obj.matrix_world) @ pose[names.index("s3")]
    return m[:3, 3] + m[:3, 1] * obj.data.bones["s3"].length


def test_feet_on_a_sloped_plane_live_and_baked(addon):
    bpy = addon
    arm, skeleton, rot, tr = _walking_body(bpy, "Walker", 61, fps=30.0)
    scene = bpy.context.scene
    degrees = 10.0
    rise = math.tan(math.radians(degrees))  # uphill toward -Y, where the character walks
    # The object is carried at the slope's height under the hips, as a character controller does.
    hips = skeleton.forward_kinematics(rot, tr)[:, skeleton.index("hips"), :3, 3]
    _key_path(bpy, arm, np.arange(1, 62), np.stack([np.zeros(61), np.zeros(61), -rise * hips[:, 1]], axis=1))
    bpy.ops.mesh.primitive_plane_add(size=40.0, rotation=(-math.radians(degrees), 0.0, 0.0))
    bpy.context.view_layer.objects.active = arm
    assert bpy.ops.marionette.control_add(kind="GROUND") == {"FINISHED"}
    row = arm.marionette_controls.controls[-1]
    assert (row.bone_start, row.bone_end, row.second_start, row.second_end, row.pelvis_bone) == ("thigh.L", "foot.L", "thigh.R", "foot.R", "hips")
    rest = skeleton.rest_placements()
    soles = _soles(skeleton)
    animated_world = skeleton.forward_kinematics(rot, tr)

    def measure(pose_by_frame):
        names = [pb.name for pb in arm.pose.bones]
        gaps, below, tilts = [], [], []
        for k in range(61):
            scene.frame_set(k + 1)
            world = np.array(arm.matrix_world)
            for f, p in soles:
                m = world @ pose_by_frame[k][names.index(skeleton.names[f])]
                point = (m @ p)[:3]
                height = -rise * point[1]
                below.append(height - point[2])
                if (animated_world[k, f] @ p)[2] < 1e-6:  # planted in the animation
                    gaps.append(abs(point[2] - height))
                    up = m[:3, :3] @ np.linalg.solve(rest[f, :3, :3], [0.0, 0.0, 1.0])
                    tilts.append(math.degrees(math.acos(min(1.0, up[2] / np.linalg.norm(up)))))
        return max(below), max(gaps), len(gaps), (min(tilts), max(tilts))

    arm.marionette_controls.live_preview = True
    live = _play(bpy, arm, np.arange(1, 62))
    penetration, gap, planted, tilt = measure(live)
    assert bpy.ops.marionette.bake_controls() == {"FINISHED"}
    baked = _play(bpy, arm, np.arange(1, 62))
    diff = float(np.abs(baked - live).max())
    print(
        f"\nfeet on a {degrees:.0f} deg slope, 61 frames: penetration {1e3 * penetration:.4f} mm, planted gap "
        f"{1e3 * gap:.4f} mm over {planted} planted foot-frames, planted tilt {tilt[0]:.2f}-{tilt[1]:.2f} deg; live vs baked {diff:.1e}"
    )
    # The object's own path came along into the baked action.
    scene.frame_set(61)
    assert abs(arm.matrix_world.translation.z + rise * hips[60, 1]) < 1e-5
    assert planted > 40
    assert penetration <= 1e-3 and gap <= 1e-3
    assert abs(tilt[0] - degrees) <= 0.05 and abs(tilt[1] - degrees) <= 0.05
    assert diff <= 1e-5


def _slab(bpy, name, center, size):
    """A flat box mesh object (``size`` along x, y, z) centred on ``center``."""
    import bmesh

    mesh = bpy.data.meshes.new(name)
    bm = bmesh.new()
    bmesh.ops.create_cube(bm, size=1.0)
    for v in bm.verts:
        v.co = type(v.co)([c * s + o for c, s, o in zip(v.co, size, center, strict=True)])
    bm.to_mesh(mesh)
    bm.free()
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def test_feet_ignore_the_characters_own_meshes_and_follow_a_moving_ground(addon):
    """Under the feet: the character's skinned body (deformed by the armature, not parented), a
    prop parented to it (both of which Blender's scene ray cast hits first) and a hidden mesh;
    below them a sloped plane that rises as the clip plays. Planted soles sit on the plane where
    it is at each frame, live and baked."""
    bpy = addon
    count = 31
    arm, skeleton, rot, tr = _walking_body(bpy, "Walker", count, fps=30.0)
    scene = bpy.context.scene
    degrees, climb = 8.0, 0.004  # the plane rises 4 mm a frame
    rise = math.tan(math.radians(degrees))
    hips = skeleton.forward_kinematics(rot, tr)[:, skeleton.index("hips"), :3, 3]
    _key_path(bpy, arm, np.arange(1, count + 1), np.stack([np.zeros(count), np.zeros(count), -rise * hips[:, 1]], axis=1))
    body = _slab(bpy, "Body", (0.0, -0.5, 0.25), (1.0, 2.5, 0.02))
    body.vertex_groups.new(name="root").add(list(range(len(body.data.vertices))), 1.0, "REPLACE")
    body.modifiers.new("Armature", "ARMATURE").object = arm
    prop = _slab(bpy, "Crate", (0.0, -0.5, 0.35), (1.0, 2.5, 0.02))
    prop.parent = arm
    # Hidden in the viewport (its collection is): no ground, for Blender's ray casts either.
    hidden = _slab(bpy, "Hidden", (0.0, -0.5, 0.3), (1.0, 2.5, 0.02))
    props = bpy.data.collections.new("Props")
    scene.collection.children.link(props)
    props.objects.link(hidden)
    scene.collection.objects.unlink(hidden)
    bpy.context.view_layer.layer_collection.children["Props"].hide_viewport = True
    bpy.ops.mesh.primitive_plane_add(size=40.0, rotation=(-math.radians(degrees), 0.0, 0.0))
    ground = bpy.context.active_object
    _key_path(bpy, ground, np.arange(1, count + 1), np.stack([np.zeros(count), np.zeros(count), climb * np.arange(count)], axis=1))
    bpy.context.view_layer.objects.active = arm
    assert bpy.ops.marionette.control_add(kind="GROUND") == {"FINISHED"}
    row = arm.marionette_controls.controls[-1]
    row.smooth_time = row.pelvis_smooth_time = 0.0  # follow the ground without easing in
    soles = _soles(skeleton)
    animated_world = skeleton.forward_kinematics(rot, tr)
    names = [pb.name for pb in arm.pose.bones]
    from mathutils import Vector

    def measure(poses):
        gaps, own_first = [], set()
        for k in range(count):
            scene.frame_set(k + 1)
            world = np.array(arm.matrix_world)
            for f, p in soles:
                if (animated_world[k, f] @ p)[2] >= 1e-6:
                    continue  # planted in the animation only
                point = (world @ poses[k][names.index(skeleton.names[f])] @ p)[:3]
                gaps.append(abs(point[2] - (-rise * point[1] + climb * k)))
                hit = scene.ray_cast(bpy.context.evaluated_depsgraph_get(), Vector(point + [0.0, 0.0, 0.5]), Vector((0.0, 0.0, -1.0)), distance=1.0)
                own_first.add(hit[4].original.name if hit[0] else "")
        return max(gaps), len(gaps), own_first

    arm.marionette_controls.live_preview = True
    live = _play(bpy, arm, np.arange(1, count + 1))
    gap, planted, first = measure(live)
    assert bpy.ops.marionette.bake_controls() == {"FINISHED"}
    baked = _play(bpy, arm, np.arange(1, count + 1))
    diff = float(np.abs(baked - live).max())
    print(f"\nown meshes under the feet, ground rising {1e3 * climb * (count - 1):.0f} mm: planted gap {1e3 * gap:.4f} mm over {planted} foot-frames; live vs baked {diff:.1e}")
    # Blender's own ray from above each planted sole meets the character's meshes first.
    assert first <= {"Body", "Crate"} and first
    assert planted > 20
    assert gap <= 1e-3
    assert diff <= 1e-5


def test_inheritance_fixed_axis_and_closure_live_and_baked(addon):
    """A twist bone taking half the knee's turn, a shin kept to its twist, and both arms closing
    on one point: measured on Blender's pose, live and baked."""
    bpy = addon
    from marionette.core.rig.rotations import quat_angle, quat_from_matrix, swing_twist
    from marionette.viewport import live_preview

    arm, skeleton, rot, tr = _walking_body(bpy, "Body", 24)
    scene = bpy.context.scene
    bpy.context.view_layer.objects.active = arm
    rows = arm.marionette_controls.controls
    for kind in ("INHERIT", "FIXED_AXIS", "CLOSURE"):
        assert bpy.ops.marionette.control_add(kind=kind) == {"FINISHED"}
    grant, fixed, closure = rows
    grant.bone_start = grant.bone_end = "thigh_twist.L"
    grant.source_bone, grant.rotation_fraction = "shin.L", 0.5
    fixed.bone_start = fixed.bone_end = "shin.R"
    fixed.twist_axis = "POS_Y"
    closure.bone_start, closure.bone_end = "upper_arm.L", "forearm.L"
    closure.second_start, closure.second_end = "upper_arm.R", "forearm.R"
    bpy.ops.object.empty_add(location=(0.0, -0.35, 1.25))
    meet = bpy.context.active_object
    closure.target_object = closure.second_object = meet
    bpy.context.view_layer.objects.active = arm
    assert live_preview.validation(arm) == {}
    arm.marionette_controls.live_preview = True
    names = [pb.name for pb in arm.pose.bones]
    grant_err = swing = gap = 0.0
    live = []
    for f in range(1, 25):
        scene.frame_set(f)
        basis = {n: quat_from_matrix(np.array(arm.pose.bones[n].matrix_basis)[:3, :3]) for n in ("thigh_twist.L", "shin.L", "shin.R")}
        grant_err = max(grant_err, abs(float(quat_angle(basis["thigh_twist.L"])) - 0.5 * float(quat_angle(basis["shin.L"]))))
        sw, _tw = swing_twist(basis["shin.R"], [0.0, 1.0, 0.0])
        swing = max(swing, float(quat_angle(sw)))
        m = _pose_matrices(arm)
        tips = [m[names.index(b)][:3, 3] + m[names.index(b)][:3, 1] * arm.data.bones[b].length for b in ("forearm.L", "forearm.R")]
        gap = max(gap, float(np.linalg.norm(tips[0] - tips[1])))
        live.append(m)
    assert bpy.ops.marionette.bake_controls() == {"FINISHED"}
    diff = float(np.abs(_play(bpy, arm, range(1, 25)) - np.array(live)).max())
    print(
        f"\ngrant error {grant_err:.1e} rad, fixed-axis swing left {swing:.1e} rad, closure gap {gap:.1e}; "
        f"live vs baked {diff:.1e}"
    )
    assert grant_err <= 1e-5
    assert swing <= 1e-5
    assert gap <= 1e-3
    assert diff <= 1e-5
