"""Baking controls in Blender: undo restores after a bake, a bad chain is shown and its bake refused
with nothing changed, the command line bakes controls, panels draw every kind, and unregister
leaves nothing behind."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers.controls_scenes import _world_heads

pytestmark = pytest.mark.bpy


# --- bake, undo, validation, command line ----------------------------------------------------


def test_undo_restores_after_bake(sample):
    bpy, arm = sample
    assert bpy.ops.marionette.control_add(kind="TWO_BONE_IK", create_target=True) == {"FINISHED"}
    arm.marionette_controls.live_preview = True
    bpy.context.scene.frame_set(5)
    n_actions = len(bpy.data.actions)
    bpy.ops.ed.undo_push(message="before bake")
    assert bpy.ops.marionette.bake_controls() == {"FINISHED"}
    bpy.ops.ed.undo_push(message="Bake Controls")
    assert len(bpy.data.actions) == n_actions + 1
    assert bpy.data.objects["Sample"].animation_data.action.name == "Walk_controls"
    assert bpy.ops.ed.undo() == {"FINISHED"}
    restored = bpy.data.objects["Sample"]
    assert restored.animation_data.action.name == "Walk"
    assert "Walk_controls" not in bpy.data.actions
    assert restored.marionette_controls.live_preview
    assert len(restored.marionette_controls.controls) == 1


def test_bad_chain_is_shown_and_bake_refused_with_nothing_changed(sample):
    bpy, arm = sample
    from marionette.viewport import live_preview

    assert bpy.ops.marionette.control_add(kind="TWO_BONE_IK", create_target=True) == {"FINISHED"}
    row = arm.marionette_controls.controls[0]
    row.bone_end = "Forearm.R"  # not below UpperArm.L
    errors = live_preview.validation(arm)
    assert "parents" in errors[0]
    n_actions = len(bpy.data.actions)
    with pytest.raises(RuntimeError, match="Arm IK.L.*parents"):
        bpy.ops.marionette.bake_controls()
    assert len(bpy.data.actions) == n_actions and arm.animation_data.action.name == "Walk"
    # A closure whose branches share a driver bone is refused when it is built.
    row.bone_end = "Forearm.L"
    assert bpy.ops.marionette.control_add(kind="CLOSURE", create_target=False) == {"FINISHED"}
    loop = arm.marionette_controls.controls[1]
    loop.bone_start, loop.bone_end = "UpperArm.L", "Forearm.L"
    loop.second_start, loop.second_end = "Forearm.L", "Hand.L"
    loop.target_object = loop.second_object = row.target_object
    errors = live_preview.validation(arm)
    assert 0 not in errors and "share" in errors[1] and "Forearm.L" in errors[1]


@pytest.mark.slow
def test_bake_controls_command_line(sample, tmp_path):
    bpy, arm = sample
    assert bpy.ops.marionette.control_add(kind="TWO_BONE_IK", create_target=True) == {"FINISHED"}
    target = arm.marionette_controls.controls[0].target_object
    target.location = (0.45, -0.35, 1.25)
    target_name = target.name
    src = tmp_path / "scene.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(src), copy=True)
    out = tmp_path / "out.blend"
    run = subprocess.run(
        [sys.executable, "-m", "marionette", "bake-controls", str(src), "--object", "Sample", "-o", str(out), "--frames", "3", "12"],
        capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout)
    assert report["action"] == "Walk_controls" and report["frames"] == [3.0, 12.0]
    assert report["controls"]["Arm IK.L"]["max_residual"] < 1e-6
    bpy.ops.wm.open_mainfile(filepath=str(out))
    baked = bpy.data.objects["Sample"]
    assert baked.animation_data.action.name == "Walk_controls"
    bpy.context.scene.frame_set(7)
    assert np.linalg.norm(_world_heads(baked, ["Hand.L"])[0] - np.array(bpy.data.objects[target_name].location)) < 1e-5
    missing = subprocess.run(
        [sys.executable, "-m", "marionette", "bake-controls", str(src), "--object", "Nobody", "-o", str(tmp_path / "no.blend")],
        capture_output=True, text=True, timeout=300,
    )
    assert missing.returncode == 1 and "Nobody" in missing.stderr
    assert not (tmp_path / "no.blend").exists()


class _Layout:
    """Stands in for a UILayout: every call returns another one; ``prop`` and ``prop_search``
    check that the property (and the searched collection) exist."""

    def __init__(self):
        self.labels = []

    def __getattr__(self, name):
        def call(*args, **kwargs):
            if name == "label":
                self.labels.append(kwargs.get("text", ""))
            if name in ("prop", "prop_search"):
                data, prop = args[0], args[1]
                assert prop in data.bl_rna.properties, f"{type(data).__name__} has no property {prop!r}"
                if name == "prop_search":
                    assert args[3] in args[2].bl_rna.properties
            return self

        return call

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)


def test_panels_draw_every_kind(sample):
    bpy, arm = sample
    from marionette.panels import controls_panel as cp
    from marionette.properties.control_settings import KIND_ITEMS

    context = bpy.context
    for kind, *_ in KIND_ITEMS:
        assert bpy.ops.marionette.control_add(kind=kind, create_target=False) == {"FINISHED"}
    arm.marionette_controls.live_preview = True
    context.scene.frame_set(3)
    settings = arm.marionette_controls
    for row in settings.controls:
        # The optional settings drawn too.
        row.use_cone_limit = row.use_hinge_limit = True
    for i in range(len(settings.controls)):
        settings.active_index = i
        for panel in (cp.VIEW3D_PT_marionette_controls, cp.VIEW3D_PT_marionette_control_settings, cp.VIEW3D_PT_marionette_control_status, cp.VIEW3D_PT_marionette_control_bake):
            assert panel.poll(context)
            fake = type("P", (), {"layout": _Layout()})()
            panel.draw(fake, context)
        layout = _Layout()
        cp.MARIONETTE_UL_controls.draw_item(None, context, layout, settings, settings.controls[i], 0, settings, "active_index", i)


# --- registration ----------------------------------------------------------------------------


def test_unregister_leaves_nothing_behind(blender):
    bpy = blender
    from marionette.operators import controls_register
    from marionette.panels import controls_panel
    from marionette.viewport import live_preview

    def ours():
        found = []
        for name in dir(bpy.app.handlers):
            handlers = getattr(bpy.app.handlers, name)
            if isinstance(handlers, list):
                found += [f"{name}:{h.__name__}" for h in handlers if getattr(h, "__module__", "") == live_preview.__name__]
        found += [n for n in ("MARIONETTE_OT_bake_controls", "MARIONETTE_OT_control_add", "MARIONETTE_UL_controls", "VIEW3D_PT_marionette_controls", "MarionetteControl") if hasattr(bpy.types, n)]
        if hasattr(bpy.types.Object, "marionette_controls"):
            found.append("Object.marionette_controls")
        return found

    assert ours() == []
    for _ in range(2):
        controls_register.register()
        try:
            controls_panel.register()
            try:
                assert len(ours()) >= 9
            finally:
                controls_panel.unregister()
        finally:
            controls_register.unregister()
        assert ours() == []
