"""PMX physics on Blender's own rigid-body engine (Bullet): a humanoid PMX written by the tests
with a hair chain of three dynamic capsules jointed to a head sphere that follows the head bone
(:func:`tests.helpers.pmx_files.hair_model`), driven by a VMD the tests write (the centre raised one
MMD unit from the first frame, the left leg IK bone moved so the leg bends).

Measured: the import builds what the model says (kinds, shapes, sizes, places, joint limits as the
core converts them); the hair hangs under gravity and stays out of the head sphere; the bake writes
each hair bone where its body went, leaves the IK leg exactly as the controls bake puts it
(physics after IK, IK not solved again), starts the bodies where the first frame's pose carries
them, and does not change the user's Action; scrubbing back simulates the same again."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers.pmx_files import HAIR, HAIR_RADIUS, HEAD_CENTRE, HEAD_RADIUS, Bone, hair_model, write_pmx
from tests.helpers.vmd_files import Key, Motion, vmd_bytes

pytestmark = pytest.mark.bpy

SCALE = 0.08
#: How far a hair capsule may sink into the head sphere (metres): Bullet resolves contacts over a
#: few steps, so a body can be found a little inside for a frame.
PENETRATION = 0.006
LEG = ("左足", "左ひざ", "左足首")


def _m(p):
    x, y, z = p
    return SCALE * np.array([x, z, y])


@pytest.fixture
def files(tmp_path):
    bones, bodies, joints = hair_model()
    pmx, vmd = tmp_path / "hair.pmx", tmp_path / "motion.vmd"
    pmx.write_bytes(write_pmx(bones, bodies=bodies, joints=joints)[0])
    keys = [Key("センター", 0, (0.0, 1.0, 0.0)), Key("センター", 45, (0.0, 1.0, 0.0)), Key("左足ＩＫ", 0, (0.0, 3.0, -1.0)), Key("左足ＩＫ", 45, (0.0, 3.0, -1.0))]
    vmd.write_bytes(vmd_bytes(Motion(keys=keys)))
    return pmx, vmd


def _import(bpy, pmx, vmd=None):
    from marionette.usecases.import_pmx import import_pmx_rig
    from marionette.usecases.vmd_apply import apply_vmd

    scene = bpy.context.scene
    scene.render.fps = 30
    scene.frame_start, scene.frame_end = 1, 46
    result = import_pmx_rig(pmx, physics=True)
    if vmd is not None:
        apply_vmd(result.obj, vmd)
    return result


def _poses(bpy, obj, names, frames):
    out = np.empty((len(frames), len(names), 4, 4))
    for i, f in enumerate(frames):
        bpy.context.scene.frame_set(int(f))
        out[i] = [np.array(obj.matrix_world) @ np.array(obj.pose.bones[n].matrix) for n in names]
    return out


def _keys(action):
    from marionette.bridge import compat

    out = {}
    for slot in action.slots:
        for fc in compat.action_fcurves(action, slot):
            buf = np.empty(2 * len(fc.keyframe_points), dtype=np.float32)
            fc.keyframe_points.foreach_get("co", buf)
            out[(fc.data_path, fc.array_index)] = buf
    return out


def test_import_builds_the_bodies_and_joints_the_core_converts(addon, files):
    bpy = addon
    from marionette.core.formats.pmx import read_pmx
    from marionette.core.formats.pmx_physics import build_physics

    pmx, _ = files
    result = _import(bpy, pmx)
    core = build_physics(read_pmx(pmx), SCALE)
    phys = result.physics
    report = result.report()["physics"]
    assert report["bodies"] == 4 and report["kinematic"] == 1 and report["dynamic"] == 3 and report["joints"] == 3
    assert report["bones_written_back"] == sorted(HAIR)
    world = bpy.context.scene.rigidbody_world
    assert world is not None and world.point_cache.frame_start == 1
    for obj, spec in zip(phys.bodies, core.bodies, strict=True):
        rb = obj.rigid_body
        assert rb.collision_shape == spec.shape and rb.kinematic == spec.kinematic and rb.mass == pytest.approx(spec.mass)
        np.testing.assert_allclose(np.array(obj.matrix_world), spec.matrix, atol=1e-6)
    head = phys.bodies[0]
    assert head.parent == result.obj and head.parent_bone == "頭"
    np.testing.assert_allclose(head.dimensions, [2 * SCALE * HEAD_RADIUS] * 3, rtol=1e-6)
    np.testing.assert_allclose(phys.bodies[1].dimensions, [2 * SCALE * HAIR_RADIUS] * 2 + [SCALE * (2 * HAIR_RADIUS + 0.9)], rtol=1e-6)
    for obj, spec in zip(phys.joints, core.joints, strict=True):
        c = obj.rigid_body_constraint
        assert c.type == "GENERIC_SPRING" and c.object1 == phys.bodies[spec.body_a] and c.object2 == phys.bodies[spec.body_b]
        got = [getattr(c, f"limit_ang_{a}_{e}") for e in ("lower", "upper") for a in "xyz"]
        np.testing.assert_allclose(got, np.concatenate([spec.rotation_min, spec.rotation_max]), atol=1e-6)
        np.testing.assert_allclose(np.array(obj.matrix_world), spec.matrix, atol=1e-6)
    # MMD's masks: the first capsule ignores the head, so its joint to the head disables collisions;
    # the other joints link capsules that ignore each other.
    assert all(j.rigid_body_constraint.disable_collisions for j in phys.joints)


def test_hair_hangs_clear_of_the_head_and_bones_follow_their_bodies(addon, files):
    bpy = addon
    pmx, _ = files
    result = _import(bpy, pmx)
    obj, phys = result.obj, result.physics
    scene = bpy.context.scene
    tip0 = np.array(obj.pose.bones["髪3"].tail)
    root = np.array(obj.pose.bones["髪1"].head)
    placements = []
    for f in range(1, 47):
        scene.frame_set(f)
        placements.append([np.array(b.matrix_world) for b in phys.bodies])
        # Write-back as Blender plays: each hair bone sits where its track constraint puts it.
        for name in HAIR:
            track = obj.pose.bones[name].constraints["Rigid body track"].target
            np.testing.assert_allclose(np.array(obj.pose.bones[name].matrix), np.array(track.matrix_world), atol=1e-5)
    placements = np.array(placements)
    tip = np.array(obj.pose.bones["髪3"].tail)
    assert abs(tip0[2] - root[2]) < 1e-6 and tip[2] < root[2] - 0.15, (tip0, tip, root)
    centre, r = _m(HEAD_CENTRE), SCALE * HEAD_RADIUS
    depth = _deepest(placements[:, 2:], centre, r, SCALE * HAIR_RADIUS, SCALE * 0.9)
    print(f"\nhair: tip {root[2] - tip[2]:.3f} m below its root after 46 frames; deepest into the head {depth * 1000:.2f} mm")
    assert depth < PENETRATION, depth
    # Going back to the cache's first frame and playing again simulates the same.
    again = []
    for f in range(1, 21):
        scene.frame_set(f)
        again.append([np.array(b.matrix_world) for b in phys.bodies])
    np.testing.assert_allclose(np.array(again), placements[:20], atol=1e-6)


def _deepest(bodies, centre, head_r, hair_r, height):
    """Deepest a capsule (axis its local Z, cylinder ``height``) reaches into the sphere."""
    a = bodies[..., :3, 3] - 0.5 * height * bodies[..., :3, 2]
    b = bodies[..., :3, 3] + 0.5 * height * bodies[..., :3, 2]
    ab = b - a
    t = np.clip(np.einsum("...i,...i", centre - a, ab) / np.einsum("...i,...i", ab, ab), 0.0, 1.0)
    nearest = a + t[..., None] * ab
    return float((head_r + hair_r - np.linalg.norm(nearest - centre, axis=-1)).max())


def test_bake_writes_back_after_ik_from_a_stable_start(addon, files):
    bpy = addon
    from marionette.usecases.bake_controls import bake_controls
    from marionette.usecases.bake_physics import bake_physics

    pmx, vmd = files
    result = _import(bpy, pmx, vmd)
    obj = result.obj
    user = obj.animation_data.action
    user_keys = _keys(user)
    frames = np.arange(1, 47, dtype=float)
    # Bake Controls alone works on a rig with physics (the tracks act after the controls).
    controls = bake_controls(obj, frames).action
    obj.animation_data.action = user
    obj.animation_data.action_slot = user.slots[0]
    baked = bake_physics(obj, frames)
    report = baked.report
    assert baked.action.name != user.name and report["bones_written_back"] == sorted(HAIR)
    after = _keys(user)
    assert after.keys() == user_keys.keys() and all(np.array_equal(user_keys[k], v) for k, v in after.items())

    # Stable start: the bodies begin where the first frame's pose (raised one MMD unit) carries
    # them, on the held frame before it; by the first frame gravity has moved them one step, down.
    rest_z = _m((0.0, 19.5, 0.0))[2]
    assert report["start_offset"] < 1e-4 and report["first_step"] < 0.02, report
    drop = rest_z + SCALE - baked.placements[0, 1, 2, 3]
    assert 0.0 < drop <= report["first_step"] + 1e-6, (drop, report["first_step"])

    names = list(HAIR) + list(LEG)
    played = _poses(bpy, obj, names, frames)
    # Each hair bone where its body went (rotation exactly; the head may lag the joint by its slack).
    offsets = []
    for k, name in enumerate(HAIR, start=1):
        from marionette.bridge.rigid_bodies import rest_matrix

        offsets.append(np.linalg.solve(rest_matrix(result.physics.bodies[k]), np.array(obj.data.bones[name].matrix_local)))
    carried = baked.placements[:, 1:4] @ np.array(offsets)
    # The angle between two rotations from the norm of their difference (exact near zero, where
    # arccos of the trace is not): ||R1 - R2|| = 2 sqrt(2) sin(angle / 2).
    diff = np.linalg.norm(played[:, :3, :3, :3] - carried[..., :3, :3], axis=(-2, -1))
    angle = np.degrees(2.0 * np.arcsin(np.clip(diff / (2.0 * math.sqrt(2.0)), 0.0, 1.0)))
    gap = np.linalg.norm(played[:, :3, :3, 3] - carried[..., :3, 3], axis=-1).max()
    print(
        f"\nbake: bones on their bodies within {angle.max():.2e} deg and {gap * 1000:.2f} mm; first step {report['first_step'] * 1000:.2f} mm, "
        f"start offset {report['start_offset'] * 1000:.4f} mm; {report['seconds']:.2f} s for {report['frame_count']} frames"
    )
    assert angle.max() < 0.05, angle.max()
    assert gap < 0.003
    # The hair's root stays where the head carries it (its joint was moved with the first pose).
    root_gap = []
    for f in frames[::5]:
        bpy.context.scene.frame_set(int(f))
        head = obj.pose.bones["頭"]
        carried_root = np.array(head.matrix) @ np.linalg.inv(np.array(head.bone.matrix_local)) @ np.append(np.array(obj.data.bones[HAIR[0]].head_local), 1.0)
        root_gap.append(np.linalg.norm(np.array(obj.pose.bones[HAIR[0]].head) - carried_root[:3]))
    print(f"hair root off the head by at most {max(root_gap) * 1000:.2f} mm")
    assert max(root_gap) < 0.002
    # The hair hangs at the end; the IK leg is the controls bake's, untouched by physics.
    assert played[-1, 2, 2, 3] < played[-1, 0, 2, 3] - 0.1
    obj.animation_data.action = controls
    obj.animation_data.action_slot = controls.slots[0]
    leg = _poses(bpy, obj, list(LEG), frames)
    np.testing.assert_allclose(played[:, 3:], leg, atol=1e-6)
    print(f"IK leg with physics against without: {np.abs(played[:, 3:] - leg).max():.1e} (matrix entries)")
    ankle_target = _m((1.0, 1.0 + 3.0, 0.3 - 1.0))
    assert np.linalg.norm(leg[-1, 2, :3, 3] - ankle_target) < 1e-3  # the IK reached its target


def test_command_line_imports_and_bakes_physics(tmp_path, files):
    pmx, vmd = files
    blend, baked = tmp_path / "rig.blend", tmp_path / "baked.blend"
    run = [sys.executable, "-m", "marionette"]
    done = subprocess.run([*run, "import-pmx", str(pmx), "--vmd", str(vmd), "--physics", "-o", str(blend)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["physics"]["dynamic"] == 3 and report["physics"]["joints"] == 3
    done = subprocess.run(
        [*run, "bake-controls", str(blend), "--object", report["object"], "--physics", "-o", str(baked)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout[done.stdout.index("{"):])
    assert out["bones_written_back"] == sorted(HAIR) and out["start_offset"] < 1e-4 and out["first_step"] < 0.02
    assert math.isclose(out["frames"][0], 1.0)


def test_the_importer_option_builds_physics_and_a_rig_without_it_is_refused(addon, files):
    bpy = addon
    from marionette.core.errors import RigError
    from marionette.usecases.bake_physics import bake_physics

    pmx, _ = files
    assert bpy.ops.marionette.import_pmx_rig(filepath=str(pmx)) == {"FINISHED"}
    plain = bpy.context.view_layer.objects.active
    actions = len(bpy.data.actions)
    with pytest.raises(RigError, match="no rigid bodies"):
        bake_physics(plain)
    assert len(bpy.data.actions) == actions and bpy.context.scene.rigidbody_world is None
    assert bpy.ops.marionette.import_pmx_rig(filepath=str(pmx), physics=True) == {"FINISHED"}
    rig = bpy.context.view_layer.objects.active
    bodies = [o for o in bpy.data.objects if o.get("pmx_armature") == rig.name and "pmx_rigid_body" in o]
    assert len(bodies) == 4 and bpy.context.scene.rigidbody_world is not None
    assert sorted(pb.name for pb in rig.pose.bones if "Rigid body track" in pb.constraints) == sorted(HAIR)


def test_a_later_range_is_simulated_from_the_cache_start(addon, files):
    bpy = addon
    from marionette.core.errors import ClipError
    from marionette.usecases.bake_physics import bake_physics

    pmx, vmd = files
    result = _import(bpy, pmx, vmd)
    obj = result.obj
    user = obj.animation_data.action
    whole = bake_physics(obj, np.arange(1, 31, dtype=float))
    full = _poses(bpy, obj, list(HAIR), np.arange(20, 31))
    obj.animation_data.action = user
    obj.animation_data.action_slot = user.slots[0]
    cache = bpy.context.scene.rigidbody_world.point_cache
    cache.frame_start = 5
    actions = len(bpy.data.actions)
    with pytest.raises(ClipError, match="cache starts at frame 5"):
        bake_physics(obj, np.arange(1, 31, dtype=float))
    assert len(bpy.data.actions) == actions
    cache.frame_start = 1
    part = bake_physics(obj, np.arange(20, 31, dtype=float))
    assert part.report["simulated_from"] == 1 and part.report["frame_count"] == 11 and whole.report["frame_count"] == 30
    later = _poses(bpy, obj, list(HAIR), np.arange(20, 31))
    np.testing.assert_allclose(later, full, atol=1e-5)


@pytest.mark.parametrize("scale", [SCALE, 0.2])
def test_a_free_body_falls_with_mmds_gravity(addon, tmp_path, scale):
    """A dynamic sphere with no bone, no joint and no damping, far from the rest, falls as MMD
    drops it (9.8 × 10 units/s²: 7.84 m/s² at 0.08 m per unit, 19.6 at 0.2), not with Blender's
    9.81 m/s², and again after physics is switched off and on; the import says the gravity it set."""
    bpy = addon
    from marionette.bridge.rigid_bodies import set_physics
    from marionette.usecases.import_pmx import import_pmx_rig
    from tests.helpers.pmx_files import Body, humanoid_bones

    pmx = tmp_path / "drop.pmx"
    drop = Body("落下", -1, 0, (0.5, 0.0, 0.0), (40.0, 30.0, 0.0), group=3, mask=0, damping=(0.0, 0.0), mode=1)
    pmx.write_bytes(write_pmx(humanoid_bones(), bodies=[drop], joints=[])[0])
    scene = bpy.context.scene
    scene.render.fps = 30
    scene.frame_start, scene.frame_end = 1, 46
    result = import_pmx_rig(pmx, physics=True, scale=scale)
    assert any(f"gravity as in MMD: {98.0 * scale:.3g} m/s²" in n for n in result.notes)
    scene.rigidbody_world.effector_weights.gravity = 1.0  # as another tool might leave it
    set_physics(result.obj, scene, False)
    set_physics(result.obj, scene, True)
    body = result.physics.bodies[0]
    heights = []
    for f in range(1, 17):  # half a second at 30 fps, stepped frame by frame as Blender simulates
        scene.frame_set(f)
        heights.append(body.evaluated_get(bpy.context.evaluated_depsgraph_get()).matrix_world.translation.z)
    fallen = heights[0] - heights[-1]
    expected = 0.5 * 98.0 * scale * 0.5**2
    print(f"\nfree fall over 0.5 s: {fallen:.4f} m (MMD's gravity gives {expected:.4f} m, Blender's {0.5 * 9.81 * 0.25:.4f} m)")
    assert fallen == pytest.approx(expected, rel=0.03)


def _after_physics_rig(bpy, tmp_path, vmd):
    """:func:`tests.helpers.pmx_files.hair_model` with an ornament bone beside the first hair
    bone, flagged "after physics", inheriting that hair bone's rotation."""
    from tests.helpers.pmx_files import AFTER_PHYSICS, APPEND_ROTATION, ENABLED, ROTATABLE, VISIBLE

    bones, bodies, joints = hair_model()
    first = next(i for i, b in enumerate(bones) if b.name == HAIR[0])
    x, y, z = bones[first].position
    ornament = Bone("髪飾り", (x, y, z + 0.6), bones[first].parent, "ornament", flags=ROTATABLE | VISIBLE | ENABLED | APPEND_ROTATION | AFTER_PHYSICS,
                    tail_offset=(1.5, 0.0, 0.0), append=(first, 1.0))
    pmx = tmp_path / "ornament.pmx"
    pmx.write_bytes(write_pmx([*bones, ornament], bodies=bodies, joints=joints)[0])
    obj = _import(bpy, pmx, vmd).obj
    assert list(obj["pmx_after_physics"]) == ["髪飾り"]
    return obj


def _shown_turn(obj, name):
    """A bone's rotation under its parent as shown (constraints included), as a quaternion."""
    pb = obj.pose.bones[name]
    parent = np.array(pb.parent.matrix) @ np.linalg.inv(np.array(pb.parent.bone.matrix_local))
    local = np.linalg.solve(parent @ np.array(pb.bone.matrix_local), np.array(pb.matrix))
    from mathutils import Matrix

    return Matrix(local.tolist()).to_quaternion()


def test_a_bone_transformed_after_physics_follows_what_the_bodies_did(addon, tmp_path, files):
    """An ornament bone beside the first hair bone, flagged "after physics", inherits that hair
    bone's rotation: baked with physics it turns as the hair swung (the inheritance run again on
    the written-back pose, as MMD orders it), not as the hair's keys stood before the simulation."""
    bpy = addon
    from marionette.usecases.bake_physics import bake_physics

    obj = _after_physics_rig(bpy, tmp_path, files[1])
    baked = bake_physics(obj, np.arange(1, 47, dtype=float))
    assert baked.report["after_physics_controls"], baked.report
    turns, gaps = [], []
    for f in range(1, 47, 5):
        bpy.context.scene.frame_set(f)
        hair, orn = obj.pose.bones[HAIR[0]], obj.pose.bones["髪飾り"]
        q_hair, q_orn = hair.matrix_basis.to_quaternion(), orn.matrix_basis.to_quaternion()
        turns.append(math.degrees(q_hair.angle))
        gaps.append(math.degrees(q_hair.rotation_difference(q_orn).angle))
    print(f"\nafter physics: the hair turned up to {max(turns):.1f} deg, the ornament off it by at most {max(gaps):.2e} deg")
    assert max(turns) > 10.0
    assert max(gaps) < 1e-3


@pytest.mark.slow
def test_forty_hair_bodies_swing_stay_jointed_and_out_of_the_head(addon, tmp_path):
    """A model with many bodies (8 strands of 5 jointed capsules, a head sphere and a chest
    capsule: 42 bodies, 40 joints), its upper body swaying 20 degrees either way each second by a
    motion: every baked key is finite, every strand stays jointed (each link's head within 5 % of
    a link's length of its length from the next), the capsules stay out of the moving head beyond
    the contact slack, and the hair swings. Prints the bake's time per frame."""
    bpy = addon
    from marionette.usecases.bake_physics import bake_physics
    from tests.helpers.pmx_files import many_hair_model

    bones, bodies, joints = many_hair_model(8, 5)
    pmx, vmd = tmp_path / "hair.pmx", tmp_path / "sway.vmd"
    pmx.write_bytes(write_pmx(bones, bodies=bodies, joints=joints)[0])
    h = math.radians(10.0)
    turn = [(0.0, 0.0, 0.0, 1.0), (math.sin(h), 0.0, 0.0, math.cos(h)), (0.0, 0.0, 0.0, 1.0), (-math.sin(h), 0.0, 0.0, math.cos(h))]
    vmd.write_bytes(vmd_bytes(Motion(keys=[Key("上半身", f, rotation=turn[(f // 15) % 4]) for f in range(0, 61, 15)])))
    scene = bpy.context.scene
    result = _import(bpy, pmx, vmd)
    scene.frame_end = 61
    obj = result.obj
    assert len(result.physics.bodies) == 42 and len(result.physics.joints) == 40
    frames = np.arange(1, 62, dtype=float)
    baked = bake_physics(obj, frames)
    assert all(np.isfinite(v).all() for v in _keys(baked.action).values())
    names = [f"髪{s}_{k}" for s in range(8) for k in range(6)]
    heads = _poses(bpy, obj, names, frames[::2])[..., :3, 3].reshape(-1, 8, 6, 3)
    link = SCALE * 1.2
    stretch = np.abs(np.linalg.norm(np.diff(heads, axis=2), axis=-1) - link).max()
    # The capsules (armature space, as baked) against the head sphere where the head carried it.
    centres = baked.placements[:, :1, :3, 3]
    depth = _deepest(baked.placements[:, 2:], centres, SCALE * HEAD_RADIUS, SCALE * HAIR_RADIUS, SCALE * (1.2 - 2 * HAIR_RADIUS))
    hang = heads[..., -1, :] - heads[..., 0, :]
    swing = np.degrees(np.arccos(np.clip(np.einsum("tsi,si->ts", hang, hang[0]) / (np.linalg.norm(hang, axis=-1) * np.linalg.norm(hang[0], axis=-1)), -1.0, 1.0))).max()
    print(
        f"\n42 bodies: links off their length by at most {stretch * 1000:.2f} mm, deepest into the head {depth * 1000:.2f} mm, "
        f"the strands swung up to {swing:.1f} deg; {baked.report['seconds'] / baked.report['frame_count'] * 1000:.1f} ms a frame baked"
    )
    assert stretch < 0.05 * link
    assert depth < PENETRATION
    assert swing > 5.0


def test_of_two_dynamic_bodies_on_one_bone_the_later_carries_it(addon, tmp_path):
    """MMD's players write each dynamic body's place to its bone in the model's order, so where
    two name one bone the later one's place stays: its bone follows that body (even a lighter one)."""
    bpy = addon
    from tests.helpers.pmx_files import Body

    bones, bodies, joints = hair_model()
    first = next(i for i, b in enumerate(bones) if b.name == HAIR[0])
    light = Body("髪1b", first, 0, (0.2, 0.0, 0.0), (2.25, 19.5, 0.2), group=1, mask=0, mass=0.01, mode=1)
    pmx = tmp_path / "two.pmx"
    pmx.write_bytes(write_pmx(bones, bodies=[*bodies, light], joints=joints)[0])
    result = _import(bpy, pmx)
    track = result.obj.pose.bones[HAIR[0]].constraints["Rigid body track"]
    assert track.target.parent == result.physics.bodies[-1] and result.physics.bodies[-1].name.startswith("髪1b")


def _ornament_files(tmp_path, fk_keys=False):
    """The knee ornament model (:func:`tests.helpers.pmx_files.knee_ornament_model`) and a motion
    lifting the left leg IK bone from the first frame on: the knee, and the body following it,
    move 30 mm over the first simulated frame. ``fk_keys``: the motion also keys the thigh and
    the knee (turned 20 and 40 degrees), which the IK overrides as MMD plays it."""
    from tests.helpers.pmx_files import knee_ornament_model

    bones, bodies, joints = knee_ornament_model()
    pmx, vmd = tmp_path / "knee.pmx", tmp_path / "lift.vmd"
    pmx.write_bytes(write_pmx(bones, bodies=bodies, joints=joints)[0])
    lift = [Key("左足ＩＫ", 0, (0.0, 0.0, 0.0)), Key("左足ＩＫ", 30, (0.0, 4.0, -2.0)), Key("左足ＩＫ", 45, (0.0, 4.0, -2.0))]
    if fk_keys:
        for name, deg in (("左足", -20.0), ("左ひざ", 40.0)):
            h = math.radians(deg) / 2
            lift += [Key(name, f, rotation=(math.sin(h), 0.0, 0.0, math.cos(h))) for f in (0, 45)]
    vmd.write_bytes(vmd_bytes(Motion(keys=lift)))
    return pmx, vmd


def _along_y(length):
    m = np.eye(4)
    m[1, 3] = length
    return m


def _off_joint(bodies, placements):
    """How far the ornament (body 1) is from where the knee body (body 0) carries it by their
    rest placements, per frame (metres): a locked joint's slack."""
    from marionette.bridge.rigid_bodies import rest_matrix

    carried = placements[:, 0] @ np.linalg.solve(rest_matrix(bodies[0]), rest_matrix(bodies[1]))
    return np.linalg.norm(placements[:, 1, :3, 3] - carried[:, :3, 3], axis=-1)


def test_a_joint_to_a_body_moving_from_the_first_frame_holds(addon, tmp_path):
    """Blender builds the joints on the second simulated frame from where the bodies stand then.
    A bone-following body moving from the first frame used to fix its locked joint 27 mm off for
    the whole bake; the bake now simulates from a held frame before the first, so the ornament
    stays on its joint within its slack while the leg lifts and after."""
    bpy = addon
    from marionette.usecases.bake_physics import bake_physics

    pmx, vmd = _ornament_files(tmp_path)
    result = _import(bpy, pmx, vmd)
    baked = bake_physics(result.obj, np.arange(1, 47, dtype=float))
    placements = baked.placements
    moved = np.linalg.norm(placements[1, 0, :3, 3] - placements[0, 0, :3, 3])
    off = _off_joint(result.physics.bodies, placements)
    print(
        f"\nknee body moved {moved * 1000:.1f} mm over the first frame; the ornament off its joint by at most "
        f"{off.max() * 1000:.2f} mm ({off[30:].max() * 1000:.2f} mm once the leg stopped)"
    )
    assert moved > 0.02
    assert off.max() < 0.004, off
    assert off[30:].max() < 0.0015, off[30:]
    assert baked.report["start_offset"] < 1e-4 and baked.report["first_step"] < 0.01


@pytest.mark.parametrize("drive", ["keys", "live preview", "live preview over FK keys", "live preview over FK keys, the rig moved and turned"])
def test_played_in_the_viewport_a_joint_to_a_body_moving_from_the_first_frame_holds(addon, tmp_path, drive):
    """The same ornament played on the timeline with physics on, the knee moved by baked keys or
    by the live preview's leg IK (the leg bones unkeyed). Its joint is built on the first frame's
    pose (the knee body is held there for the evaluation of the second frame): once the leg stops
    the ornament sits on its joint (26.6 mm off before, with keys). While the leg moves it keeps
    within the joint's slack: the live preview shows each frame before Blender simulates it too,
    so the knee body is carried by that frame's IK (11 mm behind before); where the motion also
    keys the leg, which the animation sets in the evaluation that steps the simulation, the knee
    body is given the own transform that makes up for it (also with the armature object moved
    and turned 90 degrees after the import). Frame 2, whose step
    carries no motion of the knee, is left out. The knee body is parented to its bone again."""
    bpy = addon
    from marionette.bridge.rigid_bodies import set_physics
    from marionette.usecases.bake_controls import bake_controls

    pmx, vmd = _ornament_files(tmp_path, fk_keys="FK keys" in drive)
    result = _import(bpy, pmx, vmd)
    obj, bodies = result.obj, result.physics.bodies
    scene = bpy.context.scene
    if drive.endswith("turned"):
        obj.location = (1.0, -2.0, 0.5)
        obj.rotation_euler = (0.0, 0.0, math.pi / 2)
    if drive == "keys":
        bake_controls(obj, np.arange(1, 47, dtype=float))
    else:
        obj.marionette_controls.live_preview = True
    set_physics(obj, scene, True)
    placements = []
    for f in range(1, 47):
        scene.frame_set(f)
        placements.append([np.array(b.matrix_world) for b in bodies])
    off = _off_joint(bodies, np.array(placements))
    knee = obj.pose.bones["左ひざ"]
    print(
        f"\n{drive}: the ornament off its joint by at most {off[2:30].max() * 1000:.2f} mm while the leg moves, "
        f"{off[30:].max() * 1000:.2f} mm once it stopped"
    )
    assert bodies[0].parent == obj and bodies[0].parent_type == "BONE" and bodies[0].parent_bone == "左ひざ"
    # The knee body rides on its bone as shown (it was held only inside the second frame's evaluation).
    tail = np.array(obj.matrix_world) @ np.array(knee.matrix) @ _along_y(knee.bone.length)
    np.testing.assert_allclose(np.array(bodies[0].matrix_world), tail @ np.array(bodies[0].matrix_basis), atol=1e-5)
    assert off[2:30].max() < 0.005, off
    assert off[30:].max() < 0.0015, off


def test_played_with_the_live_preview_a_bone_transformed_after_physics_follows_the_bodies(addon, tmp_path, files):
    """The same ornament played on the timeline with the live preview and physics on: as shown,
    it turns as the simulated hair bone does (the inheritance run again after the simulation
    step, on the pose the bodies left), frame by frame."""
    bpy = addon
    from marionette.bridge.rigid_bodies import set_physics

    obj = _after_physics_rig(bpy, tmp_path, files[1])
    obj.marionette_controls.live_preview = True
    set_physics(obj, bpy.context.scene, True)
    turns, gaps = [], []
    for f in range(1, 47):
        bpy.context.scene.frame_set(f)
        q_hair, q_orn = _shown_turn(obj, HAIR[0]), _shown_turn(obj, "髪飾り")
        turns.append(math.degrees(q_hair.angle))
        gaps.append(math.degrees(q_hair.rotation_difference(q_orn).angle))
    print(f"\nafter physics, live: the hair turned up to {max(turns):.1f} deg, the ornament off it by at most {max(gaps):.2e} deg")
    assert max(turns) > 10.0
    assert max(gaps) < 1e-3
