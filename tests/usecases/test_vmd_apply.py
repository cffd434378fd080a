"""A VMD motion applied to a PMX rig imported in Blender: the keys land where MMD puts them, the
leg IK bones drive the legs through the Controls stack the importer made (Bake Controls, then the
pose Blender evaluates, ``pose_bone.matrix``), an IK switched off by the motion plays its keyed
FK, and a 24 fps scene plays the 30 fps motion at its own speed. The result is compared with the
same motion played in core (:func:`core.formats.vmd_pose.play`) and with points worked out by hand."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers.pmx_files import humanoid_bones, write_pmx
from tests.helpers.vmd_files import Key, Motion, vmd_bytes

pytestmark = pytest.mark.bpy


def _blender(p):
    x, y, z = p
    return 0.08 * np.array([x, z, y])


def _motion() -> Motion:
    half = (0.0, 0.0, math.sin(math.radians(45)), math.cos(math.radians(45)))
    keys = [
        Key("左足ＩＫ", 0, (0.0, 3.0, -1.0)),
        Key("左足ＩＫ", 30, (0.0, 3.0, -1.0)),
        Key("左腕", 0),
        Key("左腕", 30, rotation=half),
    ]
    return Motion(keys=keys, properties=[(0, True, {"左足ＩＫ": True}), (15, True, {"左足ＩＫ": False})])


@pytest.fixture
def files(tmp_path):
    pmx, vmd = tmp_path / "humanoid.pmx", tmp_path / "motion.vmd"
    pmx.write_bytes(write_pmx(humanoid_bones())[0])
    vmd.write_bytes(vmd_bytes(_motion()))
    return pmx, vmd


def _played(bpy, obj, frames):
    names = [b.name for b in obj.pose.bones]
    out = []
    for f in frames:
        bpy.context.scene.frame_set(int(f), subframe=float(f) - int(f))
        out.append({n: np.array(obj.matrix_world) @ np.array(obj.pose.bones[n].matrix) for n in names})
    return out


@pytest.mark.parametrize("fps", [30, 24])
def test_the_motion_keys_the_rig_and_its_ik_switch_drives_the_controls(addon, files, fps):
    bpy = addon
    pmx, vmd = files
    bpy.context.scene.render.fps = fps
    from marionette.core.formats.pmx import read_pmx
    from marionette.core.formats.pmx_rig import build_rig
    from marionette.core.formats.vmd import read_vmd
    from marionette.core.formats.vmd_pose import play
    from marionette.usecases.bake_controls import bake_controls
    from marionette.usecases.import_pmx import import_pmx_rig
    from marionette.usecases.vmd_apply import apply_vmd

    obj = import_pmx_rig(pmx).obj
    done = apply_vmd(obj, vmd)
    assert done["switched_ik"] == ["IK 左足ＩＫ"] and done["unmatched"] == []
    assert done["fps"] == fps and done["frames"] == [1.0, pytest.approx(1 + 30 * fps / 30)]
    # VMD frames 0..30 at 30 fps: on the scene's frames, with their timing kept.
    vmd_frames = np.array([0, 5, 10, 15, 20, 30])  # whole frames at 24 fps too (the bake keys whole frames)
    frames = 1.0 + vmd_frames * fps / 30.0
    bake_controls(obj, np.arange(1, round(frames[-1]) + 1, dtype=float))
    posed = _played(bpy, obj, frames)
    rig = build_rig(read_pmx(pmx))
    core = play(rig, read_vmd(vmd), frames=vmd_frames)
    world = rig.skeleton.forward_kinematics(core.clip.rotations, core.clip.translations)
    rest = rig.skeleton.rest_placements()[:, :3, 3]
    target = _blender((1.0, 4.0, -0.7))
    for k, f in enumerate(vmd_frames):
        ankle = posed[k]["左足首"][:3, 3]
        if f < 15:  # IK on: the foot on its IK bone, the knee forward
            assert np.abs(ankle - target).max() < 3e-3, f
            assert posed[k]["左ひざ"][1, 3] < rest[rig.skeleton.index("左ひざ"), 1] - 0.05
        else:  # off: the keyed FK (the leg at rest)
            assert np.abs(ankle - rest[rig.skeleton.index("左足首")]).max() < 1e-5, f
        # Blender plays what core plays, bone for bone.
        for j, name in enumerate(rig.skeleton.names):
            assert np.abs(posed[k][name][:3, 3] - world[k, j, :3, 3]).max() < 2e-3, (f, name)
    # The arm's key at VMD frame 30: 90 degrees about MMD's +Z turns the elbow about the arm's head.
    off = (3.3 * math.cos(math.radians(35)), -3.3 * math.sin(math.radians(35)))
    assert np.abs(posed[-1]["左ひじ"][:3, 3] - _blender((1.6 - off[1], 15.0 + off[0], 0.3))).max() < 1e-5


def test_a_motion_on_an_armature_that_is_not_a_pmx_rig_is_refused(addon, files):
    bpy = addon
    from marionette.core.errors import RigError
    from marionette.usecases.vmd_apply import apply_vmd

    arm = bpy.data.objects.new("plain", bpy.data.armatures.new("plain"))
    bpy.context.scene.collection.objects.link(arm)
    before = len(bpy.data.actions)
    with pytest.raises(RigError, match="not a PMX rig"):
        apply_vmd(arm, files[1])
    assert len(bpy.data.actions) == before


@pytest.mark.slow
def test_import_pmx_with_a_motion_on_the_command_line(files, tmp_path):
    pmx, vmd = files
    out, report = tmp_path / "rig.blend", tmp_path / "r.json"
    done = subprocess.run(
        [sys.executable, "-m", "marionette", "import-pmx", str(pmx), "--vmd", str(vmd), "-o", str(out), "--report", str(report)],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr
    r = json.loads(report.read_text())
    assert r["motion"]["switched_ik"] == ["IK 左足ＩＫ"] and r["motion"]["frames"] == [1.0, 31.0] and r["motion"]["fps"] == 30.0
    assert out.is_file()


def test_the_live_preview_follows_the_keyed_switch(addon, files):
    """Frame by frame in the viewport (no bake): the foot on its IK bone while the switch is on,
    the keyed FK once it is off, and on again when the timeline goes back."""
    bpy = addon
    pmx, vmd = files
    bpy.context.scene.render.fps = 30
    from marionette.usecases.import_pmx import import_pmx_rig
    from marionette.usecases.vmd_apply import apply_vmd

    obj = import_pmx_rig(pmx).obj
    apply_vmd(obj, vmd)
    # Starting on a frame where the switch is off: the row is built while its Enabled reads off.
    bpy.context.scene.frame_set(21)
    assert not obj.marionette_controls.controls["IK 左足ＩＫ"].enabled
    obj.marionette_controls.live_preview = True
    rest = np.array(obj.data.bones["左足首"].head_local)
    target = _blender((1.0, 4.0, -0.7))
    for frame, on in ((21, False), (6, True), (31, False), (11, True), (1, True)):
        (posed,) = _played(bpy, obj, [frame])
        ankle = posed["左足首"][:3, 3]
        want = target if on else rest
        assert np.abs(ankle - want).max() < 3e-3, (frame, on, ankle)
