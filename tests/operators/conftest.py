"""Fixtures of the operator tests: Marionette's sample humanoid playing its sample walk."""

from __future__ import annotations

import pytest


@pytest.fixture
def sample(addon):
    """Marionette's sample humanoid (synthetic, 54 bones) playing its sample walk."""
    bpy = addon
    from marionette.bridge.action_write import create_armature, write_action
    from marionette.core.rig.samples import sample_humanoid, sample_walk

    rig = sample_humanoid()
    arm = create_armature(rig.skeleton, "Sample", tails=rig.tails)
    write_action(arm, sample_walk(rig, frames=48, fps=24.0), "Walk")
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 48
    bpy.context.view_layer.objects.active = arm
    return bpy, arm
