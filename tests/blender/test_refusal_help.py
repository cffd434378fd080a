"""A refusal that helps: a target whose left foot the mapper cannot recognise (hung from the hips,
its head a fifth of the way down the shin) is refused naming the slot, the nearest bones with
why they were passed over and how to fix it; the sidebar shows the same row in red, and picking
the bone there retargets. The command line says the same and takes the fix as ``--mapping``."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.bpy


def _broken_target(bpy):
    from marionette.bridge.action_write import create_armature
    from marionette.core.rig.samples import sample_humanoid

    sample = sample_humanoid(arms_down_angle=0.5, proportions=0.95)
    target = create_armature(sample.skeleton, "Target", tails=sample.tails)
    bpy.context.view_layer.objects.active = target
    bpy.ops.object.mode_set(mode="EDIT")
    ebs = target.data.edit_bones
    foot, shin = ebs["Foot.L"], ebs["Shin.L"]
    offset = 0.2 * (foot.head - shin.head) - (foot.head - shin.head)
    foot.use_connect = False
    foot.parent = ebs["Hips"]
    for eb in (foot, ebs["Toes.L"]):
        eb.use_connect = False
        eb.head += offset
        eb.tail += offset
    bpy.ops.object.mode_set(mode="OBJECT")
    return target


@pytest.fixture
def pair(blender):
    bpy = blender
    import marionette
    from marionette.bridge.action_write import create_armature, write_action
    from marionette.core.rig.samples import sample_humanoid, sample_walk

    marionette.register()
    bpy.context.scene.render.fps = 24
    sample = sample_humanoid()
    source = create_armature(sample.skeleton, "Sample", tails=sample.tails)
    action = write_action(source, sample_walk(sample, frames=24, fps=24.0, name="Walk"), "Walk")
    target = _broken_target(bpy)
    s = bpy.context.scene.marionette
    s.source, s.target = source, target
    yield bpy, source, target, action
    marionette.unregister()


def test_the_sidebar_shows_the_missing_foot_and_retargets_once_it_is_picked(pair):
    bpy, source, target, action = pair
    assert bpy.ops.marionette.auto_map() == {"FINISHED"}
    rows = {r.slot: r for r in bpy.context.scene.marionette.mapping}
    row = rows["foot.L"]
    assert row.source_bone == "Foot.L" and row.target_bone == ""
    assert "foot.L not found: nearest 'Foot.L' (its head is not past the knee)" in row.conflict
    n_actions = len(bpy.data.actions)
    with pytest.raises(RuntimeError, match=r"missing foot\.L.*Bone Mapping list"):
        bpy.ops.marionette.retarget_clip()
    assert len(bpy.data.actions) == n_actions
    row.target_bone = "Foot.L"
    assert bpy.ops.marionette.retarget_clip() == {"FINISHED"}
    new = target.animation_data.action
    assert new is not None and new != action
    from marionette.bridge import compat

    paths = {fc.data_path for slot in new.slots for fc in compat.action_fcurves(new, slot)}
    assert 'pose.bones["Foot.L"].rotation_quaternion' in paths


def test_the_command_line_says_the_same_and_takes_the_fix_as_a_mapping_file(pair, tmp_path):
    bpy, source, target, action = pair
    from marionette.usecases.rigs import rig_input

    bpy.data.objects.remove(source)
    target_file = tmp_path / "target.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(target_file))
    source_file = tmp_path / "walk.blend"
    bpy.ops.wm.read_factory_settings(use_empty=True)
    from marionette.bridge.action_write import create_armature, write_action
    from marionette.core.rig.samples import sample_humanoid, sample_walk

    sample = sample_humanoid()
    walker = create_armature(sample.skeleton, "Sample", tails=sample.tails)
    write_action(walker, sample_walk(sample, frames=24, fps=24.0, name="Walk"), "Walk")
    bpy.ops.wm.save_as_mainfile(filepath=str(source_file))
    out = tmp_path / "out.blend"

    def run(*extra):
        cmd = [sys.executable, "-m", "marionette", "retarget", str(source_file), str(target_file), "-o", str(out)]
        return subprocess.run([*cmd, *extra], capture_output=True, text=True, timeout=300)

    refused = run()
    assert refused.returncode != 0 and not out.exists()
    line = refused.stderr.strip().splitlines()[-1]
    assert "missing foot.L" in line and "nearest 'Foot.L' (its head is not past the knee)" in line
    assert "--mapping FILE" in line
    # The fix the message names: the mapping with the foot picked, passed as --mapping.
    bpy.ops.wm.open_mainfile(filepath=str(target_file))
    with pytest.raises(Exception, match="missing foot.L"):
        rig_input(bpy.data.objects["Target"])
    from marionette.bridge.skeleton_read import rest_heads_tails, skeleton_from_armature
    from marionette.core.mapping.auto_map import auto_map_skeleton

    obj = bpy.data.objects["Target"]
    mapping = auto_map_skeleton(skeleton_from_armature(obj), rest_heads_tails(obj)[1]).with_bone("foot.L", "Foot.L")
    mapping_file = tmp_path / "target_mapping.json"
    mapping.save(mapping_file)
    done = run("--mapping", str(mapping_file))
    assert done.returncode == 0, done.stderr
    assert out.exists()
