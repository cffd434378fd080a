"""A rest that is a pose is named, not passed over: an FBX written without its skinned mesh holds
no bind pose, so Blender's importer reads the armature's pose at export (mid-walk here) as its
rest, and every figure of the summary still reads well while the result is off by that pose. The
report measures how far each rest is from a left-right symmetric standing rest and warns; the
same character written with its mesh (its bind pose the rest) reads under 2 degrees."""

from __future__ import annotations

import pytest

from tests.helpers.data import shared_file

pytestmark = [pytest.mark.bpy, pytest.mark.data]


def _written(bpy, path: str, with_mesh: bool) -> None:
    """Quaternius' man playing Man_Walk written to ``path`` by Blender's FBX exporter, at frame 9
    of the walk (a stride), with or without its skinned mesh."""
    from marionette.bridge.file_import import load_file
    from marionette.bridge.session import fresh_session

    fresh_session()
    loaded = load_file(str(shared_file("fbx/quaternius_male_casual.fbx")))
    arm = loaded.armatures[0]
    arm.animation_data.action = next(a for a in bpy.data.actions if a.name.endswith("Man_Walk"))
    for obj in bpy.context.view_layer.objects:
        obj.select_set(obj == arm or (with_mesh and obj.type == "MESH"))
    bpy.context.view_layer.objects.active = arm
    first, last = (int(f) for f in arm.animation_data.action.frame_range)
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = first, last
    bpy.context.scene.frame_set(first + 8)
    types = {"ARMATURE", "MESH"} if with_mesh else {"ARMATURE"}
    assert bpy.ops.export_scene.fbx(filepath=path, use_selection=True, object_types=types, add_leaf_bones=False, bake_anim=True) == {"FINISHED"}


@pytest.mark.parametrize("with_mesh", [True, False])
def test_a_rest_that_is_a_pose_is_warned_about(blender, tmp_path, with_mesh):
    from marionette.core.retarget.geometric import RetargetOptions
    from marionette.usecases.retarget import retarget_files

    source = str(tmp_path / "walk.fbx")
    _written(blender, source, with_mesh)
    outcome = retarget_files(
        source, str(shared_file("gltf/male_base_mesh_apose.glb")), str(tmp_path / "out.blend"), options=RetargetOptions(plant_feet=False)
    )
    asymmetry = outcome.report["rest_asymmetry"]
    warned = [w for w in outcome.report.get("warnings", []) if "not a standing rest" in w]
    assert asymmetry["target"] < 2.0
    if with_mesh:
        assert asymmetry["source"] < 2.0 and warned == []
    else:
        assert asymmetry["source"] > 15.0 and len(warned) == 1 and warned[0].startswith("the source's rest")
