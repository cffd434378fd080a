"""The bridge loading real files on real Blender: every animated armature in tests/data is imported
once (module fixture), read into a core clip, written back and compared with what Blender plays;
BVH, FBX, glTF and .blend files keep their bones, frames, rates and motion."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

from marionette.core.formats.bvh import read_bvh
from marionette.core.rig.rotations import quat_angle_between
from tests.helpers.bridge_rigs import TOL, _fk_world, _lengths, _points, _rig_height
from tests.helpers.data import shared_file

pytestmark = pytest.mark.bpy


FBX_CLIPS = (
    "Man_Clapping", "Man_Death", "Man_Idle", "Man_Jump", "Man_Punch", "Man_Run",
    "Man_RunningJump", "Man_Sitting", "Man_Standing", "Man_SwordSlash", "Man_Walk",
)  # fmt: skip
CASES = [
    ("bvh/cmu/12_03_motionbuilder.bvh", None),
    ("bvh/cmu/02_02_daz.bvh", None),
    ("bvh/makehuman/walk1_zup.bvh", None),
    ("bvh/makehuman/tpose_zup.bvh", None),
    *[("fbx/quaternius_male_casual.fbx", c) for c in FBX_CLIPS],
    ("gltf/khronos_rigged_figure.glb", None),
    ("gltf/khronos_cesium_man.glb", None),
]
CASE_IDS = [f"{os.path.basename(f)}{'#' + c if c else ''}" for f, c in CASES]


# --- helpers ---------------------------------------------------------------------------------


def _bpy():
    try:
        import bpy
    except ImportError as exc:  # pragma: no cover - CI installs bpy
        if os.environ.get("CI"):
            raise
        pytest.skip(f"bpy (Blender as a Python module) is not installed: {exc}")
    return bpy


def _fresh(bpy) -> None:
    from marionette.bridge import compat

    bpy.ops.wm.read_factory_settings(use_empty=True)
    compat.enable_importers()


def _play(obj, action) -> None:
    """Make ``obj`` play ``action`` alone (its slot, NLA off), as a user would to look at it."""
    from marionette.bridge import compat

    compat.assign_action(obj, action, compat.action_slot_for(action, obj))
    obj.animation_data.use_nla = False


def _action_for(loaded, clip_suffix: str | None):
    if clip_suffix is None:
        return loaded.actions[0]
    (action,) = [a for a in loaded.actions if a.name.endswith("|" + clip_suffix)]
    return action


# --- the round trip of every animated armature in tests/data --------------------------------


@pytest.fixture(scope="module")
def round_trips():
    """Measures per case, computed once: errors are fractions of the rig's height (positions)
    or degrees (rotations); nothing Blender-owned outlives the fixture."""
    bpy = _bpy()
    from marionette.bridge import action_write, clip_read, evaluated_pose, file_import, skeleton_read

    results: dict[str, dict[str, float]] = {}
    by_file: dict[str, list[tuple[int, str | None]]] = {}
    for k, (f, c) in enumerate(CASES):
        by_file.setdefault(f, []).append((k, c))
    for relative, cases in by_file.items():
        path = shared_file(relative)
        _fresh(bpy)
        loaded = file_import.load_file(path)
        (obj,) = loaded.armatures
        skeleton = skeleton_read.skeleton_from_armature(obj)
        height = _rig_height(obj, skeleton)
        lengths = _lengths(obj, skeleton)
        for k, suffix in cases:
            action = _action_for(loaded, suffix)
            clip = clip_read.clip_from_action(obj, action)
            frames = clip.frame_numbers()
            _play(obj, action)
            ref = evaluated_pose.evaluated_world_matrices(obj, frames, skeleton)
            ref_pts = _points(ref, lengths)
            fk = _fk_world(skeleton, clip)
            # The frame_set path on the same action.
            evaluated = clip_read.clip_from_evaluation(obj, action, frames)
            fk_eval = _fk_world(skeleton, evaluated)
            # Written on a copy of the object with its own action, keeping the frame numbers.
            copy = obj.copy()
            bpy.context.scene.collection.objects.link(copy)
            written = action_write.write_action(copy, clip, f"{action.name} round trip", fps=clip.fps)
            got = evaluated_pose.evaluated_world_matrices(copy, frames, skeleton)
            results[CASE_IDS[k]] = {
                "frames": clip.frame_count,
                "bones": len(skeleton),
                "height": height,
                "fps": clip.fps,
                "action_fps": float(action["marionette_fps"]),
                "round_trip": float(np.abs(_points(got, lengths) - ref_pts).max() / height),
                "core_fk": float(np.abs(_points(fk, lengths) - ref_pts).max() / height),
                "bulk_vs_frame_set": float(np.abs(_points(fk_eval, lengths) - _points(fk, lengths)).max() / height),
                "bulk_vs_frame_set_deg": float(
                    np.degrees(quat_angle_between(clip.rotations, evaluated.rotations).max())
                ),
                "written_fps": float(written["marionette_fps"]),
                "slot_assigned": float(
                    copy.animation_data.action == written and copy.animation_data.action_slot == written.slots[0]
                ),
            }
            bpy.data.objects.remove(copy)
    _fresh(bpy)
    return results


@pytest.mark.slow
@pytest.mark.parametrize("case", CASE_IDS)
def test_round_trip_matches_blender(round_trips, case: str) -> None:
    r = round_trips[case]
    assert r["frames"] >= 1 and r["bones"] >= 2
    assert r["round_trip"] <= TOL, r
    assert r["slot_assigned"] == 1.0
    assert r["written_fps"] == r["fps"] == r["action_fps"]


@pytest.mark.slow
@pytest.mark.parametrize("case", CASE_IDS)
def test_core_forward_kinematics_matches_blender(round_trips, case: str) -> None:
    r = round_trips[case]
    assert r["core_fk"] <= TOL, r


@pytest.mark.slow
@pytest.mark.parametrize("case", CASE_IDS)
def test_bulk_read_agrees_with_frame_set_read(round_trips, case: str) -> None:
    r = round_trips[case]
    assert r["bulk_vs_frame_set"] <= TOL, r
    assert r["bulk_vs_frame_set_deg"] <= 0.01, r


@pytest.mark.slow
def test_every_animated_file_was_covered(round_trips) -> None:
    missing = [c for c in CASE_IDS if c not in round_trips]
    assert missing == []
    fps = {c: round_trips[c]["fps"] for c in CASE_IDS}
    assert fps["12_03_motionbuilder.bvh"] == fps["02_02_daz.bvh"] == 120.0
    assert fps["walk1_zup.bvh"] == 24.0


# --- loading ---------------------------------------------------------------------------------


def test_bvh_keeps_frame_numbers_and_records_the_rate(blender) -> None:
    from marionette.bridge import clip_read, file_import

    scene = blender.context.scene
    before = (scene.render.fps, scene.frame_start, scene.frame_end, scene.frame_current)
    loaded = file_import.load_file(shared_file("bvh/cmu/12_03_motionbuilder.bvh"))
    assert loaded.fps == 120.0
    (action,) = loaded.actions
    assert action["marionette_fps"] == 120.0
    assert tuple(action.frame_range) == (1.0, 566.0)  # the file's frame numbers
    assert (scene.render.fps, scene.frame_start, scene.frame_end, scene.frame_current) == before
    clip = clip_read.clip_from_action(loaded.armatures[0], action)
    assert clip.frame_count == 566 and clip.first_frame == 1.0
    assert clip.duration == pytest.approx(565 / 120.0)


@pytest.mark.parametrize("relative", ["bvh/makehuman/walk1_zup.bvh", "bvh/cmu/02_02_daz.bvh"])
def test_bvh_stands_up_whatever_the_file_axis(blender, relative: str) -> None:
    from marionette.bridge import file_import, skeleton_read

    loaded = file_import.load_file(shared_file(relative))
    obj = loaded.armatures[0]
    skeleton = skeleton_read.skeleton_from_armature(obj)
    heads, tails = skeleton_read.rest_heads_tails(obj, skeleton)
    pts = np.concatenate([heads, tails])
    extent = pts.max(axis=0) - pts.min(axis=0)
    # Standing: Blender's Z is the body's long axis (a Z-up file imported as Y-up lies along Y).
    assert extent[2] > 2.0 * extent[1], extent


def test_core_bvh_reader_agrees_with_blenders_importer(blender) -> None:
    """Core FK of the file as read by core/formats/bvh.py, turned from Y-up to Blender's Z-up, equals the
    world positions Blender's own importer produces, at every frame."""
    from marionette.bridge import evaluated_pose, file_import, skeleton_read

    path = shared_file("bvh/cmu/02_02_daz.bvh")
    bvh = read_bvh(path)
    clip = bvh.clip()
    fk = bvh.skeleton().forward_kinematics(clip.rotations, clip.translations)[..., :3, 3]
    y_up_to_z_up = np.array([[1.0, 0, 0], [0, 0, -1], [0, 1, 0]])
    mine = fk @ y_up_to_z_up.T
    obj = file_import.load_file(path).armatures[0]
    skeleton = skeleton_read.skeleton_from_armature(obj)
    theirs = evaluated_pose.evaluated_world_positions(obj, clip.frame_numbers(), skeleton)
    order = [bvh.names.index(n) for n in skeleton.names]
    height = _rig_height(obj, skeleton)
    assert np.abs(mine[:, order] - theirs).max() <= TOL * height


def test_fbx_with_a_light_imports(blender) -> None:
    from marionette.bridge import compat, file_import

    loaded = file_import.load_file(shared_file("fbx/assimp_huesitos_with_light.fbx"))
    assert [o.type for o in loaded.objects].count("LIGHT") == 1
    (arm,) = loaded.armatures
    assert len(arm.data.bones) == 11
    assert loaded.fps == 25.0 and loaded.actions[0]["marionette_fps"] == 25.0
    assert blender.context.scene.render.fps == 24  # the importer's change of rate is undone
    cls = compat._cycles_light_settings_class()
    # The stand-in property lives only during the import.
    assert cls is None or "cast_shadow" not in cls.bl_rna.properties


@pytest.mark.slow
def test_fbx_keeps_every_bone_and_names_actions(blender) -> None:
    from marionette.bridge import file_import

    loaded = file_import.load_file(shared_file("fbx/quaternius_male_casual.fbx"))
    (arm,) = loaded.armatures
    names = [b.name for b in arm.data.bones]
    assert len(names) == 42 and sum(n.endswith("_end") for n in names) == 11
    assert sorted(a.name.split("|")[-1] for a in loaded.actions) == sorted(FBX_CLIPS)
    assert all(a.name.startswith("HumanArmature|HumanArmature|") for a in loaded.actions)


@pytest.mark.slow
def test_gltf_fortune_points_bones_at_children_and_keeps_the_motion(blender) -> None:
    """bone_heuristic='FORTUNE' (what load_file uses) against the importer's default: bones point
    at their only child, and world joint positions over the clip are the same."""
    from marionette.bridge import evaluated_pose, file_import, skeleton_read

    path = shared_file("gltf/khronos_cesium_man.glb")
    fortune = file_import.load_file(path).armatures[0]
    angles = []
    for b in fortune.data.bones:
        if len(b.children) == 1:
            d = np.array(b.children[0].head_local - b.head_local)
            if np.linalg.norm(d) > 1e-6:
                y = np.array(b.tail_local - b.head_local)
                angles.append(math.degrees(math.acos(np.clip(y @ d / np.linalg.norm(y) / np.linalg.norm(d), -1, 1))))
    assert angles and max(angles) < 0.1

    before = set(blender.data.objects)
    blender.ops.import_scene.gltf(filepath=str(path), bone_heuristic="BLENDER", disable_bone_shape=True)
    (default,) = [o for o in blender.data.objects if o not in before and o.type == "ARMATURE"]
    sk_f = skeleton_read.skeleton_from_armature(fortune)
    sk_d = skeleton_read.skeleton_from_armature(default)
    frames = np.arange(1, 49, dtype=float)
    _play(fortune, fortune.animation_data.action)
    _play(default, default.animation_data.action)
    pf = evaluated_pose.evaluated_world_positions(fortune, frames, sk_f)
    pd = evaluated_pose.evaluated_world_positions(default, frames, sk_d)[:, [sk_d.index(n) for n in sk_f.names]]
    assert np.abs(pf - pd).max() <= TOL * _rig_height(fortune, sk_f)


def test_blend_appends_armatures_and_what_they_need(blender) -> None:
    from marionette.bridge import file_import

    kinds = ("objects", "meshes", "armatures", "materials", "images", "node_groups")
    before = {k: set(getattr(blender.data, k)) for k in kinds}
    loaded = file_import.load_file(shared_file("blend/vrm_addon_apose_rest.blend"))
    (arm,) = loaded.armatures
    assert len(arm.data.bones) == 54 and loaded.actions == []
    assert arm.name in blender.context.scene.objects
    # Everything kept is in the scene and in use; what the armature did not need was removed.
    assert all(o.users_collection for o in loaded.objects)
    for k in kinds:
        new = [i for i in getattr(blender.data, k) if i not in before[k]]
        assert all(i.users > 0 for i in new), (k, [i.name for i in new if i.users == 0])
    assert {o.type for o in loaded.objects} <= {"ARMATURE", "MESH", "EMPTY"}
