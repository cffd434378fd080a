"""Retargets onto Rigify's generated rig (the full human metarig, generated headless by Rigify
itself), judged on what deforms the mesh.

Every shared humanoid clip goes onto the generated rig and the saved result is re-measured by the
``measure`` command's function: it auto-maps the rig anew, onto its ``DEF-`` (deform) bones, so
the figures are those of the evaluated deform bones, with the thresholds a plain skeleton meets
(limb directions <= 1.5 deg mean with Plant Feet off, elbow/knee planes <= 5 deg, hips height
<= 5 % of hip height), on the FK and on the IK controls. The keys are on controls only (a mechanism
bone of an IK chain carries only its IK Stretch setting, held at 0 while the clip plays), the IK/FK
switches say FK or IK, and an FK control keyed afterwards moves a mesh skinned to the deform bones.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.data import shared_file
from tests.helpers.rigify_rig import rigify_rig_blend
from tests.usecases.test_real_pairs import CLIPS

pytestmark = [pytest.mark.bpy, pytest.mark.data]

SWITCH_BONES = ("upper_arm_parent.L", "upper_arm_parent.R", "thigh_parent.L", "thigh_parent.R")
#: Mean limb direction error allowed: a plain skeleton's, with either controls.
LIMB_LIMIT = 1.5
#: The settings a bake may key on a mechanism bone: the IK chains' stretch, held at 0.
MECHANISM_SETTINGS = ("ik_stretch",)


def _label(clip_file: str, clip_name: str | None) -> str:
    return clip_file.split("/")[-1] + (f"[{clip_name}]" if clip_name else "")


def _retarget_saved(clip_file: str, clip_name: str | None, mode: str, out: str):
    """The clip onto the generated rig (Plant Feet off, controls of ``mode``) saved to ``out`` by
    the ``retarget`` command's function; the outcome and the bones each F-curve of the new action
    keys, with its switch keys, read before anything else runs."""
    from marionette.core.retarget.geometric import RetargetOptions
    from marionette.usecases.retarget import retarget_files

    options = RetargetOptions(plant_feet=False)
    source_path, rig_path = shared_file(clip_file), rigify_rig_blend()
    outcome = retarget_files(
        str(source_path), str(rig_path), out, clip=clip_name, target_armature="rig", options=options, control_rig=mode
    )
    return outcome, _keys(outcome.action)


def _keys(action) -> dict[str, object]:
    """What an action keys: the bone of every F-curve's data path, the values of the ``IK_FK``
    curves per bone, and the bones whose only curves are settings (``ik_stretch``) with their values."""
    import bpy

    from marionette.bridge import compat

    obj = next(o for o in bpy.data.objects if o.name == "rig")
    bones, switches, others, settings = set(), {}, [], {}
    for fc in compat.action_fcurves(action, compat.action_slot_for(action, obj)):
        path = fc.data_path
        if not path.startswith('pose.bones["'):
            others.append(path)
            continue
        bone = path[len('pose.bones["') :].split('"]', 1)[0]
        if path.endswith(tuple("." + s for s in MECHANISM_SETTINGS)):
            settings.setdefault(bone, {})[path.rsplit(".", 1)[1]] = sorted({round(k.co[1], 6) for k in fc.keyframe_points})
            continue
        bones.add(bone)
        if path.endswith('["IK_FK"]'):
            switches[bone] = sorted({round(k.co[1], 6) for k in fc.keyframe_points})
    return {"bones": bones, "switches": switches, "others": others, "settings": settings}


def _assert_controls_only(keys: dict[str, object], label: str) -> None:
    bones = keys["bones"]
    assert bones, label
    mechanism = sorted(b for b in bones if b.startswith(("DEF-", "ORG-", "MCH-")))
    assert mechanism == [], (label, mechanism)
    settings = keys["settings"]
    assert all(not b.startswith(("DEF-", "ORG-")) for b in settings), (label, settings)
    assert all(values == [0.0] for s in settings.values() for values in s.values()), (label, settings)


def _deform_mapping_of_saved_rig(out: str) -> dict[str, str]:
    """The slots the ``measure`` command maps the saved rig onto (its own auto-mapping)."""
    from marionette.bridge.file_import import load_file
    from marionette.bridge.session import fresh_session
    from marionette.usecases.rigs import pick_armature, rig_input

    fresh_session()
    target = pick_armature(load_file(out).armatures, "rig", "rig")
    _, mapping = rig_input(target)
    return mapping.bones()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["fk", "ik"])
def test_every_shared_clip_onto_rigify_plays_on_the_deform_bones(blender, tmp_path, capsys, mode):
    from marionette.usecases.measure import measure_files

    rows, failures = [], []
    for clip_file, clip_name in CLIPS:
        label = _label(clip_file, clip_name)
        out = str(tmp_path / f"{mode}_{len(rows)}.blend")
        outcome, keys = _retarget_saved(clip_file, clip_name, mode, out)
        assert outcome.report["control_rig"]["kind"] == "rigify", label
        _assert_controls_only(keys, label)
        want = 1.0 if mode == "fk" else 0.0
        assert {b: keys["switches"].get(b) for b in SWITCH_BONES} == {b: [want] for b in SWITCH_BONES}, label
        report = measure_files(str(shared_file(clip_file)), out, clip=clip_name, target_armature="rig")
        s = report["summary"]
        rows.append((label, s["mean_limb_direction_error"], s["max_limb_plane_error"], 100 * s["hips_height_error"]))
        if not (s["mean_limb_direction_error"] <= LIMB_LIMIT and s["max_limb_plane_error"] <= 5.0 and s["hips_height_error"] <= 0.05):
            failures.append(rows[-1])
    with capsys.disabled():
        print(f"\nRigify generated rig, {mode.upper()} controls, measured on the deform bones (Plant Feet off)")
        print("| clip | limb dir. err. mean (deg) | elbow/knee plane err. max (deg) | hips height err. max (%) |")
        print("|---|---|---|---|")
        for label, d, p, h in rows:
            print(f"| {label} | {d:.3f} | {p:.3f} | {h:.3f} |")
    assert failures == []
    assert len(rows) == len(CLIPS)
    # The figures are those of the deform bones: the measure maps every limb onto a DEF- bone.
    mapped = _deform_mapping_of_saved_rig(out)
    limbs = [f"{p}.{s}" for p in ("upper_arm", "forearm", "hand", "thigh", "shin", "foot") for s in "LR"]
    assert all(mapped[slot].startswith("DEF-") for slot in limbs + ["hips"]), mapped


@pytest.mark.slow
def test_ik_controls_keep_the_limbs_their_length_and_bend(blender, tmp_path):
    """Quaternius Man_Run on the IK controls. Blender's IK with IK Stretch (Rigify's chains have 0.1)
    shortens a bent chain as it solves, up to 9 % on this run's shins: the bake holds the chains'
    stretch at 0, so every evaluated limb keeps its rest length on every frame and bends as the
    clip does (a plain skeleton's 1.5 deg)."""
    import bpy

    from marionette.usecases.measure import measure_files

    clip_file, clip_name = "fbx/quaternius_male_casual.fbx", "Man_Run"
    out = str(tmp_path / "ik_run.blend")
    _, keys = _retarget_saved(clip_file, clip_name, "ik", out)
    chains = {f"{b}{side}" for b in ("upper_arm_ik", "thigh_ik", "MCH-forearm_ik", "MCH-shin_ik") for side in (".L", ".R")}
    assert keys["settings"] == {b: {"ik_stretch": [0.0]} for b in chains}
    _assert_controls_only(keys, clip_name)
    report = measure_files(str(shared_file(clip_file)), out, clip=clip_name, target_armature="rig")
    assert report["summary"]["mean_limb_direction_error"] <= 1.5

    bpy.ops.wm.open_mainfile(filepath=out)
    rig = bpy.data.objects["rig"]
    first, last = (int(f) for f in rig.animation_data.action.frame_range)
    limbs = [f"DEF-{p}{side}" for p in ("upper_arm", "forearm", "thigh", "shin") for side in (".L", ".R")]
    ratios = []
    for frame in range(first, last + 1):
        bpy.context.scene.frame_set(frame)
        ratios.append([rig.pose.bones[b].length / rig.data.bones[b].length for b in limbs])
    assert np.abs(np.array(ratios) - 1.0).max() < 1e-3


def test_rigify_fk_keys_only_controls_and_sets_the_switches_to_fk(blender, tmp_path):
    """One CMU walk: every F-curve is on a control (no DEF-, ORG- or MCH- bone), the four IK/FK
    switches are keyed 1.0, and the keyed controls are the FK ones the report lists."""
    outcome, keys = _retarget_saved("bvh/cmu/02_02_daz.bvh", None, "fk", str(tmp_path / "fk.blend"))
    _assert_controls_only(keys, "02_02")
    assert keys["others"] == []
    assert {b: keys["switches"].get(b) for b in SWITCH_BONES} == {b: [1.0] for b in SWITCH_BONES}
    controls = set(outcome.report["control_rig"]["controls"])
    assert keys["bones"] - set(SWITCH_BONES) <= controls
    for side in "LR":
        for part in ("upper_arm_fk", "forearm_fk", "hand_fk", "thigh_fk", "shin_fk", "foot_fk"):
            assert f"{part}.{side}" in keys["bones"], part
    assert {"torso", "head"} <= keys["bones"]
    assert not any(b.endswith(("_ik.L", "_ik.R")) for b in keys["bones"])


def _skinned_patch(bpy, rig, bone: str):
    """A small mesh (four vertices around ``bone``'s middle) skinned to ``bone`` alone by an
    Armature modifier and a vertex group of that name."""
    rest = np.array(rig.data.bones[bone].matrix_local)
    head, y = rest[:3, 3], rest[:3, 1]
    length = rig.data.bones[bone].length
    x, z = rest[:3, 0], rest[:3, 2]
    mid = head + 0.5 * length * y
    verts = [tuple(mid + 0.03 * a + 0.02 * b) for a, b in ((x, z), (-x, z), (x, -z), (-x, -z))]
    mesh = bpy.data.meshes.new("patch")
    mesh.from_pydata(verts, [], [(0, 1, 3, 2)])
    obj = bpy.data.objects.new("patch", mesh)
    bpy.context.scene.collection.objects.link(obj)
    obj.matrix_world = rig.matrix_world.copy()
    group = obj.vertex_groups.new(name=bone)
    group.add([0, 1, 2, 3], 1.0, "REPLACE")
    mod = obj.modifiers.new("Armature", "ARMATURE")
    mod.object = rig
    return obj, np.array(verts)


def _evaluated_vertices(bpy, obj) -> np.ndarray:
    ev = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    mesh = ev.to_mesh()
    try:
        co = np.empty(len(mesh.vertices) * 3)
        mesh.vertices.foreach_get("co", co)
    finally:
        ev.to_mesh_clear()
    return co.reshape(-1, 3)


def test_an_fk_control_keyed_after_the_retarget_moves_the_skinned_mesh(blender, tmp_path):
    """A mesh skinned to DEF-forearm.L follows the clip (its vertices where the deform bone's
    evaluated matrix puts them, and moving between frames); keying forearm_fk.L 30 deg further
    afterwards turns the deform bone and the mesh with it, about the elbow."""
    bpy = blender
    from marionette.bridge.file_import import load_file, scene_fps
    from marionette.core.retarget.geometric import RetargetOptions
    from marionette.usecases.retarget import retarget_action
    from marionette.usecases.rigs import pick_action, pick_armature

    rig = pick_armature(load_file(str(rigify_rig_blend())).armatures, "rig", "rig")
    loaded = load_file(str(shared_file("bvh/cmu/02_02_daz.bvh")))
    source = pick_armature(loaded.armatures, None, "source")
    rig.data.bones["DEF-forearm.L"].bbone_segments = 1  # the vertices follow the bone's own matrix
    patch, rest_verts = _skinned_patch(bpy, rig, "DEF-forearm.L")
    outcome = retarget_action(
        source, pick_action(loaded, source, None), rig, scene_fps=scene_fps(), options=RetargetOptions(plant_feet=False), name="walk"
    )
    assert outcome.report["control_rig"]["kind"] == "rigify"
    rig.animation_data.action = outcome.action
    scene = bpy.context.scene
    rest = np.array(rig.data.bones["DEF-forearm.L"].matrix_local)
    world = np.array(rig.matrix_world)
    homog = np.c_[rest_verts, np.ones(4)]

    def played(frame: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        scene.frame_set(frame)
        pose = np.array(rig.evaluated_get(bpy.context.evaluated_depsgraph_get()).pose.bones["DEF-forearm.L"].matrix)
        want = (world @ pose @ np.linalg.inv(rest) @ np.linalg.inv(world) @ homog.T).T[:, :3]
        return _evaluated_vertices(bpy, patch), want, pose

    first, last = (int(f) for f in outcome.action.frame_range)
    frames = [first, (first + last) // 2, last]
    seen = [played(f) for f in frames]
    for got, want, _ in seen:
        assert np.abs(got - want).max() < 1e-4
    assert np.linalg.norm(seen[0][0] - seen[1][0], axis=1).max() > 0.01  # the clip moves the forearm

    # The animator keys the FK forearm 30 deg further about its own X axis (the elbow's bend).
    frame = frames[1]
    scene.frame_set(frame)
    control = rig.pose.bones["forearm_fk.L"]
    assert control.rotation_mode == "QUATERNION"
    import mathutils

    control.rotation_quaternion = control.rotation_quaternion @ mathutils.Quaternion((1.0, 0.0, 0.0), np.radians(30.0))
    control.keyframe_insert("rotation_quaternion", frame=frame)
    before_verts, _, before_pose = seen[1]
    after_verts, want, after_pose = played(frame)
    assert np.abs(after_verts - want).max() < 1e-4  # still skinned to the deform bone
    # Each vertex sits about half the bone's length from the elbow: a 30 deg turn moves it by
    # about that length times 2 sin(15 deg).
    moved = np.linalg.norm(after_verts - before_verts, axis=1)
    assert moved.min() > 0.5 * rig.data.bones["DEF-forearm.L"].length * 2 * np.sin(np.radians(15.0)) * 0.9, moved
    # The deform bone turned by the 30 deg, about the elbow (its head stays put).
    assert np.linalg.norm(after_pose[:3, 3] - before_pose[:3, 3]) < 1e-4
    ya, yb = after_pose[:3, 1] / np.linalg.norm(after_pose[:3, 1]), before_pose[:3, 1] / np.linalg.norm(before_pose[:3, 1])
    assert abs(np.degrees(np.arccos(np.clip(ya @ yb, -1.0, 1.0))) - 30.0) < 0.5
