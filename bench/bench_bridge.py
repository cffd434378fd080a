"""Speed of the Blender bridge against Blender's usual per-frame paths, measured in one run.

Builds a 65-bone armature and a 1000-frame clip (smooth random rotations on every bone, root
translation), then times:

* bulk write  -- ``write_action`` (``keyframe_points.add`` + ``foreach_set``);
* bulk read   -- ``clip_from_action`` (``foreach_get`` on keys, evaluated in numpy), and the same
  followed by numpy forward kinematics of every bone at every frame;
* frame_set read -- ``clip_from_evaluation`` (``scene.frame_set`` + ``pose.bones.foreach_get``);
* keyframe_insert write -- pose values set and ``pose_bone.keyframe_insert`` per bone per frame;
* nla.bake -- ``bpy.ops.nla.bake(visual_keying=True)`` of a second armature following the first
  through Copy Transforms constraints.

Run: ``python bench/bench_bridge.py [--frames N] [--skip-slow]``. Goals: read <= 40 ms,
write <= 30 ms for 1000 frames x 65 bones.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def _skeleton(bones: int):
    from marionette.core.rig.skeleton import Skeleton

    # A root, then four chains (spine, two arms, a leg pair's worth) sharing the bones left over.
    names = ["root"]
    parents: list[int | None] = [None]
    rest = [np.eye(4)]
    rng = np.random.default_rng(7)
    chains = 4
    per = (bones - 1) // chains
    for c in range(chains):
        parent = 0
        direction = np.array([np.cos(c * np.pi / 2), np.sin(c * np.pi / 2), 0.3])
        pos = np.zeros(3)
        for k in range(per + (1 if c < (bones - 1) % chains else 0)):
            pos = pos + 0.1 * direction + 0.01 * rng.normal(size=3)
            m = np.eye(4)
            m[:3, 3] = pos
            names.append(f"c{c}_b{k:02d}")
            parents.append(parent)
            rest.append(m)
            parent = len(names) - 1
    return Skeleton.from_rest_matrices(names, parents, np.array(rest))


def _clip(skeleton, frames: int):
    from marionette.core.rig.clip import Clip
    from marionette.core.rig.rotations import quat_from_axis_angle

    rng = np.random.default_rng(11)
    b = len(skeleton)
    t = np.arange(frames)[:, None, None] / 24.0
    freq = rng.uniform(0.2, 1.5, size=(1, b, 3))
    phase = rng.uniform(0, 2 * np.pi, size=(1, b, 3))
    rotvec = 0.6 * np.sin(2 * np.pi * freq * t + phase)
    angle = np.linalg.norm(rotvec, axis=-1)
    rot = quat_from_axis_angle(rotvec, angle)
    tr = np.zeros((frames, b, 3))
    tr[:, 0] = np.stack([np.sin(t[:, 0, 0]), np.cos(t[:, 0, 0]), 0.1 * t[:, 0, 0]], -1)
    return Clip.from_frames(skeleton.names, rot, tr, fps=24.0, first_frame=1.0, name="bench")


def _best(fn, repeat: int, between=None) -> tuple[float, object]:
    """Best of ``repeat`` timed calls; ``between`` (untimed) runs before each call but the first."""
    times = []
    out = None
    for k in range(repeat):
        if k and between is not None:
            between(out)
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1000)
    parser.add_argument("--bones", type=int, default=65)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--skip-slow", action="store_true", help="skip keyframe_insert and nla.bake")
    args = parser.parse_args()

    import bpy

    from marionette.bridge import action_write, clip_read, compat, skeleton_read

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, args.frames
    skeleton = _skeleton(args.bones)
    clip = _clip(skeleton, args.frames)
    obj = action_write.create_armature(skeleton, "Bench")
    print(f"armature: {len(obj.data.bones)} bones; clip: {clip.frame_count} frames")

    results: dict[str, float] = {}
    # Each repetition writes into a file holding one bench action, as a real bake would.
    results["bulk write (write_action)"], action = _best(
        lambda: action_write.write_action(obj, clip, "bench_bulk"), args.repeat, between=bpy.data.actions.remove
    )
    curves = len(compat.action_fcurves(action, compat.action_slot_for(action, obj)))

    results["bulk read (clip_from_action)"], read = _best(lambda: clip_read.clip_from_action(obj, action), args.repeat)

    def read_fk():
        c = clip_read.clip_from_action(obj, action)
        s = skeleton_read.skeleton_from_armature(obj)
        return s.world_from_skeleton(s.forward_kinematics(c.rotations, c.translations, c.scales))

    results["bulk read + numpy FK"], _ = _best(read_fk, args.repeat)
    err = float(np.abs(read.rotations - clip.rotations).max())

    results["frame_set read (clip_from_evaluation)"], _ = _best(lambda: clip_read.clip_from_evaluation(obj, action), 1)

    if not args.skip_slow:
        # keyframe_insert per bone per frame, Blender's usual scripted path.
        target = action_write.create_armature(skeleton, "BenchInsert")
        pbs = target.pose.bones
        order = [pbs[n] for n in clip.names]

        def insert():
            t0 = time.perf_counter()
            for k in range(clip.frame_count):
                frame = float(k + 1)
                for j, pb in enumerate(order):
                    pb.rotation_quaternion = clip.rotations[k, j]
                    pb.location = clip.translations[k, j]
                    pb.keyframe_insert("rotation_quaternion", frame=frame)
                    pb.keyframe_insert("location", frame=frame)
            return time.perf_counter() - t0

        results["keyframe_insert write"] = insert()

        # nla.bake with visual keying from Copy Transforms constraints.
        follower = action_write.create_armature(skeleton, "BenchBake")
        for pb in follower.pose.bones:
            c = pb.constraints.new("COPY_TRANSFORMS")
            c.target = obj
            c.subtarget = pb.name
        view_layer = bpy.context.view_layer
        for o in view_layer.objects:
            o.select_set(False)
        follower.select_set(True)
        view_layer.objects.active = follower
        bpy.ops.object.mode_set(mode="POSE")
        t0 = time.perf_counter()
        bpy.ops.nla.bake(
            frame_start=1,
            frame_end=clip.frame_count,
            only_selected=False,
            visual_keying=True,
            clear_constraints=False,
            bake_types={"POSE"},
        )
        results["nla.bake (visual keying)"] = time.perf_counter() - t0
        bpy.ops.object.mode_set(mode="OBJECT")

    print(f"{curves} F-curves x {clip.frame_count} keys; read-back max |dq| = {err:.2e}")
    print("ratios: reads against the bulk read, writes against the bulk write (best of the repeats)")
    base_w = results["bulk write (write_action)"]
    base_r = results["bulk read (clip_from_action)"]
    for name, sec in results.items():
        ref = base_r if "read" in name else base_w
        print(f"  {name:40s} {sec * 1e3:10.1f} ms   x{sec / ref:8.1f}")
    ok_r = base_r <= 0.040
    ok_w = base_w <= 0.030
    print(f"goal read <= 40 ms: {'met' if ok_r else 'MISSED'}; goal write <= 30 ms: {'met' if ok_w else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
