"""A target file holding several armatures: the command line retargets onto the humanoid one, even
when another armature (a prop, a pet, a control rig) has more bones."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.bpy


@pytest.mark.slow
def test_the_humanoid_is_picked_over_a_larger_armature_that_is_not_one(blender, tmp_path):
    bpy = blender
    import numpy as np

    from marionette.bridge.action_write import create_armature, write_action
    from marionette.core.rig.samples import sample_humanoid, sample_walk
    from marionette.core.rig.skeleton import Skeleton

    sample = sample_humanoid()
    walker = create_armature(sample.skeleton, "Sample", tails=sample.tails)
    write_action(walker, sample_walk(sample, frames=24, fps=24.0, name="Walk"), "Walk")
    source_file = tmp_path / "walk.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(source_file))

    bpy.ops.wm.read_factory_settings(use_empty=True)
    create_armature(sample_humanoid(arms_down_angle=0.6).skeleton, "Character")
    n = len(sample.skeleton) + 20
    rests = np.tile(np.eye(4), (n, 1, 1))
    rests[:, 0, 3] = 3.0 + 0.05 * np.arange(n)  # a long rope of bones beside the character
    rope = Skeleton.from_rest_matrices(
        [f"Rope{k}" for k in range(n)], [None] + [f"Rope{k}" for k in range(n - 1)], rests
    )
    create_armature(rope, "Rope")
    target_file = tmp_path / "scene.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(target_file))

    out = tmp_path / "out.blend"
    cmd = [sys.executable, "-m", "marionette", "retarget", str(source_file), str(target_file), "-o", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    bpy.ops.wm.open_mainfile(filepath=str(out))
    character = bpy.data.objects["Character"]
    assert character.animation_data is not None and character.animation_data.action is not None
    rope_obj = bpy.data.objects.get("Rope")
    assert rope_obj is None or rope_obj.animation_data is None or rope_obj.animation_data.action is None

    # bake-pack takes the same armature from the same file.
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "walk.blend").write_bytes(source_file.read_bytes())
    baked = tmp_path / "baked.blend"
    cmd = [sys.executable, "-m", "marionette", "bake-pack", str(pack), str(target_file), "-o", str(baked), "--jobs", "1"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    bpy.ops.wm.open_mainfile(filepath=str(baked))
    assert bpy.context.scene.get("marionette_batch_target") == "Character"
    assert any(a.name.endswith("|Walk") for a in bpy.data.actions), [a.name for a in bpy.data.actions]

    # A name that is not in the file: both commands refuse it alike, naming what the file holds.
    for command, extra in (("retarget", []), ("bake-pack", ["--jobs", "1"])):
        first = source_file if command == "retarget" else pack
        refused = tmp_path / f"refused_{command}.blend"
        cmd = [sys.executable, "-m", "marionette", command, str(first), str(target_file), "-o", str(refused), "--target-armature", "Nope", *extra]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert done.returncode == 1, done.stderr
        assert "scene.blend: no armature called 'Nope' (armatures: " in done.stderr and "'Character'" in done.stderr, done.stderr
        assert not refused.exists()
