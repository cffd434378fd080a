"""The pair many Blender tests start from: the built-in sample humanoid playing the sample walk,
and Rigify's basic metarig as the target."""

from __future__ import annotations

from typing import Any


def sample_walk_onto_metarig(bpy: Any, frames: int, fps: int = 24) -> tuple[Any, Any, Any]:
    """Set the scene to ``fps``; make the sample armature ("Sample") playing a ``frames``-frame
    walk ("Walk") and add the metarig (left active). Returns ``(source, action, target)``."""
    from marionette.bridge.action_write import create_armature, write_action
    from marionette.core.rig.samples import sample_humanoid, sample_walk

    bpy.context.scene.render.fps = fps
    sample = sample_humanoid()
    source = create_armature(sample.skeleton, "Sample", tails=sample.tails)
    action = write_action(source, sample_walk(sample, frames=frames, fps=float(fps), name="Walk"), "Walk")
    bpy.ops.object.armature_basic_human_metarig_add()
    return source, action, bpy.context.active_object
