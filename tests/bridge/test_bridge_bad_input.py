"""The bridge refusing bad input on real Blender: broken files, an armature without bones, an
Action without keys and NaN keys are refused with one clear line, and nothing is changed."""

from __future__ import annotations

import os

import numpy as np
import pytest

from marionette.core.errors import ClipError, FileFormatError, RigError
from marionette.core.rig.clip import Clip
from tests.helpers.bridge_rigs import _keys_of, _simple_clip, _small_rig
from tests.helpers.data import shared_file

pytestmark = pytest.mark.bpy


# --- helpers ---------------------------------------------------------------------------------


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


@pytest.mark.slow
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
