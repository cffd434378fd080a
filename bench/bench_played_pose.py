"""The quality report after a retarget, measured on the pose Blender plays, against reading the
keys alone and against evaluating every sampled frame, side by side in one run.

Run on demand: ``python bench/bench_played_pose.py``. A 1000-frame sample walk is retargeted onto
Marionette's sample humanoid posed otherwise (no mesh) and onto a real skinned character
(``male_base_mesh_apose.glb`` from ``tests/data``); the report is then
judged on <= 120 evenly spread frames three ways:

* played pose (what ``retarget.judge_action`` does): the keys read in bulk and checked against
  Blender's evaluation on ``played_pose.SPOT_FRAMES`` of the frames;
* keys alone (the baseline): the keys read in bulk, nothing checked;
* every frame evaluated: ``scene.frame_set`` and the pose matrices on all sampled frames.

Each is the best of a few runs; ratios are against the baseline of the same run.
"""

from __future__ import annotations

import time

import numpy as np
from bench_files import DATA

FRAMES = 1000
SAMPLES = 120
CHARACTER = DATA / "gltf" / "male_base_mesh_apose.glb"


def _best(run, runs: int = 5) -> float:
    timings = []
    for _ in range(runs):
        t0 = time.perf_counter()
        run()
        timings.append(time.perf_counter() - t0)
    return min(timings)


def _compare(label: str, source, action, target) -> None:
    from marionette.bridge.clip_read import clip_from_action
    from marionette.bridge.evaluated_pose import evaluated_pose_matrices
    from marionette.core.measure.figures import measure
    from marionette.core.retarget.geometric import source_placements
    from marionette.usecases import retarget, rigs

    outcome = retarget.retarget_action(source, action, target, scene_fps=24.0, name="bench", judge=False)
    tgt_in, _ = rigs.rig_input(target)
    clip = clip_from_action(source, action).resample(24.0)
    frames = clip.frame_numbers(24.0)
    picks = np.unique(np.linspace(0, clip.frame_count - 1, SAMPLES).astype(int))

    def played() -> None:
        retarget.judge_action(outcome.binding, clip, tgt_in, target, outcome.action, frames, 24.0, SAMPLES)

    def keys() -> None:
        p = clip_from_action(target, outcome.action, frames=frames[picks], fps=24.0)
        src = source_placements(outcome.binding, clip.take(picks))
        measure(outcome.binding, src, tgt_in.skeleton.forward_kinematics(p.rotations, p.translations, p.scales))

    def evaluated() -> None:
        src = source_placements(outcome.binding, clip.take(picks))
        measure(outcome.binding, src, evaluated_pose_matrices(target, frames[picks], tgt_in.skeleton))

    base = _best(keys)
    ours = _best(played)
    full = _best(evaluated)
    print(f"{label}: quality report on {picks.size} of {FRAMES} frames")
    print(f"  keys alone (baseline)  {1000 * base:6.1f} ms")
    print(f"  played pose (checked)  {1000 * ours:6.1f} ms  ({ours / base:.2f}x the baseline)")
    print(f"  every frame evaluated  {1000 * full:6.1f} ms  ({full / base:.2f}x the baseline)")


def main() -> None:
    import bpy

    from marionette.bridge.action_write import create_armature, write_action
    from marionette.core.rig.samples import sample_humanoid, sample_walk

    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.context.scene.render.fps = 24
    rig = sample_humanoid()
    source = create_armature(rig.skeleton, "Source", tails=rig.tails)
    action = write_action(source, sample_walk(rig, frames=FRAMES, fps=24.0), "Walk")
    posed = sample_humanoid(arms_down_angle=0.75, proportions=0.92)
    target = create_armature(posed.skeleton, "Target", tails=posed.tails)
    _compare(f"sample humanoid, A-pose ({len(target.data.bones)} bones, no mesh)", source, action, target)
    if CHARACTER.exists():
        from marionette.bridge.file_import import load_file

        character = max(load_file(str(CHARACTER)).armatures, key=lambda a: len(a.data.bones))
        _compare(f"male base mesh, skinned ({len(character.data.bones)} bones)", source, action, character)
    else:
        print(f"skipped the skinned character: {CHARACTER} is not available")


if __name__ == "__main__":
    main()
