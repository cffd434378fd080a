"""The Blender bridge on real Blender and real files: loading, bulk read, bulk write, evaluation.

Every animated armature in tests/data is imported once (module fixture), read into a core
clip, written back onto a copy of the object and compared with Blender's own evaluation of the
original: world positions of every bone's head and tail at every frame, within 1e-4 of the rig's
height. The same data checks core forward kinematics and the frame_set fallback.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from conftest import shared_file

from marionette.core.errors import ClipError, FileFormatError, RigError
from marionette.core.formats.bvh import read_bvh
from marionette.core.rig.clip import Clip
from marionette.core.rig.rotations import quat_angle_between, quat_from_axis_angle, quat_normalize

pytestmark = pytest.mark.bpy

TOL = 1e-4  # of the rig's height

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


def _counts(bpy) -> dict[str, int]:
    names = (
        "objects",
        "actions",
        "armatures",
        "meshes",
        "materials",
        "images",
        "lights",
        "cameras",
        "collections",
        "node_groups",
        "textures",
    )
    return {n: len(getattr(bpy.data, n)) for n in names}


def _play(obj, action) -> None:
    """Make ``obj`` play ``action`` alone (its slot, NLA off), as a user would to look at it."""
    from marionette.bridge import compat

    compat.assign_action(obj, action, compat.action_slot_for(action, obj))
    obj.animation_data.use_nla = False


def _points(world: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Heads and tails ``(T, 2B, 3)`` of bones placed at ``world`` ``(T, B, 4, 4)``: a tail is
    the head plus the bone's Y axis times its length, so it also sees a leaf bone's rotation."""
    heads = world[..., :3, 3]
    tails = heads + world[..., :3, 1] * lengths[None, :, None]
    return np.concatenate([heads, tails], axis=1)


def _rig_height(obj, skeleton) -> float:
    from marionette.bridge import skeleton_read

    heads, tails = skeleton_read.rest_heads_tails(obj, skeleton)
    pts = np.concatenate([heads, tails])
    w = (skeleton.placement[:3, :3] @ pts.T).T + skeleton.placement[:3, 3]
    return float((w.max(axis=0) - w.min(axis=0)).max())


def _lengths(obj, skeleton) -> np.ndarray:
    return np.array([obj.data.bones[n].length for n in skeleton.names])


def _fk_world(skeleton, clip: Clip) -> np.ndarray:
    return skeleton.world_from_skeleton(skeleton.forward_kinematics(clip.rotations, clip.translations, clip.scales))


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


@pytest.mark.parametrize("case", CASE_IDS)
def test_round_trip_matches_blender(round_trips, case: str) -> None:
    r = round_trips[case]
    assert r["frames"] >= 1 and r["bones"] >= 2
    assert r["round_trip"] <= TOL, r
    assert r["slot_assigned"] == 1.0
    assert r["written_fps"] == r["fps"] == r["action_fps"]


@pytest.mark.parametrize("case", CASE_IDS)
def test_core_forward_kinematics_matches_blender(round_trips, case: str) -> None:
    r = round_trips[case]
    assert r["core_fk"] <= TOL, r


@pytest.mark.parametrize("case", CASE_IDS)
def test_bulk_read_agrees_with_frame_set_read(round_trips, case: str) -> None:
    r = round_trips[case]
    assert r["bulk_vs_frame_set"] <= TOL, r
    assert r["bulk_vs_frame_set_deg"] <= 0.01, r


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


def test_fbx_keeps_every_bone_and_names_actions(blender) -> None:
    from marionette.bridge import file_import

    loaded = file_import.load_file(shared_file("fbx/quaternius_male_casual.fbx"))
    (arm,) = loaded.armatures
    names = [b.name for b in arm.data.bones]
    assert len(names) == 42 and sum(n.endswith("_end") for n in names) == 11
    assert sorted(a.name.split("|")[-1] for a in loaded.actions) == sorted(FBX_CLIPS)
    assert all(a.name.startswith("HumanArmature|HumanArmature|") for a in loaded.actions)


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


# --- bad input: refused clearly, nothing changed -------------------------------------------


def _bad_files(tmp_path):
    cmu = shared_file("bvh/cmu/12_03_motionbuilder.bvh").read_bytes()
    fbx = shared_file("fbx/quaternius_male_casual.fbx").read_bytes()
    glb = shared_file("gltf/khronos_cesium_man.glb").read_bytes()
    out = {}
    for name, data in {
        "truncated.bvh": cmu[: len(cmu) // 2],
        "corrupt.bvh": cmu.replace(b"-21 0 0", b"-21 zero 0", 1),
        "truncated.fbx": fbx[: len(fbx) * 2 // 5],
        "corrupt.fbx": os.urandom(4096),
        "truncated.glb": glb[:20000],
        "corrupt.blend": b"BLENDER-v300" + os.urandom(512),
    }.items():
        p = tmp_path / name
        p.write_bytes(data)
        out[name] = p
    out["no_armature.glb"] = shared_file("gltf/kenney_character_no_armature.glb")
    out["missing.fbx"] = tmp_path / "missing.fbx"
    out["notes.txt"] = tmp_path / "notes.txt"
    out["notes.txt"].write_text("hello")
    return out


BAD = {
    "truncated.bvh": r"truncated.bvh, line \d+: truncated",
    "corrupt.bvh": r"corrupt.bvh, line 188: 'zero' is not a number",
    "truncated.fbx": r"truncated.fbx: the file could not be imported",
    "corrupt.fbx": r"corrupt.fbx: the file could not be imported",
    "truncated.glb": r"truncated.glb: the file could not be imported",
    "corrupt.blend": r"corrupt.blend: the file could not be imported",
    "no_armature.glb": r"kenney_character_no_armature.glb: the file has no armature",
    "missing.fbx": r"missing.fbx: no such file",
    "notes.txt": r"notes.txt: unsupported file type '.txt'",
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_files_are_refused_and_change_nothing(blender, tmp_path, name: str) -> None:
    from marionette.bridge import file_import

    files = _bad_files(tmp_path)
    # Something in the scene already, so "unchanged" means something.
    file_import.load_file(shared_file("bvh/makehuman/walk1_zup.bvh"))
    scene = blender.context.scene
    before = _counts(blender)
    state = (scene.render.fps, scene.render.fps_base, scene.frame_current, blender.context.view_layer.objects.active)
    with pytest.raises(FileFormatError, match=BAD[name]):
        file_import.load_file(files[name])
    assert _counts(blender) == before
    assert (
        scene.render.fps,
        scene.render.fps_base,
        scene.frame_current,
        blender.context.view_layer.objects.active,
    ) == state


def test_armature_without_bones_is_refused(blender) -> None:
    from marionette.bridge import clip_read, evaluated_pose, skeleton_read

    arm = blender.data.armatures.new("Empty")
    obj = blender.data.objects.new("NoBones", arm)
    blender.context.scene.collection.objects.link(obj)
    action = blender.data.actions.new("Anything")
    for call in (
        lambda: skeleton_read.skeleton_from_armature(obj),
        lambda: skeleton_read.rest_heads_tails(obj),
        lambda: clip_read.clip_from_action(obj, action),
        lambda: clip_read.clip_from_evaluation(obj, action),
        lambda: evaluated_pose.evaluated_world_positions(obj, [1]),
    ):
        with pytest.raises(RigError, match="armature object 'NoBones' has no bones"):
            call()
    mesh = blender.data.objects.new("NotAnArmature", None)
    with pytest.raises(RigError, match="'NotAnArmature' is not an armature object"):
        skeleton_read.skeleton_from_armature(mesh)


def _small_rig(blender, name: str = "Rig", bones: int = 5):
    """A chain of bones along +Z built through create_armature."""
    from marionette.bridge import action_write
    from marionette.core.rig.skeleton import Skeleton

    rest = np.broadcast_to(np.eye(4), (bones, 4, 4)).copy()
    # Bones along +Z: the rest rotation turns Blender's bone axis (+Y) onto +Z.
    rest[:, :3, :3] = [[1, 0, 0], [0, 0, -1], [0, 1, 0]]
    rest[:, 2, 3] = np.arange(bones) * 0.5
    skeleton = Skeleton.from_rest_matrices([f"b{i}" for i in range(bones)], [None] + list(range(bones - 1)), rest)
    return action_write.create_armature(skeleton, name), skeleton


def test_action_without_keys_is_refused(blender) -> None:
    from marionette.bridge import clip_read, compat

    obj, _ = _small_rig(blender)
    empty = blender.data.actions.new("Nothing")
    with pytest.raises(ClipError, match="action 'Nothing' has no keys on the bones of 'Rig'"):
        clip_read.clip_from_action(obj, empty)
    # A slot and a curve, but no key on it.
    hollow = blender.data.actions.new("Hollow")
    slot = compat.new_action_slot(hollow, obj)
    bag = compat.channelbag(hollow, slot, create=True)
    compat.new_fcurve(bag, 'pose.bones["b1"].location', 0, "b1")
    before = _counts(blender)
    for read in (clip_read.clip_from_action, clip_read.clip_from_evaluation):
        with pytest.raises(ClipError, match="action 'Hollow' has no keys"):
            read(obj, hollow)
    assert _counts(blender) == before


def _keys_of(action, obj) -> list[np.ndarray]:
    from marionette.bridge import compat

    out = []
    for fc in compat.action_fcurves(action, compat.action_slot_for(action, obj)):
        co = np.empty(2 * len(fc.keyframe_points), dtype=np.float32)
        fc.keyframe_points.foreach_get("co", co)
        out.append(co)
    return out


def _simple_clip(skeleton, frames: int = 12, seed: int = 3) -> Clip:
    rng = np.random.default_rng(seed)
    b = len(skeleton)
    axes = rng.normal(size=(frames, b, 3))
    angles = np.linspace(0.0, 1.2, frames)[:, None] * rng.uniform(0.5, 1.5, size=(1, b))
    rot = quat_from_axis_angle(axes, angles)
    tr = np.zeros((frames, b, 3))
    tr[:, 0] = rng.normal(size=(frames, 3)) * 0.1
    return Clip.from_frames(skeleton.names, rot, tr, fps=24.0, first_frame=1.0, name="simple")


def test_nan_keys_are_refused_naming_bone_and_frame(blender) -> None:
    from marionette.bridge import action_write, clip_read, compat

    obj, skeleton = _small_rig(blender)
    action = action_write.write_action(obj, _simple_clip(skeleton), "Broken")
    (fc,) = [
        c
        for c in compat.action_fcurves(action, action.slots[0])
        if c.data_path == 'pose.bones["b2"].rotation_quaternion' and c.array_index == 1
    ]
    fc.keyframe_points[5].co = (6.0, float("nan"))
    keys = _keys_of(action, obj)
    before = _counts(blender)
    frame = blender.context.scene.frame_current
    for read in (clip_read.clip_from_action, clip_read.clip_from_evaluation):
        with pytest.raises(
            ClipError, match=r"action 'Broken': bone 'b2' \(rotation_quaternion\[1\]\) has a non-finite key at frame 6"
        ):
            read(obj, action)
    assert _counts(blender) == before and blender.context.scene.frame_current == frame
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(keys, _keys_of(action, obj), strict=True))
    # A clip with NaN is refused by the writer too, before anything is created.
    bad = _simple_clip(skeleton)
    rot = bad.rotations.copy()
    rot[3, 1, 0] = np.nan
    with pytest.raises(ClipError, match="non-finite rotation key on bone 'b1' at frame 4"):
        action_write.write_action(obj, Clip(bad.names, bad.times, bad.fps, rot, bad.translations, name="simple"), "NaN clip")
    assert _counts(blender) == before


# --- reading ---------------------------------------------------------------------------------


def test_reading_changes_neither_action_nor_object(blender) -> None:
    from marionette.bridge import clip_read, compat, file_import

    loaded = file_import.load_file(shared_file("fbx/quaternius_male_casual.fbx"))
    obj = loaded.armatures[0]
    current, slot = compat.current_action(obj)
    other = [a for a in loaded.actions if a != current][0]
    scene = blender.context.scene
    scene.frame_set(7)
    pose = [tuple(pb.matrix_basis.col[3]) + tuple(pb.rotation_quaternion) for pb in obj.pose.bones]
    keys = _keys_of(other, obj)
    clip_read.clip_from_action(obj, other)
    clip_read.clip_from_evaluation(obj, other)
    assert compat.current_action(obj) == (current, slot)
    assert scene.frame_current == 7
    assert [tuple(pb.matrix_basis.col[3]) + tuple(pb.rotation_quaternion) for pb in obj.pose.bones] == pose
    assert all(np.array_equal(a, b) for a, b in zip(keys, _keys_of(other, obj), strict=True))
    assert obj.animation_data.use_nla is True


def test_a_constraint_switches_to_evaluation_and_is_honoured(blender) -> None:
    from marionette.bridge import clip_read, evaluated_pose, file_import, skeleton_read

    obj = file_import.load_file(shared_file("bvh/cmu/02_02_daz.bvh")).armatures[0]
    action = obj.animation_data.action
    c = obj.pose.bones["lForeArm"].constraints.new("LIMIT_ROTATION")
    c.use_limit_x = c.use_limit_y = c.use_limit_z = True  # locks the forearm at rest
    assert any("LIMIT_ROTATION" in r for r in clip_read.needs_evaluation(obj, action))
    frames = np.arange(1, 120, dtype=float)
    clip = clip_read.clip_from_action(obj, action, frames)
    skeleton = skeleton_read.skeleton_from_armature(obj)
    lengths = _lengths(obj, skeleton)
    ref = _points(evaluated_pose.evaluated_world_matrices(obj, frames, skeleton), lengths)
    height = _rig_height(obj, skeleton)
    assert np.abs(_points(_fk_world(skeleton, clip), lengths) - ref).max() <= TOL * height
    # The constraint matters: the keys alone put the hand elsewhere.
    c.mute = True
    keys_only = clip_read.clip_from_action(obj, action, frames)
    assert np.abs(_points(_fk_world(skeleton, keys_only), lengths) - ref).max() > 100 * TOL * height


def test_fcurve_evaluation_matches_blender(blender) -> None:
    """Constant, linear and Bezier keys (handles too long for their segment included), easing,
    linear extrapolation and a modifier, sampled off and on the keys and outside the range."""
    from marionette.bridge import fcurve_eval

    action = blender.data.actions.new("Curves")
    slot = action.slots.new(id_type="OBJECT", name="X")
    from marionette.bridge import compat

    bag = compat.channelbag(action, slot, create=True)
    rng = np.random.default_rng(5)
    curves = []
    kinds = ["BEZIER", "LINEAR", "CONSTANT", "MIXED", "LONG_HANDLES", "SINE", "EXTRAPOLATED", "MODIFIER", "SINGLE"]
    for i, kind in enumerate(kinds):
        fc = bag.fcurves.new("location", index=i % 3) if i < 3 else bag.fcurves.new(f'["p{i}"]', index=0)
        n = 1 if kind == "SINGLE" else 9
        xs = np.cumsum(rng.uniform(0.7, 4.0, size=n)) - 3.0
        for x in xs:
            fc.keyframe_points.insert(float(x), float(rng.normal()), options={"FAST"})
        fc.update()
        for j, kp in enumerate(fc.keyframe_points):
            kp.interpolation = {
                "MIXED": ("CONSTANT", "LINEAR", "BEZIER")[j % 3],
                "SINE": "SINE",
                "LONG_HANDLES": "BEZIER",
            }.get(kind, kind if kind in ("BEZIER", "LINEAR", "CONSTANT") else "BEZIER")
            if kind == "LONG_HANDLES":
                kp.handle_left_type = kp.handle_right_type = "FREE"
                kp.handle_left = (kp.co[0] - 5.0, kp.co[1] + 2.0)
                kp.handle_right = (kp.co[0] + 6.0, kp.co[1] - 1.5)
        if kind == "EXTRAPOLATED":
            fc.extrapolation = "LINEAR"
        if kind == "MODIFIER":
            fc.modifiers.new("NOISE")
        curves.append(fc)
    frames = np.linspace(-6.0, 45.0, 1021)
    mine = fcurve_eval.evaluate_fcurves(curves, frames)
    theirs = np.array([[fc.evaluate(float(f)) for f in frames] for fc in curves])
    assert np.abs(mine - theirs).max() < 1e-5
    # Sampled on some of one curve's keys (a result read back at a few of the frames keyed):
    # that curve is read off its keys, the others evaluated; all as Blender plays them.
    for fc in curves:
        on_keys = np.array([kp.co[0] for kp in fc.keyframe_points])[::2].astype(np.float64)
        mine = fcurve_eval.evaluate_fcurves(curves, on_keys)
        theirs = np.array([[c.evaluate(float(f)) for f in on_keys] for c in curves])
        assert np.abs(mine - theirs).max() < 1e-5


def test_every_rotation_mode_reads_and_writes(blender) -> None:
    """Bones in each Euler order, axis-angle and quaternion, with Bezier keys, read in bulk and
    written back in their own modes."""
    from marionette.bridge import action_write, clip_read, compat, evaluated_pose, skeleton_read

    modes = ["QUATERNION", "XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX", "AXIS_ANGLE", "QUATERNION"]
    obj, _ = _small_rig(blender, bones=len(modes))
    rng = np.random.default_rng(9)
    for pb, mode in zip(obj.pose.bones, modes, strict=True):
        pb.rotation_mode = mode
        for f in (1, 5, 9, 14):
            if mode == "QUATERNION":
                pb.rotation_quaternion = quat_normalize(rng.normal(size=4))
                pb.keyframe_insert("rotation_quaternion", frame=f)
            elif mode == "AXIS_ANGLE":
                pb.rotation_axis_angle = (rng.uniform(-3, 3), *rng.normal(size=3))
                pb.keyframe_insert("rotation_axis_angle", frame=f)
            else:
                pb.rotation_euler = rng.uniform(-2.5, 2.5, size=3)
                pb.keyframe_insert("rotation_euler", frame=f)
            pb.location = rng.normal(size=3) * 0.1
            pb.scale = rng.uniform(0.8, 1.2, size=3)
            pb.keyframe_insert("location", frame=f)
            pb.keyframe_insert("scale", frame=f)
    action = obj.animation_data.action
    skeleton = skeleton_read.skeleton_from_armature(obj)
    lengths = _lengths(obj, skeleton)
    height = _rig_height(obj, skeleton)
    frames = np.arange(1, 15, dtype=float)
    assert clip_read.needs_evaluation(obj, action) == []
    clip = clip_read.clip_from_action(obj, action)
    assert clip.frame_count == 14 and clip.scales is not None
    ref = _points(evaluated_pose.evaluated_world_matrices(obj, frames, skeleton), lengths)
    assert np.abs(_points(_fk_world(skeleton, clip), lengths) - ref).max() <= TOL * height

    copy = obj.copy()
    blender.context.scene.collection.objects.link(copy)
    written = action_write.write_action(copy, clip, "Modes", fps=clip.fps)
    got = _points(evaluated_pose.evaluated_world_matrices(copy, frames, skeleton), lengths)
    assert np.abs(got - ref).max() <= TOL * height
    props = {}
    for fc in compat.action_fcurves(written, written.slots[0]):
        props.setdefault(fc.group.name, set()).add(fc.data_path.rsplit(".", 1)[1])
    for pb, mode in zip(obj.pose.bones, modes, strict=True):
        want = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(mode, "rotation_euler")
        assert want in props[pb.name] and "scale" in props[pb.name]
        assert not ({"rotation_quaternion", "rotation_axis_angle", "rotation_euler"} - {want}) & props[pb.name]


# --- writing ---------------------------------------------------------------------------------


def test_written_action_layout(blender) -> None:
    from marionette.bridge import action_write, compat

    obj, skeleton = _small_rig(blender)
    base = _simple_clip(skeleton, frames=30)
    # Flip every other quaternion's sign: the same rotations, stored discontinuously.
    rot = base.rotations.copy()
    rot[1::2] *= -1.0
    coverage = np.array([1.0, 1.0, 0.0, 1.0, 1.0])
    clip = Clip(base.names, base.times, base.fps, rot, base.translations, coverage=coverage, name="x", first_frame=1.0)
    first = action_write.write_action(obj, clip, "Take")
    second = action_write.write_action(obj, clip, "Take")
    assert (first.name, second.name) == ("Take", "Take.001")
    # The object's previous action would have had no user left: it is kept with a fake user.
    assert first.use_fake_user and obj.animation_data.action == second
    assert obj.animation_data.action_slot == second.slots[0] and second.slots[0].identifier == "OB" + obj.name
    curves = compat.action_fcurves(second, second.slots[0])
    groups = {fc.group.name for fc in curves}
    assert groups == {"b0", "b1", "b3", "b4"}  # b2 has no coverage
    assert {fc.data_path for fc in curves if fc.data_path.endswith("location")} == {'pose.bones["b0"].location'}
    assert not any(fc.data_path.endswith("scale") for fc in curves)  # the clip has no scales
    assert all(fc.keyframe_points[0].interpolation == "LINEAR" and len(fc.keyframe_points) == 30 for fc in curves)
    assert second["marionette_fps"] == blender.context.scene.render.fps
    # Every curve (however it is made) has the settings of one made key by key, with no helper
    # curve left behind.
    scratch = blender.data.actions.new("scratch")
    bag = compat.channelbag(scratch, compat.new_action_slot(scratch, obj), create=True)
    ref = compat.new_fcurve(bag, 'pose.bones["b0"].location', 0, "b0")
    ref.keyframe_points.add(30)
    ref.keyframe_points.foreach_set("co", np.stack([np.arange(1.0, 31.0), np.zeros(30)], axis=-1).ravel())
    for kp in ref.keyframe_points:
        kp.interpolation = "LINEAR"
    curve_keys = ("extrapolation", "color_mode", "auto_smoothing", "mute", "hide", "lock", "select")
    key_keys = ("interpolation", "easing", "handle_left_type", "handle_right_type", "type", "select_control_point")
    want = [getattr(ref, k) for k in curve_keys], [[getattr(kp, k) for k in key_keys] for kp in ref.keyframe_points]
    for fc in curves:
        got = [getattr(fc, k) for k in curve_keys], [[getattr(kp, k) for k in key_keys] for kp in fc.keyframe_points]
        assert got == want, fc.data_path
        assert fc.group is not None and fc.data_path.startswith(f'pose.bones["{fc.group.name}"].')
    assert len(curves) == len({(fc.data_path, fc.array_index) for fc in curves})
    blender.data.actions.remove(scratch)
    # Quaternion keys were made continuous: consecutive keys in one hemisphere.
    for bone in ("b0", "b1", "b3", "b4"):
        q = np.stack(
            [
                np.array([kp.co[1] for kp in fc.keyframe_points])
                for fc in curves
                if fc.group.name == bone and "rotation_quaternion" in fc.data_path
            ],
            axis=-1,
        )
        assert np.all(np.sum(q[1:] * q[:-1], axis=-1) > 0.0)
    # replace=True takes the name and the users of the old action, which is removed.
    third = action_write.write_action(obj, clip, "Take.001", replace=True)
    assert third.name == "Take.001" and obj.animation_data.action == third
    assert (
        blender.data.actions.get("Take.001") == third
        and len([a for a in blender.data.actions if a.name.startswith("Take")]) == 2
    )


def test_writing_keeps_source_timing_on_the_scene_rate(blender) -> None:
    """A 120 fps clip written with the default rate lands on the 24 fps scene five keys per
    scene frame from frame 1 (frame 1 is time zero at any rate), and plays the same motion at
    the same times."""
    from marionette.bridge import action_write, clip_read, evaluated_pose, file_import, skeleton_read

    obj = file_import.load_file(shared_file("bvh/cmu/12_03_motionbuilder.bvh")).armatures[0]
    action = obj.animation_data.action
    clip = clip_read.clip_from_action(obj, action, np.arange(1, 121, dtype=float))
    skeleton = skeleton_read.skeleton_from_armature(obj)
    copy = obj.copy()
    blender.context.scene.collection.objects.link(copy)
    written = action_write.write_action(copy, clip, "At 24")
    assert written["marionette_fps"] == 24.0
    assert tuple(written.frame_range) == pytest.approx((1.0, 1.0 + 119 / 5), abs=1e-5)
    ref = evaluated_pose.evaluated_world_positions(obj, clip.frame_numbers(), skeleton)
    got = evaluated_pose.evaluated_world_positions(copy, clip.frame_numbers(24.0), skeleton)
    assert np.abs(got - ref).max() <= TOL * _rig_height(obj, skeleton)


def test_bones_that_do_not_fully_inherit(blender) -> None:
    """Inherit Rotation off, Inherit Scale none, Local Location off: the writer converts the
    clip's (fully inheriting) locals so Blender places the bones where core FK does, and the
    reader goes through evaluation for such rigs."""
    from marionette.bridge import action_write, clip_read, evaluated_pose

    obj, skeleton = _small_rig(blender, bones=6)
    clip = _simple_clip(skeleton, frames=10)
    scales = np.ones((10, 6, 3))
    scales[:, 1] = np.linspace(1.0, 1.5, 10)[:, None]
    clip = Clip(
        clip.names, clip.times, clip.fps, clip.rotations, clip.translations + 0.05, scales=scales, name="inherit"
    )
    bones = obj.data.bones
    bones["b2"].use_inherit_rotation = False
    bones["b3"].inherit_scale = "NONE"
    bones["b4"].use_local_location = False
    assert len(clip_read.needs_evaluation(obj)) == 3
    action_write.write_action(obj, clip, "Inherit", fps=24.0)
    frames = clip.frame_numbers()
    lengths = _lengths(obj, skeleton)
    height = _rig_height(obj, skeleton)
    ref = _points(evaluated_pose.evaluated_world_matrices(obj, frames, skeleton), lengths)
    assert np.abs(_points(_fk_world(skeleton, clip), lengths) - ref).max() <= TOL * height
    back = clip_read.clip_from_action(obj, obj.animation_data.action)
    assert np.abs(_points(_fk_world(skeleton, back), lengths) - ref).max() <= TOL * height


def test_scaled_and_rotated_parent_is_honoured(blender) -> None:
    from marionette.bridge import clip_read, evaluated_pose, file_import, skeleton_read

    obj = file_import.load_file(shared_file("bvh/cmu/02_02_daz.bvh")).armatures[0]
    parent = blender.data.objects.new("Scaler", None)
    blender.context.scene.collection.objects.link(parent)
    parent.scale = (100.0, 100.0, 100.0)
    parent.rotation_euler = (-math.pi / 2, 0.0, 0.0)
    obj.parent = parent
    skeleton = skeleton_read.skeleton_from_armature(obj)
    assert np.allclose(skeleton.placement[:3, :3], 100.0 * np.array([[1, 0, 0], [0, 0, 1], [0, -1, 0]]), atol=1e-3)
    frames = np.arange(1, 100, dtype=float)
    clip = clip_read.clip_from_action(obj, obj.animation_data.action, frames)
    lengths = _lengths(obj, skeleton)  # the world Y axis already carries the parent's scale
    height = _rig_height(obj, skeleton)
    assert height > 10_000.0  # the parent's x100 counts
    ref = _points(evaluated_pose.evaluated_world_matrices(obj, frames, skeleton), lengths)
    assert np.abs(_points(_fk_world(skeleton, clip), lengths) - ref).max() <= TOL * height


def test_world_to_local_to_world_on_a_real_rig(blender) -> None:
    from marionette.bridge import file_import, skeleton_read

    obj = file_import.load_file(shared_file("fbx/quaternius_male_casual.fbx")).armatures[0]
    skeleton = skeleton_read.skeleton_from_armature(obj)
    rng = np.random.default_rng(1)
    t, b = 50, len(skeleton)
    rot = quat_normalize(rng.normal(size=(t, b, 4)))
    tr = rng.normal(size=(t, b, 3))
    local = skeleton.local_transforms(rot, tr)
    world = skeleton.forward_kinematics_from_locals(local)
    back = skeleton.local_from_world(world)
    assert np.abs(back - local).max() <= 1e-9
    assert np.abs(skeleton.forward_kinematics_from_locals(back) - world).max() <= 1e-9


def test_create_armature_reproduces_a_skeleton(blender) -> None:
    from marionette.bridge import action_write, evaluated_pose, skeleton_read

    bvh = read_bvh(shared_file("bvh/cmu/02_02_daz.bvh"))
    skeleton = bvh.skeleton()
    obj = action_write.create_armature(skeleton, "FromCore")
    back = skeleton_read.skeleton_from_armature(obj)
    order = [back.index(n) for n in skeleton.names]
    assert sorted(back.names) == sorted(skeleton.names)
    assert [back.names[p] if p >= 0 else None for p in back.parents[order]] == [
        skeleton.names[p] if p >= 0 else None for p in skeleton.parents
    ]
    size = float(np.ptp(bvh.rest_positions(), axis=0).max())
    assert np.abs(back.rest_placements()[order] - skeleton.rest_placements()).max() <= 1e-5 * size
    assert all(b.length > 0.0 for b in obj.data.bones)
    # The core clip of the file, written onto the new armature, moves it as core FK says.
    clip = bvh.clip()
    action_write.write_action(obj, clip, "daz", fps=clip.fps)
    frames = clip.frame_numbers()[:60]
    got = evaluated_pose.evaluated_world_positions(obj, frames, back)[:, order]
    want = skeleton.forward_kinematics(clip.rotations[:60], clip.translations[:60])[..., :3, 3]
    assert np.abs(got - want).max() <= TOL * size


def test_euler_keys_stay_continuous_through_full_turns(blender) -> None:
    from marionette.bridge import action_write, clip_read, compat

    obj, skeleton = _small_rig(blender, bones=3)
    obj.pose.bones["b1"].rotation_mode = "XYZ"
    frames = 41
    angle = np.linspace(0.0, 4.0 * np.pi, frames)  # two full turns about the bone's Y axis
    rot = np.zeros((frames, 3, 4))
    rot[..., 0] = 1.0
    rot[:, 1] = quat_from_axis_angle(np.array([0.2, 1.0, 0.1]), angle)
    clip = Clip.from_frames(skeleton.names, rot, np.zeros((frames, 3, 3)), fps=24.0)
    action = action_write.write_action(obj, clip, "Turns", fps=24.0)
    euler = np.stack(
        [
            np.array([kp.co[1] for kp in fc.keyframe_points])
            for fc in compat.action_fcurves(action, action.slots[0])
            if fc.data_path == 'pose.bones["b1"].rotation_euler'
        ],
        axis=-1,
    )
    assert euler.shape == (frames, 3)
    # Near gimbal lock a component may move fast, but never by the 2-pi of a wrap.
    assert np.abs(np.diff(euler, axis=0)).max() < 2.0
    assert np.ptp(euler, axis=0).max() > 3.0 * np.pi  # the turns accumulate instead of wrapping
    back = clip_read.clip_from_action(obj, action)
    assert np.degrees(quat_angle_between(back.rotations, clip.rotations).max()) < 1e-3


def test_evaluating_an_object_as_it_stands_includes_nla(blender) -> None:
    from marionette.bridge import action_write, clip_read, evaluated_pose

    obj, skeleton = _small_rig(blender)
    clip = _simple_clip(skeleton, frames=20)
    action = action_write.write_action(obj, clip, "Stashed", fps=24.0)
    track = obj.animation_data.nla_tracks.new()
    track.strips.new("Stashed", 11, action)  # plays the action ten frames later
    obj.animation_data.action = None
    frames = np.arange(11, 31, dtype=float)
    as_is = clip_read.clip_from_evaluation(obj, None, frames)
    lengths = _lengths(obj, skeleton)
    ref = _points(evaluated_pose.evaluated_world_matrices(obj, frames, skeleton), lengths)
    assert np.abs(_points(_fk_world(skeleton, as_is), lengths) - ref).max() <= TOL * _rig_height(obj, skeleton)
    # The NLA strip shifts time: frame 11 of the scene is the clip's first frame.
    want = _points(_fk_world(skeleton, clip), lengths)
    assert np.abs(ref - want).max() <= TOL * _rig_height(obj, skeleton)
    assert obj.animation_data.action is None and len(obj.animation_data.nla_tracks) == 1


def test_create_armature_takes_bone_lengths_from_tails(blender) -> None:
    from marionette.bridge import action_write, skeleton_read

    _, skeleton = _small_rig(blender, "First", bones=4)
    heads = skeleton.rest_placements()[:, :3, 3]
    tails = heads + np.array([0.3, 0.0, 0.4])  # only the distance (0.5) counts
    obj = action_write.create_armature(skeleton, "WithTails", tails=tails)
    assert [round(b.length, 5) for b in obj.data.bones] == [0.5] * 4
    back = skeleton_read.skeleton_from_armature(obj)
    assert np.abs(back.rest_placements() - skeleton.rest_placements()).max() < 1e-6
