"""Retarget Clip end to end against the common recipe, measured side by side in one run.

Run on demand: ``python bench/bench_retarget_clip.py``. Both sides take a 1000-frame clip on a
source armature and produce a baked Action on a target with another rest pose, proportions and
rolls, for two targets: Marionette's sample humanoid posed otherwise (51 bones, no mesh) and,
a real skinned character from ``tests/data``
(``male_base_mesh_apose.glb``: 56 bones, A-pose, its own names and mapping).

* Marionette: read the source action in bulk, retarget in core, write the new action in bulk
  (``retarget.retarget_action``, the Retarget Clip operator's one call); timed without and with the
  quality report the operator shows afterwards (keys read back on <= 120 frames and measured).
* The recipe: Copy Rotation (world space) on every mapped target bone plus Copy Location on the
  hips, then ``bpy.ops.nla.bake(visual_keying=True)`` over the frame range.

Goal: Retarget Clip (read, retarget, write) at least 20x faster than the recipe. Each side is
the best of a few runs. The recipe plants no feet, so the goal compares the same work; the
figure with Plant Feet (which the sidebar and command line use by default) is printed beside it.
"""

from __future__ import annotations

import time

import numpy as np
from bench_files import DATA

FRAMES = 1000
CHARACTER = DATA / "gltf" / "male_base_mesh_apose.glb"


def _compare(label: str, source, action, target, source_slots: dict[str, str]) -> None:
    import bpy

    from marionette.core.retarget.geometric import RetargetOptions
    from marionette.usecases.retarget import retarget_action
    from marionette.usecases.rigs import rig_input

    def best(judge: bool, runs: int = 7, plant: bool = False) -> float:
        timings = []
        for _ in range(runs):
            t0 = time.perf_counter()
            outcome = retarget_action(
                source, action, target, scene_fps=24.0, name="bench", judge=judge, options=RetargetOptions(plant_feet=plant)
            )
            timings.append(time.perf_counter() - t0)
            bpy.data.actions.remove(outcome.action)
        return min(timings)

    ours = best(judge=False)
    ours_judged = best(judge=True)
    ours_planted = best(judge=False, plant=True)

    # The recipe: constraints on every mapped bone of the target (the same mapping Marionette
    # finds), then a visual-keying bake; on a copy, so the target itself stays as it is.
    _, target_mapping = rig_input(target)

    def recipe_once() -> float:
        recipe_target = target.copy()
        recipe_target.animation_data_clear()
        bpy.context.scene.collection.objects.link(recipe_target)
        for slot, mb in target_mapping.slots.items():
            if slot not in source_slots:
                continue
            pb = recipe_target.pose.bones[mb.bone]
            c = pb.constraints.new("COPY_ROTATION")
            c.target, c.subtarget = source, source_slots[slot]
            if slot == "hips":
                c = pb.constraints.new("COPY_LOCATION")
                c.target, c.subtarget = source, source_slots[slot]
        bpy.ops.object.select_all(action="DESELECT")
        recipe_target.select_set(True)
        bpy.context.view_layer.objects.active = recipe_target
        bpy.ops.object.mode_set(mode="POSE")
        bpy.ops.pose.select_all(action="SELECT")
        t0 = time.perf_counter()
        bpy.ops.nla.bake(frame_start=1, frame_end=FRAMES, only_selected=True, visual_keying=True, clear_constraints=True, bake_types={"POSE"})
        elapsed = time.perf_counter() - t0
        bpy.ops.object.mode_set(mode="OBJECT")
        bpy.data.objects.remove(recipe_target, do_unlink=True)
        return elapsed

    recipe = min(recipe_once() for _ in range(2))
    print(f"\n{label}")
    print(f"  Retarget Clip (read + retarget + write):          {ours * 1e3:8.1f} ms")
    print(f"    ... and the quality report it shows afterwards: {ours_judged * 1e3:8.1f} ms")
    print(f"    ... with Plant Feet (the sidebar's default):    {ours_planted * 1e3:8.1f} ms")
    print(f"  constraints + nla.bake(visual_keying):            {recipe * 1e3:8.1f} ms")
    print(
        f"  speed-up: {recipe / ours:6.1f} x   (goal >= 20 x); with the report {recipe / ours_judged:5.1f} x; "
        f"planting feet {recipe / ours_planted:5.1f} x"
    )


def main() -> None:
    import bpy

    from marionette.bridge.action_write import create_armature, write_action
    from marionette.core.rig.samples import sample_humanoid, sample_walk

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.render.fps = 24
    src_rig = sample_humanoid()
    source = create_armature(src_rig.skeleton, "Source", tails=src_rig.tails)
    action = write_action(source, sample_walk(src_rig, frames=FRAMES, fps=24.0), "Walk")
    print(f"clip: {FRAMES} frames on a {len(source.data.bones)}-bone source")

    rolls = np.random.default_rng(3).uniform(-np.pi, np.pi, len(src_rig.skeleton))
    tgt_rig = sample_humanoid(arms_down_angle=0.75, proportions=0.92, rolls=rolls)
    target = create_armature(tgt_rig.skeleton, "Target", tails=tgt_rig.tails)
    _compare(f"sample humanoid, A-pose, random rolls ({len(target.data.bones)} bones, no mesh)", source, action, target, src_rig.slots)

    if CHARACTER.exists():
        from marionette.bridge.file_import import load_file

        character = max(load_file(str(CHARACTER)).armatures, key=lambda a: len(a.data.bones))
        character.location.x = 2.0
        meshes = sum(1 for o in bpy.data.objects if o.type == "MESH" and o.find_armature() == character)
        _compare(f"{CHARACTER.name} ({len(character.data.bones)} bones, {meshes} skinned mesh)", source, action, character, src_rig.slots)
    else:
        print(f"\n({CHARACTER} not found: the real character is left out)")


if __name__ == "__main__":
    main()
