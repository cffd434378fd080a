"""Add Collider sizes spheres and capsules from the mesh the bone deforms (docs/controls.md#colliders),
on Quaternius' man (tests/data/fbx/quaternius_male_casual.fbx, 4.8 units tall): the radius is the
median distance of the vertices weighted to the bone from its axis, read here through Blender's
per-vertex weight lookup; a bone no vertex is weighted to keeps the length-based size."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.data import shared_file

pytestmark = pytest.mark.bpy


def _median_from_axis(arm, mesh, bone: str) -> float:
    group = mesh.vertex_groups[bone]
    pts = []
    for v in mesh.data.vertices:
        try:
            w = group.weight(v.index)
        except RuntimeError:
            continue
        if w >= 0.5:
            pts.append(v.co[:])
    m = np.linalg.inv(np.array(arm.matrix_world)) @ np.array(mesh.matrix_world)
    p = np.array(pts) @ m[:3, :3].T + m[:3, 3]
    b = arm.data.bones[bone]
    a, e = np.array(b.head_local), np.array(b.tail_local) - np.array(b.head_local)
    t = np.clip((p - a) @ e / (e @ e), 0.0, 1.0)
    return float(np.median(np.linalg.norm(p - (a + t[:, None] * e), axis=1)))


def test_add_collider_takes_the_width_of_the_body_part_the_bone_deforms(addon) -> None:
    bpy = addon
    from marionette.bridge.file_import import load_file

    f = load_file(shared_file("fbx/quaternius_male_casual.fbx"))
    arm = max(f.armatures, key=lambda a: len(a.data.bones))
    mesh = next(o for o in bpy.data.objects if o.type == "MESH" and any(m.type == "ARMATURE" and m.object == arm for m in o.modifiers))
    bpy.context.view_layer.objects.active = arm
    s = arm.marionette_controls
    sizes = {}
    for kind, bone in (("SPHERE", "Head"), ("CAPSULE", "UpperArm.L"), ("CAPSULE", "Torso"), ("SPHERE", "Neck")):
        assert bpy.ops.marionette.collider_add(kind=kind, bone=bone) == {"FINISHED"}
        sizes[bone] = s.colliders[-1].radius
    for bone in ("Head", "UpperArm.L", "Torso"):
        assert abs(sizes[bone] - _median_from_axis(arm, mesh, bone)) < 1e-6, bone
    # Not what the length gives (half the head bone's length; a quarter of the torso's). The
    # upper arm's happens to come near its quarter.
    assert abs(sizes["Head"] - 0.5 * arm.data.bones["Head"].length) > 0.03
    assert abs(sizes["Torso"] - 0.25 * arm.data.bones["Torso"].length) > 0.1
    # The head about as wide as a head of a 4.8-unit man, the arm thinner than the chest.
    assert 0.25 < sizes["Head"] < 0.4
    assert sizes["UpperArm.L"] < 0.7 * sizes["Torso"]
    # No vertex of the man is weighted to his neck: its sphere is sized from the bone's length.
    assert abs(sizes["Neck"] - 0.5 * arm.data.bones["Neck"].length) < 1e-6
