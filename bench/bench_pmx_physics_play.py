"""Speed of playing a PMX rig with physics in the viewport: Blender's frame change (the rigid-body
world simulating the model's bodies) with the live preview off, and with it on, in the same run.

The model: the test humanoid with 8 hair strands of 5 jointed capsules, a head sphere and a
chest capsule (42 bodies, 40 joints; ``tests.helpers.pmx_files.many_hair_model``), its upper
body swaying 20 degrees either way each second and its left leg IK bone stepping up and down,
120 frames at 30 fps. With the live preview on, each frame is shown before Blender simulates it
(its leg IK carrying the knee's bodies) and written again after it (viewport/physics_playback.py).

Printed, per frame (milliseconds, the median of ``--repeat`` plays of the whole range, each
simulated afresh, the two settings taking turns so a slow spell of the shared machine weighs on
both): the frame change with the preview off, with it on, and what the preview adds.

Run on demand: ``python -m bench.bench_pmx_physics_play [--repeat R]``.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import numpy as np

from tests.helpers.pmx_files import many_hair_model, write_pmx
from tests.helpers.vmd_files import Key, Motion, vmd_bytes

FRAMES = 120


def _model(folder: Path) -> tuple[Path, Path]:
    bones, bodies, joints = many_hair_model(8, 5)
    pmx, vmd = folder / "hair.pmx", folder / "sway.vmd"
    pmx.write_bytes(write_pmx(bones, bodies=bodies, joints=joints)[0])
    h = math.radians(10.0)
    turn = [(0.0, 0.0, 0.0, 1.0), (math.sin(h), 0.0, 0.0, math.cos(h)), (0.0, 0.0, 0.0, 1.0), (-math.sin(h), 0.0, 0.0, math.cos(h))]
    keys = [Key("上半身", f, rotation=turn[(f // 15) % 4]) for f in range(0, FRAMES + 1, 15)]
    keys += [Key("左足ＩＫ", f, (0.0, 2.0 if f % 30 == 15 else 0.0, 0.0)) for f in range(0, FRAMES + 1, 15)]
    vmd.write_bytes(vmd_bytes(Motion(keys=keys)))
    return pmx, vmd


def _play(bpy, scene, world) -> float:
    """Milliseconds per frame over the range, simulated afresh (the cache is reset first)."""
    scene.frame_set(1)
    world.substeps_per_frame = world.substeps_per_frame  # any edit of the world marks its cache outdated
    scene.frame_set(1)
    t0 = time.perf_counter()
    for f in range(2, FRAMES + 1):
        scene.frame_set(f)
    return (time.perf_counter() - t0) * 1000.0 / (FRAMES - 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    import bpy

    import marionette
    from marionette.bridge.rigid_bodies import set_physics
    from marionette.usecases.import_pmx import import_pmx_rig
    from marionette.usecases.vmd_apply import apply_vmd

    marionette.register()
    try:
        scene = bpy.context.scene
        scene.render.fps = 30
        scene.frame_start, scene.frame_end = 1, FRAMES
        with tempfile.TemporaryDirectory() as tmp:
            pmx, vmd = _model(Path(tmp))
            result = import_pmx_rig(pmx, physics=True)
            apply_vmd(result.obj, vmd)
        obj = result.obj
        set_physics(obj, scene, True)
        world = scene.rigidbody_world
        off, on = [], []
        for _ in range(args.repeat):
            obj.marionette_controls.live_preview = False
            off.append(_play(bpy, scene, world))
            obj.marionette_controls.live_preview = True
            on.append(_play(bpy, scene, world))
        a, b = float(np.median(off)), float(np.median(on))
        print(f"{len(result.physics.bodies)} bodies, {FRAMES} frames, median of {args.repeat} plays each, simulated afresh:")
        print(f"  frame change, live preview off: {a:6.2f} ms")
        print(f"  frame change, live preview on:  {b:6.2f} ms  (the preview adds {b - a:5.2f} ms, ratio {b / a:4.2f})")
    finally:
        marionette.unregister()


if __name__ == "__main__":
    main()
