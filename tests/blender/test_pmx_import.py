"""PMX rigs in Blender: the import operator, what it stores, and the controls running on it.

Measured on Blender's own data: bone names and custom properties, rest matrices against the core
rig, the control rows the Controls workflow reads, and poses Blender evaluates after Bake
Controls (``pose_bone.matrix``), not the core's output.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import shared_file

pytestmark = pytest.mark.bpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from pmx_files import ANKLE, ARM, CENTER, GROOVE, KNEE, LEG, LEG_D, LEG_IK, TWIST, TWIST_1, leg_rig_bones, write_pmx  # noqa: E402

FRAMES = 24


@pytest.fixture
def addon(blender):
    """The add-on, the Controls workflow and the PMX importer registered (each only where the
    add-on does not register it itself yet), unregistered afterwards."""
    bpy = blender
    import marionette
    from marionette.operators import controls_register, pmx_import

    with contextlib.ExitStack() as registered:  # unregisters in reverse order, whatever happens
        marionette.register()
        registered.callback(marionette.unregister)
        if not hasattr(bpy.types.Object, "marionette_controls"):
            controls_register.register()
            registered.callback(controls_register.unregister)
        if not hasattr(bpy.types, "MARIONETTE_OT_import_pmx_rig"):
            pmx_import.register()
            registered.callback(pmx_import.unregister)
        bpy.context.scene.render.fps = 24
        yield bpy


@pytest.fixture
def leg_file(tmp_path):
    path = tmp_path / "leg.pmx"
    path.write_bytes(write_pmx(leg_rig_bones())[0])
    return path


@pytest.fixture
def imported(addon, leg_file):
    bpy = addon
    assert bpy.ops.marionette.import_pmx_rig(filepath=str(leg_file)) == {"FINISHED"}
    from marionette.core.formats.pmx import read_pmx
    from marionette.core.formats.pmx_rig import build_rig

    return bpy, bpy.context.view_layer.objects.active, build_rig(read_pmx(leg_file))


def test_import_keeps_names_rest_and_stores_the_controls(imported):
    bpy, obj, rig = imported
    from marionette.bridge.skeleton_read import skeleton_from_armature

    assert obj.type == "ARMATURE" and obj.name == "テストモデル" and obj.select_get()
    bones = obj.data.bones
    assert sorted(b.name for b in bones) == sorted(rig.skeleton.names)
    for j, name in enumerate(rig.skeleton.names):
        b = bones[name]
        assert (b["mmd_name"], b["mmd_name_english"]) == (rig.japanese[j], rig.english[j])
        p = rig.skeleton.parents[j]
        assert (b.parent is None) if p < 0 else b.parent.name == rig.skeleton.names[p]
    assert bones[KNEE]["mmd_name_english"] == "knee_L"
    # The rest Blender holds is the core rig's, to float32 precision.
    sk = skeleton_from_armature(obj)
    order = [sk.index(n) for n in rig.skeleton.names]
    diff = np.abs(sk.rest_placements()[order] - rig.skeleton.rest_placements()).max()
    assert diff < 1e-5, diff
    # One row per control, in the stack's run order.
    rows = list(obj.marionette_controls.controls)
    expected = [c.name for c in rig.stack.controls]
    assert [r.name for r in rows] == expected
    by_name = {r.name: r for r in rows}
    ik = by_name[f"IK {LEG_IK}"]
    assert (ik.kind, ik.bone_start, ik.bone_end, ik.end_bone) == ("CCD", LEG, KNEE, ANKLE)
    assert ik.target_object == obj and ik.target_bone == LEG_IK and ik.use_bone_limits and ik.max_passes == 40
    d = by_name[f"Inherit {LEG_D}"]
    assert (d.kind, d.bone_start, d.source_bone, d.rotation_fraction, d.translation_fraction) == ("INHERIT", LEG_D, LEG, 1.0, 0.0)
    g = by_name[f"Inherit {GROOVE}"]
    assert (g.source_bone, g.rotation_fraction, g.translation_fraction) == (CENTER, 0.0, -0.5)
    f = by_name[f"Fixed axis {TWIST}"]
    assert (f.kind, f.bone_start, f.twist_axis) == ("FIXED_AXIS", TWIST, "POS_Y")
    assert [r.priority for r in rows] == sorted(r.priority for r in rows)
    # The knee's link limits as its bone IK limits: X only, widened to contain 0.
    pb = obj.pose.bones[KNEE]
    assert pb.lock_ik_y and pb.lock_ik_z and pb.use_ik_limit_x and not pb.lock_ik_x
    assert pb.ik_min_x == 0.0 and math.pi - 1e-6 < pb.ik_max_x <= math.pi
    thigh = obj.pose.bones[LEG]
    assert not (thigh.use_ik_limit_x or thigh.lock_ik_x or thigh.lock_ik_y or thigh.lock_ik_z)


def test_the_controls_workflow_builds_the_same_stack(imported):
    _bpy, obj, rig = imported
    from marionette.bridge.control_rows import build_controls
    from marionette.core.controls.stack import FixedAxisControl, IKControl, InheritControl

    built = build_controls(obj)
    assert built.errors == {} and built.stack is not None
    sk = built.stack.skeleton
    ours = {c.name: c for c in rig.stack.controls}
    assert [c.name for c in built.stack.controls] == [c.name for c in rig.stack.controls]
    for c in built.stack.controls:
        mine = ours[c.name]
        assert type(c) is type(mine)
        if isinstance(c, InheritControl):
            (g,) = c.inheritance.grants
            (h,) = mine.inheritance.grants
            assert (sk.names[g.target], sk.names[g.source]) == (rig.skeleton.names[h.target], rig.skeleton.names[h.source])
            assert (g.rotation, g.translation) == (h.rotation, h.translation)
            assert np.abs(np.abs(g.carry @ h.carry) - 1.0) < 1e-6
        elif isinstance(c, FixedAxisControl):
            np.testing.assert_allclose(c.axes.axes, mine.axes.axes, atol=1e-6)
        else:
            assert isinstance(c, IKControl) and isinstance(mine, IKControl)
            assert [sk.names[j] for j in c.path.joints] == [rig.skeleton.names[j] for j in mine.path.joints]
            assert sk.names[c.path.end_joint] == rig.skeleton.names[mine.path.end_joint]
            assert (c.solver, c.max_passes) == (mine.solver, mine.max_passes)
            assert c.limits is not None and c.limits[0] is None and c.limits[1] is not None


def _animate(bpy, obj, rig, move_center=True):
    """24 frames: the leg IK bone walks the ankle's path (forward and back, lifted mid-swing),
    the twist bone turns freely, the centre moves (unless ``move_center`` is off: it carries the
    hip, and the IK bone does not follow it); returns the IK targets (armature space)."""
    rng = np.random.default_rng(4)
    rest = {b.name: np.array(b.matrix_local) for b in obj.data.bones}
    phase = np.linspace(0.0, 2.0 * math.pi, FRAMES, endpoint=False)
    ankle = rest[ANKLE][:3, 3]
    targets = ankle + np.stack([0.02 * np.sin(phase), 0.25 * np.sin(phase), 0.1 * (1.0 - np.cos(phase))], axis=1)
    # Never exactly the rest: a chain already at its target keeps its pose, rest included.
    targets[:, 2] += 0.01
    ik, twist, center = (obj.pose.bones[n] for n in (LEG_IK, TWIST, CENTER))
    for k in range(FRAMES):
        frame = k + 1
        ik.location = rest[LEG_IK][:3, :3].T @ (targets[k] - rest[LEG_IK][:3, 3])
        ik.keyframe_insert("location", frame=frame)
        q = rng.normal(size=4)
        twist.rotation_quaternion = q / np.linalg.norm(q)
        twist.keyframe_insert("rotation_quaternion", frame=frame)
        if move_center:
            center.location = rng.normal(scale=0.05, size=3)
            center.keyframe_insert("location", frame=frame)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, FRAMES
    return targets


def _baked_pose(bpy, obj):
    from marionette.usecases.bake_controls import bake_controls

    bake_controls(obj, np.arange(1, FRAMES + 1, dtype=float))
    names = [b.name for b in obj.data.bones]
    world, basis = [], []
    for frame in range(1, FRAMES + 1):
        bpy.context.scene.frame_set(frame)
        world.append([np.array(obj.pose.bones[n].matrix) for n in names])
        basis.append([np.array(obj.pose.bones[n].matrix_basis) for n in names])
    return {n: i for i, n in enumerate(names)}, np.array(world), np.array(basis)


def _quat(m):
    from marionette.core.rig.rotations import quat_from_matrix

    return quat_from_matrix(m)


def test_inheritance_and_fixed_axis_run_on_the_armature(imported):
    bpy, obj, rig = imported
    from marionette.core.rig.rotations import axis_angle_from_quat, quat_angle

    _animate(bpy, obj, rig)
    index, world, basis = _baked_pose(bpy, obj)
    rest = {b.name: np.array(b.matrix_local)[:3, :3] for b in obj.data.bones}

    def turn(name):
        """The bone's current turn from its rest, in armature axes."""
        return world[:, index[name], :3, :3] @ rest[name].T

    def local_turn(name, parent):
        return np.swapaxes(turn(parent), 1, 2) @ turn(name)

    # The D-bone turns as the thigh (same parent, ratio 1), IK correction included.
    assert np.abs(turn(LEG_D) - turn(LEG)).max() < 1e-5
    assert quat_angle(_quat(turn(LEG))).max() > 0.2
    # The twist bone keeps only its turn about the file's fixed axis (MMD (0.97, -0.24, 0)).
    axis = np.array([0.97, 0.0, -0.24]) / np.hypot(0.97, 0.24)
    twist_axis, twist_angle = axis_angle_from_quat(_quat(local_turn(TWIST, ARM)))
    moving = twist_angle > 1e-3
    assert moving.sum() > 15
    assert np.abs(np.abs(twist_axis[moving] @ axis) - 1.0).max() < 1e-5
    # The split bone: half of it.
    half = 0.5 * np.minimum(twist_angle, 2 * math.pi - twist_angle)
    np.testing.assert_allclose(quat_angle(_quat(local_turn(TWIST_1, ARM))), half, atol=1e-5)
    # The groove: -0.5 of the centre's movement, in armature axes.
    groove = np.einsum("ij,tj->ti", rest[GROOVE], basis[:, index[GROOVE], :3, 3])
    center = np.einsum("ij,tj->ti", rest[CENTER], basis[:, index[CENTER], :3, 3])
    np.testing.assert_allclose(groove, -0.5 * center, atol=1e-6)


def test_ik_leg_reaches_its_ik_bone_within_the_knee_limit(imported):
    bpy, obj, rig = imported
    from marionette.bridge.control_rows import build_controls
    from marionette.core.controls.joint_limits import HingeLimit

    # The rows hold the knee as bone IK limits (X only, Y and Z locked); the Controls workflow
    # must read them back as the hinge the core rig uses (an Euler box stalls CCD on a knee).
    knee_limit = build_controls(obj).stack.control(f"IK {LEG_IK}").limits[1]
    assert isinstance(knee_limit, HingeLimit)
    targets = _animate(bpy, obj, rig, move_center=False)
    index, world, basis = _baked_pose(bpy, obj)
    ankle = world[:, index[ANKLE], :3, 3]
    ik_bone = world[:, index[LEG_IK], :3, 3]
    np.testing.assert_allclose(ik_bone, targets, atol=1e-5)
    err = np.linalg.norm(ankle - ik_bone, axis=1)
    print(f"PMX leg in Blender: {FRAMES} frames, largest ankle-to-IK-bone distance {err.max():.2e}")
    assert err.max() <= 1e-3 + 1e-5, err.max()
    # The knee's own rotation: about its X only, by 0 to 180 degrees (what Blender's limits hold).
    q = _quat(basis[:, index[KNEE], :3, :3])
    q = q * np.sign(q[:, :1])
    assert np.abs(q[:, 2:]).max() < 1e-5
    angle = 2.0 * np.arctan2(q[:, 1], q[:, 0])
    assert angle.min() >= -1e-5 and angle.max() <= math.pi


def test_bad_files_are_refused_with_nothing_created(addon, tmp_path):
    bpy = addon
    data = write_pmx(leg_rig_bones())[0]
    cut = tmp_path / "cut.pmx"
    cut.write_bytes(data[: len(data) // 2])
    before = (len(bpy.data.objects), len(bpy.data.armatures))
    with pytest.raises(RuntimeError, match="section, byte"):
        bpy.ops.marionette.import_pmx_rig(filepath=str(cut))
    assert (len(bpy.data.objects), len(bpy.data.armatures)) == before
    with pytest.raises(RuntimeError, match="no such file|cannot read"):
        bpy.ops.marionette.import_pmx_rig(filepath=str(tmp_path / "missing.pmx"))
    assert (len(bpy.data.objects), len(bpy.data.armatures)) == before


def test_shared_file_imports(addon):
    bpy = addon
    path = shared_file("pmx/bone_hierarchy_test.pmx")
    assert bpy.ops.marionette.import_pmx_rig(filepath=str(path), bone_names="ENGLISH") == {"FINISHED"}
    obj = bpy.context.view_layer.objects.active
    # English names only where the model gives a bone one it shares with no other bone: "root"
    # is called "center" in English, the others have none.
    assert sorted(b.name for b in obj.data.bones) == sorted(["center", "bone1", "bone2", "bone3", "新規ボーン1"])
    assert obj.data.bones["center"]["mmd_name"] == "root"
    heads = {b.name: np.array(b.head_local) for b in obj.data.bones}
    np.testing.assert_allclose(heads["bone3"], [-5 * 0.08, 0.0, 10 * 0.08], atol=1e-6)
    assert len(obj.marionette_controls.controls) == 0


def test_import_job_writes_a_blend_and_a_json_report(addon, leg_file, tmp_path):
    bpy = addon
    from marionette.core.errors import FileFormatError
    from marionette.usecases.import_pmx import import_pmx_file

    out = tmp_path / "rig.blend"
    report = import_pmx_file(str(leg_file), str(out))
    assert json.loads(json.dumps(report)) == report
    assert report["controls"] == {"ik": 1, "inherit": 3, "fixed_axis": 1} and report["bones"] == 11
    assert any("Blender's IK limits hold 0.0 to 180.0" in n for n in report["notes"])
    assert out.is_file() and not list(tmp_path.glob("*.partial*"))
    bpy.ops.wm.open_mainfile(filepath=str(out), load_ui=False)
    obj = bpy.data.objects[report["object"]]
    assert [r.name for r in obj.marionette_controls.controls] == [c["name"] for c in report["stored_controls"]]
    assert obj.data.bones[KNEE]["mmd_name_english"] == "knee_L"
    bad = tmp_path / "bad.pmx"
    bad.write_bytes(b"PMX " + b"\x00" * 10)
    with pytest.raises(FileFormatError, match="header section"):
        import_pmx_file(str(bad), str(tmp_path / "never.blend"))
    assert not (tmp_path / "never.blend").exists()
