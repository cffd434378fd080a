"""Retarget Clip from the sidebar onto Rigify's generated human rig, as a user drives it: the
Control Rig choice (FK, Off) decides what is keyed, and the Retarget panel's preview says which
controls will be, before the click, without evaluating the rig."""

from __future__ import annotations

import json

import pytest

from tests.helpers.data import shared_file
from tests.helpers.rigify_rig import rigify_rig_blend

pytestmark = pytest.mark.bpy

NOT_CONTROLS = ("DEF-", "ORG-", "MCH-")


@pytest.fixture
def rigify_scene(addon):
    """Rigify's ``metarig`` and generated ``rig`` with a CMU walk imported as the source, the pair
    picked in the sidebar."""
    bpy = addon
    bpy.ops.wm.open_mainfile(filepath=str(rigify_rig_blend()), load_ui=False)
    bpy.context.scene.render.fps = 24
    bpy.ops.import_anim.bvh(filepath=str(shared_file("bvh/cmu/12_03_motionbuilder.bvh")), use_fps_scale=False)
    source = bpy.context.active_object
    assert source is not None and source.type == "ARMATURE" and source.animation_data.action is not None
    rig = bpy.data.objects["rig"]
    s = bpy.context.scene.marionette
    s.source, s.target = source, rig
    return bpy, source, rig


def _keyed_bones(rig):
    from marionette.bridge import compat

    ad = rig.animation_data
    return {fc.data_path.split('"')[1] for fc in compat.action_fcurves(ad.action, ad.action_slot)}


def _moved_bones(rig):
    """The bones keyed on more than a setting (a mechanism bone's IK Stretch is a setting)."""
    from marionette.bridge import compat

    ad = rig.animation_data
    paths = [fc.data_path for fc in compat.action_fcurves(ad.action, ad.action_slot)]
    return {p.split('"')[1] for p in paths if not p.endswith(".ik_stretch")}


def test_retarget_clip_keys_only_the_controls_the_panel_named(rigify_scene):
    bpy, _, rig = rigify_scene
    from marionette.bridge.control_preview import control_rig_preview

    s = bpy.context.scene.marionette
    assert s.control_rig == "FK"
    preview = control_rig_preview(rig, s.control_rig, s.root_motion)
    assert preview is not None and preview["kind"] == "rigify" and preview["plan"] == "Rigify, FK controls"
    assert "torso" in preview["controls"] and not [c for c in preview["controls"] if c.startswith(NOT_CONTROLS)]

    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    keyed = _keyed_bones(rig)
    assert keyed and not [b for b in keyed if b.startswith(NOT_CONTROLS)], sorted(keyed)
    # What the panel said before the click is what was keyed (plus the IK/FK switches' bones).
    switch_bones = {sw["bone"] for sw in preview["switches"]}
    assert keyed == set(preview["controls"]) | switch_bones
    from marionette.panels.retarget_panel import control_rig_lines

    lines = control_rig_lines(preview)
    assert lines[0] == "Control rig: Rigify, FK controls"
    assert lines[1].startswith(f"Keys {len(keyed - switch_bones)} controls: torso, ")
    assert lines[2].startswith("Sets IK_FK = 1 on ")
    report = json.loads(s.last_report)
    assert report["mean_direction_error"] < 5.0
    assert not [w for w in report.get("warnings", []) if "override" in w]


def test_ik_keys_the_ik_controls_the_panel_named(rigify_scene):
    bpy, _, rig = rigify_scene
    from marionette.bridge.control_preview import control_rig_preview

    s = bpy.context.scene.marionette
    s.control_rig = "IK"
    preview = control_rig_preview(rig, s.control_rig, s.root_motion)
    assert preview is not None and preview["plan"] == "Rigify, IK controls"
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    keyed, moved = _keyed_bones(rig), _moved_bones(rig)
    limb_fk = {f"{part}_fk{side}" for part in ("upper_arm", "forearm", "hand", "thigh", "shin", "foot") for side in (".L", ".R")}
    assert {"hand_ik.L", "foot_ik.R"} <= moved and not [b for b in moved if b.startswith(NOT_CONTROLS) or b in limb_fk], sorted(moved)
    assert keyed == set(preview["controls"]) | {sw["bone"] for sw in preview["switches"]}


def test_control_rig_off_keys_the_mapped_bones(rigify_scene):
    bpy, _, rig = rigify_scene
    from marionette.bridge.control_preview import OFF_PLAN, control_rig_preview

    s = bpy.context.scene.marionette
    s.control_rig = "OFF"
    preview = control_rig_preview(rig, s.control_rig)
    assert preview is not None and preview["plan"] == OFF_PLAN and preview["controls"] == []
    from marionette.panels.retarget_panel import control_rig_lines

    assert control_rig_lines(preview) == ["Control rig: off (keys the mapped bones)"]
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    keyed = _keyed_bones(rig)
    assert any(b.startswith("DEF-") for b in keyed)
    assert all(b.startswith(("DEF-", "ORG-")) for b in keyed), sorted(keyed)
    report = json.loads(s.last_report)
    assert any("constraints override" in w for w in report.get("warnings", [])), report.get("warnings")


def test_preview_tells_a_plain_skeleton_from_a_constrained_one(rigify_scene):
    bpy, _, rig = rigify_scene
    from marionette.bridge.control_preview import FOUND_PLAN, control_rig_preview, forget_previews

    metarig = bpy.data.objects["metarig"]
    assert control_rig_preview(metarig, "FK") is None  # a bare skeleton plays its own keys
    ik = control_rig_preview(rig, "IK")
    assert ik is not None and ik["plan"] == "Rigify, IK controls"
    assert {"hand_ik.L", "foot_ik.R", "torso"} <= set(ik["controls"]) and "upper_arm_fk.L" not in ik["controls"]
    assert {sw["value"] for sw in ik["switches"] if sw["property"] == "IK_FK"} == {0.0}

    c = metarig.pose.bones["forearm.L"].constraints.new("COPY_ROTATION")
    c.target, c.subtarget = metarig, "hand.L"
    c.mute = True
    forget_previews()
    assert control_rig_preview(metarig, "FK") is None  # a muted constraint overrides nothing
    c.mute = False
    forget_previews()
    found = control_rig_preview(metarig, "FK")
    assert found is not None and found["kind"] == "found" and found["plan"] == FOUND_PLAN
