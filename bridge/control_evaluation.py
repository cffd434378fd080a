"""One evaluation of an armature's controls: the animated pose and the targets read in bulk, the
core stack run once (the current frame for the live preview, a frame range for a bake), and the
figures of each control's report.

A control row whose **Enabled** is keyed in the object's action (a motion's IK switches, see
:mod:`..usecases.vmd_apply`) is switched per frame: it stays enabled in the stack and its target is
withheld (not a number) on the frames its key turns it off, so the stack skips it there as a whole
and the chain plays its keyed pose; its report counts those frames as skipped."""

# The bpy stubs type Object.data as a union of every data type, context members as optional and
# many RNA functions as returning None; those reports say nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

import re
from typing import Any

import bpy
import numpy as np

from ..core.controls.stack import ControlInstance, ControlReport, StackResult
from ..core.rig.rotations import FloatArray
from . import compat
from .animated_pose import AnimatedPose
from .control_rows import BuiltControls, TargetRef
from .control_targets import TargetReader, evaluated_tracks, object_world_track, set_targets
from .file_import import scene_fps
from .ground_rays import make_ray_cast


def evaluate(
    obj: bpy.types.Object,
    built: BuiltControls,
    instance: ControlInstance,
    pose: AnimatedPose,
    reader: TargetReader,
    frames: np.ndarray | None,
    scene: bpy.types.Scene,
    depsgraph: Any,
) -> tuple[StackResult, dict[str, np.ndarray], FloatArray]:
    """Read the animated pose and the targets in bulk, run the stack once. ``frames`` ``None``:
    the scene's current frame; over frames, targets may be read through ``frame_set``, so the
    caller holds the live preview. Returns the result, the current channels and the frames."""
    assert built.stack is not None
    f = np.array([scene.frame_current_final], dtype=np.float64) if frames is None else frames
    rot, tr, sc, current = pose.at(obj, f)
    places = np.array(obj.matrix_world, dtype=np.float64)[None] if frames is None else object_world_track(obj, f)
    if places is None:  # moved by constraints, drivers or a moving parent: as Blender evaluates it
        places = evaluated_tracks([TargetRef(obj.name)], f)[TargetRef(obj.name)]
    own_world = built.stack.skeleton.forward_kinematics(rot, tr, sc) if reader.own else None
    tracks = reader.tracks(obj, frames, own_world, places)
    reader.seen = (places, tracks)
    set_targets(instance, built, tracks, places, make_ray_cast(scene, depsgraph, built, frames), switched=switch_masks(obj, built, f))
    fps = scene_fps(scene)
    result = instance.evaluate(rot, tr, sc, time=f / fps, placement=places)
    return result, current, f


ENABLED_PATH = re.compile(r"^marionette_controls\.controls\[(\d+)\]\.enabled$")


def switched_rows(obj: bpy.types.Object) -> dict[int, Any]:
    """Rows whose Enabled the object's action keys: row index -> its F-curve (muted curves left out)."""
    action, action_slot = compat.current_action(obj)
    if action is None:
        return {}
    if compat.SLOTTED_ACTIONS and action_slot is None:
        action_slot = compat.action_slot_for(action, obj)
    out = {}
    for fc in compat.action_fcurves(action, action_slot):
        m = ENABLED_PATH.match(fc.data_path)
        if m is not None and not fc.mute and len(fc.keyframe_points):
            out[int(m.group(1))] = fc
    return out


def switch_masks(obj: bpy.types.Object, built: BuiltControls, frames: np.ndarray) -> dict[str, np.ndarray]:
    """Per control whose row's Enabled is keyed, ``(T,)`` whether it is on at each frame."""
    rows = switched_rows(obj)
    return {
        s.name: np.array([rows[s.row].evaluate(float(f)) >= 0.5 for f in frames], dtype=bool) for s in built.specs if s.row in rows
    }


# --- reports ---------------------------------------------------------------------------------


def report_summary(report: ControlReport, kind: str) -> dict[str, Any]:
    """Figures of one control over the frames it ran on, for the panel and the command line."""
    ran = np.asarray(report.ran)
    residual = np.asarray(report.residual, dtype=np.float64)
    out: dict[str, Any] = {
        "frames": int(ran.shape[0]),
        "ran": int(ran.sum()),
        "skipped": int(np.asarray(report.skipped).sum()),
        "converged": int(np.asarray(report.converged).sum()),
        "limited": int(np.asarray(report.limited).sum()),
        "max_residual": float(residual[ran].max()) if ran.any() else 0.0,
        "residual_unit": "rad" if kind == "LOOK_AT" else "units",
    }
    reset = report.details.get("reset") if report.details else None
    if reset is not None:
        reasons = [str(r) for r in np.asarray(reset) if str(r)]
        out["resets"] = {r: reasons.count(r) for r in sorted(set(reasons))}
    steps = report.details.get("step_penetration") if report.details else None
    if steps is not None:
        # Springs: the deepest an end point was inside a collider after any fixed step.
        depth = np.asarray(steps, dtype=np.float64)
        out["max_penetration"] = float(depth[ran].max()) if ran.any() else 0.0
    stop = report.details.get("stop") if report.details else None
    if stop is not None:
        stops = [str(s) for s in np.asarray(stop)]
        out["stops"] = {s: stops.count(s) for s in sorted(set(stops))}
    return out
