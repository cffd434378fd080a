"""Retarget onto a control rig against the same retarget onto the bare skeleton, side by side in one run.

Run on demand: ``python -m bench.bench_control_rig [--runs 3]``. The clip is the CMU walk ``12_03``
(120 fps) played back and forth without a seam (:mod:`bench.long_clips`) for 1000 frames at the
scene's 24 fps. The targets are in one file, made by Rigify itself (:mod:`tests.helpers.rigify_rig`):
the full human metarig (a plain skeleton, its bones keyed directly) and the rig Rigify generates
from it (about 700 bones, keyed on its FK controls, the solve checked on what Blender plays).

Each side is the Retarget Clip call (read, retarget, write, and the quality report measured on
what Blender plays), the best of ``--runs`` runs. For the control rig the run is split into its
control-rig parts: reading the rig (constraints and the pose with every control at rest), the
control solve alone (numpy: placements to the controls' local transforms), and the check that
Blender plays the solve.

The same clip onto the IK controls is timed too (``control_rig="ik"``). Goal: the generated rig
(FK) within 3x the time of the bare metarig.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.long_clips import CMU_WALK, write_ping_pong_bvh

FRAMES = 1000
SCENE_FPS = 24.0
SOURCE_FPS = 120.0


def _timed(module: Any, name: str, spent: dict[str, float]) -> Callable[[], None]:
    """Wrap ``module.name`` so each call adds its seconds to ``spent[name]``; returns the undo."""
    original = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - t0

    setattr(module, name, wrapper)
    return lambda: setattr(module, name, original)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each side (the best is printed)")
    args = parser.parse_args()
    if not CMU_WALK.exists():
        raise SystemExit(f"needs {CMU_WALK} (tests/data)")

    import bpy

    from marionette.bridge import control_target as ct
    from marionette.bridge.file_import import load_file
    from marionette.bridge.session import fresh_session
    from marionette.core.retarget.geometric import RetargetOptions
    from marionette.usecases import retarget as usecase
    from marionette.usecases.retarget import retarget_action
    from marionette.usecases.rigs import pick_armature
    from tests.helpers.rigify_rig import rigify_rig_blend

    rig_file = rigify_rig_blend()
    with tempfile.TemporaryDirectory() as tmp:
        take = write_ping_pong_bvh(CMU_WALK, int(FRAMES * SOURCE_FPS / SCENE_FPS), Path(tmp) / "walk.bvh")
        fresh_session()
        bpy.context.scene.render.fps = int(SCENE_FPS)
        targets = load_file(str(rig_file)).armatures
        metarig, rig = pick_armature(targets, "metarig", "metarig"), pick_armature(targets, "rig", "rig")
        loaded = load_file(str(take))
        source, action = loaded.armatures[0], loaded.actions[0]
    options = RetargetOptions(plant_feet=False)

    firsts: dict[str, float] = {}

    def best(target: Any, judge: bool = True, mode: str = "fk") -> tuple[float, dict[str, float], dict[str, Any]]:
        timings = []
        for _ in range(args.runs):
            spent: dict[str, float] = defaultdict(float)
            parts = ("read_graph", "wanted_placements", "control_clip", "write_action", "_check")
            undo = [_timed(ct, n, spent) for n in parts] + [_timed(usecase, "judge_action", spent)]
            try:
                t0 = time.perf_counter()
                outcome = retarget_action(source, action, target, scene_fps=SCENE_FPS, options=options, name="bench", judge=judge, control_rig=mode)
                elapsed = time.perf_counter() - t0
            finally:
                for u in undo:
                    u()
            timings.append((elapsed, dict(spent), outcome.report))
            target.animation_data.action = None
            bpy.data.actions.remove(outcome.action)
        firsts.setdefault(f"{target.name} {mode} {judge}", timings[0][0])
        return min(timings, key=lambda t: t[0])

    bare, bare_parts, bare_report = best(metarig)
    ctl, parts, ctl_report = best(rig)
    bare_unjudged, ctl_unjudged = best(metarig, judge=False)[0], best(rig, judge=False)[0]
    ik, ik_parts, ik_report = best(rig, mode="ik")
    frames = ctl_report["clip"]["frames"]
    described = ctl_report["control_rig"]
    print(f"clip: {frames} frames at {SCENE_FPS:.0f} fps (CMU 12_03 back and forth), Plant Feet off, quality report included")
    print(f"  bare metarig ({len(metarig.data.bones)} bones, keyed directly):         {bare * 1e3:8.1f} ms")
    print(f"  generated rig ({len(rig.data.bones)} bones, {len(described['controls'])} controls keyed, {described['plan']}): {ctl * 1e3:8.1f} ms")
    print(f"    reading the rig (constraints, pose at rest):      {parts.get('read_graph', 0.0) * 1e3:8.1f} ms")
    print(f"    placements of the bones the plan reads (FK):      {parts.get('wanted_placements', 0.0) * 1e3:8.1f} ms")
    print(f"    control solve alone (numpy):                      {parts.get('control_clip', 0.0) * 1e3:8.1f} ms")
    print(f"    writing the controls' keys:                       {parts.get('write_action', 0.0) * 1e3:8.1f} ms")
    print(f"    check on what Blender plays:                      {parts.get('_check', 0.0) * 1e3:8.1f} ms")
    print(f"    quality report (played pose measured):            {parts.get('judge_action', 0.0) * 1e3:8.1f} ms"
          f"   (bare metarig: {bare_parts.get('judge_action', 0.0) * 1e3:.1f} ms)")
    print(f"  generated rig / bare metarig: {ctl / bare:4.2f} x (goal <= 3 x)")
    first = firsts[f"{rig.name} fk True"]
    print(f"  the first run onto the generated rig (its constraints read and its rest evaluated, kept for the next): {first * 1e3:.1f} ms, {first / bare:4.2f} x")
    print(f"  without the quality report: {ctl_unjudged * 1e3:.1f} ms / {bare_unjudged * 1e3:.1f} ms = {ctl_unjudged / bare_unjudged:4.2f} x")
    print(
        f"  IK controls ({ik_report['control_rig']['plan']}): {ik * 1e3:.1f} ms, {ik / bare:4.2f} x the bare metarig "
        f"(control solve {ik_parts.get('control_clip', 0.0) * 1e3:.1f} ms)"
    )
    for label, report in (("bare metarig", bare_report), ("generated rig, FK", ctl_report), ("generated rig, IK", ik_report)):
        s = report["summary"]
        print(f"  {label}: limb direction error mean {s['mean_limb_direction_error']:.3f} deg (its own summary, on what Blender plays)")


if __name__ == "__main__":
    main()
