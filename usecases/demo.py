"""Demo: the built-in default job (the ``demo`` command)."""

from __future__ import annotations

from pathlib import Path

from ..bridge.action_write import write_action
from ..bridge.session import fresh_session, save_blend
from ..core.retarget.geometric import RetargetOptions
from .retarget import RetargetOutcome, retarget_action


def demo(output: str | Path, frames: int = 96) -> RetargetOutcome:
    """The built-in default job: Marionette's own sample walk, on its own sample humanoid, retargeted
    onto Blender's Rigify basic human metarig (an A-pose rig with different rolls, proportions and
    names), saved to ``output``."""
    import addon_utils
    import bpy

    from ..bridge.action_write import create_armature
    from ..core.rig.samples import sample_humanoid, sample_walk

    fresh_session()
    addon_utils.enable("rigify", default_set=True)
    scene = bpy.context.scene
    scene.render.fps, scene.render.fps_base = 24, 1.0
    sample = sample_humanoid()
    clip = sample_walk(sample, frames=frames, fps=24.0, name="SampleWalk")
    source = create_armature(sample.skeleton, "MarionetteSample", tails=sample.tails)
    source_action = write_action(source, clip, "SampleWalk")
    bpy.ops.object.armature_basic_human_metarig_add()
    target = bpy.context.active_object
    target.name = "Metarig"
    target.location.x = 1.5
    outcome = retarget_action(
        source, source_action, target, scene_fps=24.0, name="SampleWalk_on_Metarig", options=RetargetOptions(plant_feet=True)
    )
    scene.frame_start, scene.frame_end = 1, frames
    save_blend(output)
    return outcome

