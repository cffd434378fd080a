"""Bake Controls: an armature's controlled motion over a frame range written into a new Action,
for the Bake Controls operator and the ``bake-controls`` command (:func:`bake_file`)."""

# The bpy stubs type Object.data as a union of every data type, context members as optional and
# many RNA functions as returning None; those reports say nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bpy
import numpy as np

from ..bridge import compat
from ..bridge.action_write import write_action
from ..bridge.animated_pose import AnimatedPose, carry_other_curves, pose_problems
from ..bridge.control_evaluation import evaluate, report_summary
from ..bridge.control_rows import BuiltControls, build_controls
from ..bridge.control_targets import TargetReader
from ..bridge.file_import import FPS_PROPERTY, scene_fps
from ..bridge.session import save_blend
from ..core.errors import ClipError, RigError
from ..core.rig.clip import Clip
from ..core.rig.rotations import FloatArray
from ..viewport import live_preview


@dataclass
class BakeOutcome:
    action: bpy.types.Action
    frames: FloatArray
    seconds: float
    controls: dict[str, dict[str, Any]]

    def as_dict(self, obj_name: str) -> dict[str, Any]:
        return {
            "object": obj_name,
            "action": self.action.name,
            "frames": [float(self.frames[0]), float(self.frames[-1])],
            "frame_count": int(self.frames.shape[0]),
            "seconds": round(self.seconds, 4),
            "controls": self.controls,
        }


def check_bakeable(obj: bpy.types.Object) -> BuiltControls:
    """The object's stack, or :class:`RigError` naming what is wrong (nothing is changed)."""
    problems = pose_problems(obj)
    if problems:
        raise RigError("; ".join(problems))
    built = build_controls(obj)
    if built.errors:
        rows = obj.marionette_controls.controls
        raise RigError("; ".join(f"control {rows[i].name!r}: {e}" for i, e in sorted(built.errors.items())))
    if built.stack is None:
        raise RigError(f"{obj.name!r} has no controls to bake")
    missing = TargetReader(obj, built).missing()
    if missing:
        raise RigError("; ".join(missing))
    return built


def bake_controls(
    obj: bpy.types.Object,
    frames: Sequence[float] | np.ndarray | None = None,
    name: str | None = None,
    *,
    disable_live: bool = True,
    scene: bpy.types.Scene | None = None,
) -> BakeOutcome:
    """Write the controlled motion over ``frames`` (default: the scene's range) into a new
    Action on ``obj`` in bulk, springs and smoothing run from the first frame; the object's
    previous action is kept (with a fake user if nothing else uses it). Refuses (``RigError``,
    ``ClipError``) before changing anything. With ``disable_live`` the live preview is turned off
    (its output would otherwise be applied a second time over the baked keys)."""
    t0 = time.perf_counter()
    scene = scene or bpy.context.scene
    built = check_bakeable(obj)
    assert built.stack is not None
    f = np.arange(scene.frame_start, scene.frame_end + 1, dtype=np.float64) if frames is None else np.asarray(frames, dtype=np.float64).reshape(-1)
    if f.size == 0 or not np.all(np.isfinite(f)) or (f.size > 1 and not np.all(np.diff(f) > 0.0)):
        raise ClipError("frames to bake must be finite and increasing")
    skeleton = built.stack.skeleton
    pose = AnimatedPose(obj, skeleton, scene, built.rot_joints, built.tr_joints)
    depsgraph = bpy.context.evaluated_depsgraph_get()
    with live_preview.held():  # reading targets over the frames sets them: no handler runs meanwhile
        result, _current, _ = evaluate(obj, built, built.stack.instance(), pose, TargetReader(obj, built), f, scene, depsgraph)
    coverage = (pose.keys.keyed_joints | (result.coverage.max(axis=0) > 0.0)).astype(np.float64)
    if not coverage.any():
        coverage[list(built.rot_joints)] = 1.0
    fps = scene_fps(scene)
    action, _slot = compat.current_action(obj)
    base_name = name or f"{action.name if action is not None else obj.name}_controls"
    clip = Clip(
        names=skeleton.names,
        times=(f - f[0]) / fps,
        fps=fps,
        rotations=result.rotations,
        translations=result.translations,
        scales=result.scales,
        coverage=coverage,
        name=base_name,
        first_frame=float(f[0]),
    )
    reports = {n: report_summary(r, next(s.kind for s in built.specs if s.name == n)) for n, r in result.reports.items()}
    previous = compat.current_action(obj)
    if disable_live:
        live_preview.stop(obj, restore=True)
    new = write_action(obj, clip, base_name, frames=f, fps=fps)
    new[FPS_PROPERTY] = fps
    if previous[0] is not None:
        carry_other_curves(previous[0], previous[1] or compat.action_slot_for(previous[0], obj), new, compat.current_action(obj)[1])
    return BakeOutcome(new, f, time.perf_counter() - t0, reports)


def bake_file(path: str, object_name: str, output: str, frames: Sequence[int] | None = None, action_name: str | None = None) -> dict[str, Any]:
    """The ``bake-controls`` job: open ``path``, bake ``object_name``'s controls over ``frames``
    (``(first, last)``, default the scene's range), save everything to ``output`` (``path``
    itself is not written). Returns the report."""
    obj, scene, f = open_for_bake(path, object_name, frames)
    report = bake_controls(obj, f, action_name, disable_live=True, scene=scene).as_dict(obj.name)
    save_blend(output)
    report["output"] = str(Path(output).resolve())
    return report


def open_for_bake(path: str, object_name: str, frames: Sequence[int] | None) -> tuple[bpy.types.Object, bpy.types.Scene, np.ndarray]:
    """Open ``path`` and find the armature ``object_name`` in its active scene, and the frames
    to bake (``(first, last)``, default the scene's range); refuses naming what is wrong."""
    src = Path(path)
    if not src.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    bpy.ops.wm.open_mainfile(filepath=str(src), load_ui=False)
    obj = bpy.data.objects.get(object_name)
    if obj is None:
        armatures = sorted(o.name for o in bpy.data.objects if o.type == "ARMATURE")
        raise RigError(f"{path} has no object called {object_name!r} (armatures: {', '.join(armatures) or 'none'})")
    if obj.type != "ARMATURE":
        raise RigError(f"{object_name!r} is a {obj.type.lower()} object, not an armature")
    scene = bpy.context.scene
    if scene.objects.get(obj.name) is None:
        raise RigError(f"{object_name!r} is not in the file's active scene {scene.name!r}")
    return obj, scene, frames_of(scene, *(frames if frames is not None else (None, None)))


def frames_of(scene: bpy.types.Scene, start: int | None, end: int | None) -> np.ndarray:
    a = scene.frame_start if start is None else start
    b = scene.frame_end if end is None else end
    if b < a:
        raise ClipError(f"the frame range {a}..{b} is empty")
    return np.arange(a, b + 1, dtype=np.float64)
