"""The sidebar's MMD panel and its operators on real Blender: import a PMX rig with physics, key a
VMD onto it, switch its physics off and on, bake it; the panel draws what the rig offers."""

from __future__ import annotations

import pytest

from tests.helpers.pmx_files import HAIR, hair_model, write_pmx
from tests.helpers.vmd_files import Key, Motion, vmd_bytes

pytestmark = pytest.mark.bpy


class _Layout:
    """Stands in for a UILayout: records labels and the operators drawn."""

    def __init__(self):
        object.__setattr__(self, "labels", [])
        object.__setattr__(self, "operators", [])

    def __getattr__(self, name):
        def call(*args, **kwargs):
            if name == "label":
                self.labels.append(kwargs.get("text", ""))
            if name == "operator":
                self.operators.append(args[0])
            return self

        return call

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)


def _draw(bpy):
    from marionette.panels.mmd_panel import VIEW3D_PT_marionette_mmd

    layout = _Layout()
    VIEW3D_PT_marionette_mmd.draw(type("P", (), {"layout": layout})(), bpy.context)
    return layout


def test_mmd_panel_imports_keys_switches_and_bakes(addon, tmp_path):
    bpy = addon
    bones, bodies, joints = hair_model()
    pmx, vmd = tmp_path / "hair.pmx", tmp_path / "m.vmd"
    pmx.write_bytes(write_pmx(bones, bodies=bodies, joints=joints)[0])
    vmd.write_bytes(vmd_bytes(Motion(keys=[Key("センター", 0, (0.0, 1.0, 0.0)), Key("センター", 20, (0.0, 1.0, 0.0))])))
    assert _draw(bpy).operators == ["marionette.import_pmx_rig"]
    assert bpy.ops.marionette.apply_vmd.poll() is False
    assert bpy.ops.marionette.import_pmx_rig(filepath=str(pmx), physics=True) == {"FINISHED"}
    rig = bpy.context.view_layer.objects.active
    assert _draw(bpy).operators == ["marionette.import_pmx_rig", "marionette.apply_vmd", "marionette.mmd_physics", "marionette.bake_physics"]
    assert bpy.ops.marionette.apply_vmd(filepath=str(vmd)) == {"FINISHED"}
    user = rig.animation_data.action
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 21
    assert bpy.ops.marionette.mmd_physics(enable=False) == {"FINISHED"}
    assert not scene.rigidbody_world.enabled and all(rig.pose.bones[n].constraints["Rigid body track"].mute for n in HAIR)
    assert bpy.ops.marionette.mmd_physics(enable=True) == {"FINISHED"}
    assert scene.rigidbody_world.enabled and not any(rig.pose.bones[n].constraints["Rigid body track"].mute for n in HAIR)
    assert bpy.ops.marionette.bake_physics() == {"FINISHED"}
    baked = rig.animation_data.action
    assert baked != user and baked.name.endswith("_physics") and not scene.rigidbody_world.enabled
    # The hair bones are keyed by the bake: on frame 21 the tip hangs below the root.
    scene.frame_set(21)
    assert rig.pose.bones["髪3"].tail.z < rig.pose.bones["髪1"].head.z - 0.05
