"""Speed of the live preview and of Bake Controls in Blender, each against Blender's own work in
the same run.

The character: the 65-bone humanoid of the control tests walking for 1000 frames (30 fps),
optionally skinned (a sphere of about ``--mesh-verts / 65`` vertices per bone, one vertex group
each, an Armature modifier). Its stack, added through the operators as a user would: four
two-bone IK chains (arms and legs) reaching keyed empties, a look-at on neck and head, ground feet
on a plane (rays against the scene's visible meshes but the character's own), and two spring
chains (the index fingers).

Printed, per frame (milliseconds, best of ``--repeat`` runs over ``--frames-timed`` frames):

* Blender's frame change alone: ``scene.frame_set`` with the live preview off;
* the same with the live preview on, and the difference: what the preview adds on top (the two
  are timed in turns, so a slow spell of the shared machine weighs on both);
* the preview's own handler (bulk read, one core call, bulk write), and its parts: reading the
  animated pose, the targets, the core stack, the write;
* with the ground collection set (rays against the plane alone, not the whole scene).

And Bake Controls over all 1000 frames (seconds). Goals (issue 9): at most 2 ms per frame on top
of Blender's frame change, at most 2 s for the bake.

Run on demand: ``python bench/bench_live_preview.py [--mesh-verts N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

# Dev-only: the synthetic rigs live with the tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "core"))

from control_rigs import humanoid_65, walk_cycle  # noqa: E402


def _key_locations(bpy, obj, frames, points) -> None:
    from marionette.bridge import compat

    action, slot = compat.current_action(obj)
    if action is None:
        action = bpy.data.actions.new(f"{obj.name}_path")
        slot = compat.new_action_slot(action, obj)
    bag = compat.channelbag(action, slot, create=True)
    co = np.empty(2 * len(frames), dtype=np.float32)
    co[0::2] = frames
    for k in range(3):
        fc = compat.new_fcurve(bag, "location", k, "Object Transforms")
        fc.keyframe_points.add(len(frames))
        co[1::2] = points[:, k]
        fc.keyframe_points.foreach_set("co", co)
        fc.keyframe_points.foreach_set("interpolation", [1] * len(frames))
    compat.assign_action(obj, action, slot)


def _skin(bpy, arm, skeleton, bones, verts: int):
    """A sphere per bone, rigidly bound to it, about ``verts`` vertices in all."""
    import bmesh

    per = max(verts // len(skeleton), 12)
    rings = max(int(math.sqrt(per / 2)), 3)
    mesh = bpy.data.meshes.new("Body")
    bm = bmesh.new()
    groups = []
    for name in skeleton.names:
        head, tail = bones[name]
        start = len(bm.verts)
        bmesh.ops.create_uvsphere(bm, u_segments=2 * rings, v_segments=rings, radius=0.03 + 0.3 * np.linalg.norm(tail - head))
        bm.verts.ensure_lookup_table()
        mid = 0.5 * (head + tail)
        for v in bm.verts[start:]:
            v.co += type(v.co)(mid)
        groups.append((name, start, len(bm.verts)))
    bm.to_mesh(mesh)
    bm.free()
    body = bpy.data.objects.new("Body", mesh)
    bpy.context.scene.collection.objects.link(body)
    for name, a, b in groups:
        vg = body.vertex_groups.new(name=name)
        vg.add(list(range(a, b)), 1.0, "REPLACE")
    mod = body.modifiers.new("Armature", "ARMATURE")
    mod.object = arm
    body.parent = arm
    return body, len(mesh.vertices)


def build(bpy, frames: int, mesh_verts: int):
    import marionette
    from marionette.bridge.action_write import create_armature, write_action
    from marionette.core.rig.clip import Clip

    bpy.ops.wm.read_factory_settings(use_empty=True)
    marionette.register()
    # The add-on registers the controls' pieces itself; registering them again (or removing
    # them before the add-on does) would leave its own unregister nothing to remove.
    assert hasattr(bpy.types.Object, "marionette_controls"), "the add-on did not register its controls"
    scene = bpy.context.scene
    scene.render.fps = 30
    scene.frame_start, scene.frame_end = 1, frames
    skeleton, bones = humanoid_65()
    times = np.arange(frames) / 30.0
    rot, tr = walk_cycle(skeleton, times)
    arm = create_armature(skeleton, "Walker", tails=np.array([bones[n][1] for n in skeleton.names]))
    write_action(arm, Clip(skeleton.names, times, 30.0, rot, tr, name="Walk"), "Walk", fps=30.0)
    verts = 0
    if mesh_verts:
        _body, verts = _skin(bpy, arm, skeleton, bones, mesh_verts)
    bpy.ops.mesh.primitive_plane_add(size=400.0)
    ground = bpy.context.active_object
    ground_collection = bpy.data.collections.new("Ground")
    scene.collection.children.link(ground_collection)
    ground_collection.objects.link(ground)
    world = skeleton.forward_kinematics(rot, tr)
    f = np.arange(1, frames + 1, dtype=np.float64)
    wobble = np.stack([0.05 * np.sin(times * 3.0), 0.05 * np.cos(times * 2.0), 0.04 * np.sin(times * 5.0)], axis=1)

    def empty(name, points):
        o = bpy.data.objects.new(name, None)
        scene.collection.objects.link(o)
        _key_locations(bpy, o, f, points)
        return o

    bpy.context.view_layer.objects.active = arm
    rows = arm.marionette_controls.controls
    for limb, upper, lower, end, offset in (
        ("arm", "upper_arm", "forearm", "hand", np.array([0.0, -0.15, -0.1])),
        ("leg", "thigh", "shin", "foot", np.array([0.0, -0.05, 0.05])),
    ):
        for side in "LR":
            bpy.ops.marionette.control_add(kind="TWO_BONE_IK", create_target=False)
            row = rows[-1]
            row.name = f"{limb}.{side}"
            row.bone_start, row.bone_end, row.end_bone = f"{upper}.{side}", f"{lower}.{side}", f"{end}.{side}"
            row.target_object = empty(f"{limb}.{side} target", world[:, skeleton.index(f"{end}.{side}"), :3, 3] + offset + wobble)
    bpy.ops.marionette.control_add(kind="LOOK_AT", create_target=False)
    rows[-1].bone_start, rows[-1].bone_end = "neck", "head"
    rows[-1].target_object = empty("look target", world[:, skeleton.index("head"), :3, 3] + [0.5, -2.0, 0.2] + 5 * wobble)
    bpy.ops.marionette.control_add(kind="GROUND")
    rows[-1].priority = 3
    for side in "LR":
        bpy.ops.marionette.control_add(kind="SPRING")
        rows[-1].bone_start, rows[-1].bone_end = f"finger1_0.{side}", f"finger1_2.{side}"
        rows[-1].stiffness, rows[-1].damping, rows[-1].priority = 200.0, 8.0, 5
    return arm, ground_collection, verts


def per_frame(bpy, frames, repeat: int) -> float:
    scene = bpy.context.scene
    best = math.inf
    for _ in range(repeat):
        scene.frame_set(int(frames[0]) - 1)
        t0 = time.perf_counter()
        for fr in frames:
            scene.frame_set(int(fr))
        best = min(best, (time.perf_counter() - t0) / len(frames))
    return best


def off_and_on(bpy, arm, frames, repeat: int) -> tuple[float, float]:
    """Best seconds per frame with the live preview off and on, measured in turns: the machine
    is shared, and a slow spell then weighs on both rather than on one of them."""
    scene = bpy.context.scene
    off = on = math.inf
    for _ in range(repeat):
        arm.marionette_controls.live_preview = False
        off = min(off, per_frame(bpy, frames, 1))
        arm.marionette_controls.live_preview = True
        scene.frame_set(1)
        on = min(on, per_frame(bpy, frames, 1))
    return off, on


def parts(bpy, arm, frames) -> dict[str, float]:
    """Mean seconds of the handler's parts over ``frames`` (playing them in order)."""
    from marionette.bridge.control_targets import TargetReader, set_targets
    from marionette.bridge.file_import import scene_fps
    from marionette.bridge.ground_rays import make_ray_cast
    from marionette.viewport import live_preview

    scene = bpy.context.scene
    out = {"handler": 0.0, "read": 0.0, "targets": 0.0, "core": 0.0, "write": 0.0}
    for fr in frames:
        scene.frame_set(int(fr))
        rt = live_preview.runtime(arm)
        out["handler"] += rt.seconds
    # The parts, replayed on the same runtime (springs and smoothing continue from their state).
    depsgraph = bpy.context.evaluated_depsgraph_get()
    fps = scene_fps(scene)
    with live_preview.held():
        for fr in frames:
            scene.frame_set(int(fr))
            rt = live_preview.runtime(arm)
            f = np.array([float(fr)])
            t0 = time.perf_counter()
            rot, tr, sc, current = rt.pose.at(arm, f)
            t1 = time.perf_counter()
            placement = np.array(arm.matrix_world)[None]
            reader: TargetReader = rt.reader
            own = rt.built.stack.skeleton.forward_kinematics(rot, tr, sc) if reader.own else None
            set_targets(rt.instance, rt.built, reader.tracks(arm, None, own, placement), placement, make_ray_cast(scene, depsgraph, rt.built))
            t2 = time.perf_counter()
            result = rt.instance.evaluate(rot, tr, sc, time=f / fps, placement=placement)
            t3 = time.perf_counter()
            rt.pose.write(arm, result.rotations[0], result.translations[0], current)
            t4 = time.perf_counter()
            out["read"] += t1 - t0
            out["targets"] += t2 - t1
            out["core"] += t3 - t2
            out["write"] += t4 - t3
    return {k: v / len(frames) for k, v in out.items()}


def run(bpy, args, mesh_verts: int) -> None:
    from marionette.viewport import live_preview

    arm, ground, verts = build(bpy, args.frames, mesh_verts)
    scene = bpy.context.scene
    timed = np.arange(2, 2 + args.frames_timed)
    label = f"{verts} skinned vertices" if verts else "no mesh"
    arm.marionette_controls.live_preview = True
    scene.frame_set(1)
    rt = live_preview.runtime(arm)
    assert rt.error == "" and not rt.problems and rt.built is not None and not rt.built.errors, (rt.error, rt.problems, rt.built and rt.built.errors)
    base, live = off_and_on(bpy, arm, timed, args.repeat)
    split = parts(bpy, arm, timed[: min(100, len(timed))])
    for row in arm.marionette_controls.controls:
        if row.kind == "GROUND":
            row.ground_collection = ground
    base_again, live_collection = off_and_on(bpy, arm, timed, args.repeat)
    base = min(base, base_again)
    for row in arm.marionette_controls.controls:
        if row.kind == "GROUND":
            row.ground_collection = None
    print(f"\n{len(arm.marionette_controls.controls)} controls on 65 bones, {label}; ms per frame (best of {args.repeat} x {len(timed)} frames)")
    print(f"  Blender's frame change, preview off      {1e3 * base:7.3f}")
    print(f"  with the live preview                    {1e3 * live:7.3f}   on top: {1e3 * (live - base):6.3f}")
    print(f"  with the live preview, ground collection {1e3 * live_collection:7.3f}   on top: {1e3 * (live_collection - base):6.3f}")
    print(
        f"  the handler itself {1e3 * split['handler']:6.3f} = read {1e3 * split['read']:.3f} + targets and rays {1e3 * split['targets']:.3f}"
        f" + core {1e3 * split['core']:.3f} + write {1e3 * split['write']:.3f} (+ checks)"
    )
    arm.marionette_controls.live_preview = False
    bpy.context.view_layer.objects.active = arm
    t0 = time.perf_counter()
    result = bpy.ops.marionette.bake_controls(use_scene_range=True)
    bake = time.perf_counter() - t0
    assert result == {"FINISHED"}
    print(f"  Bake Controls, {args.frames} frames: {bake:.3f} s (action {arm.animation_data.action.name!r})")
    import marionette

    marionette.unregister()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=1000, help="length of the walk and of the bake")
    parser.add_argument("--frames-timed", type=int, default=200, help="frames played per timing run")
    parser.add_argument("--mesh-verts", type=int, default=20000, help="skinned vertices of the second run (0: skip it)")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many timing runs")
    args = parser.parse_args()
    import bpy

    print(f"Blender {bpy.app.version_string}, numpy {np.__version__}")
    run(bpy, args, 0)
    if args.mesh_verts:
        run(bpy, args, args.mesh_verts)


if __name__ == "__main__":
    main()
