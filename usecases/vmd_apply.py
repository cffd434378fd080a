"""A VMD motion applied to a PMX rig imported in Blender (:mod:`.import_pmx`): the motion's keys
become a new Action on the armature, and its IK controls (the Controls stack the importer made)
drive the legs from the keyed IK bones, switched on and off as the motion says.

* Keys: every track naming a bone (by its ``mmd_name``, else its Blender name) is converted to the
  bone's own frame (:func:`..core.formats.vmd_pose.keyed_pose_on`, from the armature's rest as it
  stands: ``R = B^T Q B``, offsets at the rig's ``pmx_scale``) and keyed on every frame from the
  first key to the last, on the scene's rate with the motion's timing kept (MMD counts 30 frames
  per second: VMD frame ``f`` is time ``f / 30`` s, on frame ``1 + f * fps / 30``; the rate is
  recorded as ``marionette_fps``). The IK bones are keyed like any bone; what the legs do is the controls' work,
  in the live preview or Bake Controls.
* IK switches: where the motion's property keys name an IK bone, the control row whose target is
  that bone gets its **Enabled** keyed (constant keys), and the stack reads that key per frame
  (:mod:`..bridge.control_evaluation`): a chain switched off plays its keyed FK.

The user's previous Action is kept. A motion naming none of the rig's bones, or an armature that
is not a PMX rig, is refused before anything changes.
"""

# The bpy stubs type Object.data as a union of every data type; that says nothing about this code.
# mypy: disable-error-code="union-attr"
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import bpy
import numpy as np

from ..bridge import compat
from ..bridge.action_write import write_action
from ..bridge.control_rows import rest_skeleton
from ..bridge.file_import import FPS_PROPERTY, scene_fps
from ..core.errors import ClipError, RigError
from ..core.formats.vmd import FPS, read_vmd
from ..core.formats.vmd_pose import joints_by_name, keyed_pose_on, switch_track
from ..core.rig.clip import Clip
from .import_pmx import NAME_PROPERTY, SCALE_PROPERTY

#: The data path of a control row's Enabled switch.
ENABLED_PATH = "marionette_controls.controls[{}].enabled"


def apply_vmd(obj: Any, path: str | os.PathLike[str], name: str | None = None) -> dict[str, Any]:
    """Key the motion at ``path`` onto the PMX rig ``obj`` as a new Action (see the module
    docstring); returns what was done: the action, frames, keyed bones, switched IKs, unmatched
    tracks."""
    if obj is None or obj.type != "ARMATURE" or obj.get(SCALE_PROPERTY) is None:
        raise RigError(f"{getattr(obj, 'name', obj)!r} is not a PMX rig (import one with Import PMX Rig first)")
    motion = read_vmd(path)
    if not motion.tracks:
        raise ClipError(f"{os.path.basename(os.fspath(path))}: the motion has no bone keys")
    skeleton = rest_skeleton(obj)
    bones = obj.data.bones
    joints = joints_by_name(skeleton, [str(bones[n].get(NAME_PROPERTY, "")) for n in skeleton.names])
    first, last = motion.frame_range
    frames = np.arange(first, last + 1)
    rot, tr, keyed, unmatched = keyed_pose_on(skeleton, joints, float(obj[SCALE_PROPERTY]), motion, frames)
    if not keyed.any():
        raise ClipError(f"{os.path.basename(os.fspath(path))}: none of the motion's {len(motion.tracks)} bones is a bone of {obj.name!r}")
    label = name or Path(os.fspath(path)).stem
    clip = Clip(
        names=skeleton.names, times=(frames - frames[0]) / FPS, fps=FPS, rotations=rot, translations=tr,
        coverage=keyed.astype(np.float64), name=label, first_frame=float(frames[0] + 1),
    )
    fps = scene_fps()
    action = write_action(obj, clip, label, fps=fps)
    action[FPS_PROPERTY] = fps
    switched = _key_switches(obj, action, motion, frames, fps)
    numbers = clip.frame_numbers(fps)
    return {
        "object": obj.name,
        "action": action.name,
        "frames": [float(numbers[0]), float(numbers[-1])],
        "fps": fps,
        "keyed_bones": int(keyed.sum()),
        "switched_ik": switched,
        "unmatched": list(unmatched),
    }


def _key_switches(obj: Any, action: Any, motion: Any, frames: np.ndarray, fps: float) -> list[str]:
    """Constant keys on the Enabled of each IK row whose target bone the motion switches."""
    named = {n.strip() for p in motion.properties for n in p.ik}
    if not named:
        return []
    bones = obj.data.bones
    bag = compat.channelbag(action, compat.current_action(obj)[1] or compat.action_slot_for(action, obj), create=True)
    out = []
    for i, row in enumerate(obj.marionette_controls.controls):
        if row.kind not in ("CCD", "FABRIK", "TWO_BONE_IK") or row.target_object != obj or row.target_bone not in bones:
            continue
        bone = bones[row.target_bone]
        ik_name = str(bone.get(NAME_PROPERTY, bone.name)).strip()
        if ik_name not in named:
            continue
        on = switch_track(motion, ik_name, frames)
        # One key where the switch changes (and on the first frame), held until the next.
        at = np.flatnonzero(np.concatenate([[True], on[1:] != on[:-1]]))
        fc = compat.new_fcurve(bag, ENABLED_PATH.format(i), 0, "Controls")
        fc.keyframe_points.add(at.size)
        co = np.stack([1.0 + frames[at] * fps / FPS, on[at].astype(np.float64)], axis=1).astype(np.float32)
        fc.keyframe_points.foreach_set("co", co.ravel())
        for point in fc.keyframe_points:  # a switch: a few keys
            point.interpolation = "CONSTANT"
        fc.update()
        out.append(row.name)
    return out


def import_with_motion(pmx: str, vmd: str, output: str, *, physics: bool = False, **import_options: Any) -> dict[str, Any]:
    """``import-pmx MODEL --vmd MOTION``: the rig imported into a new file with the motion applied
    (with ``physics``, its rigid bodies too, the simulation's cache over the motion's frames)."""
    from ..bridge.session import fresh_session, save_blend
    from ..core.formats.pmx import read_pmx
    from ..core.formats.pmx_rig import build_rig
    from .import_pmx import create_pmx_armature

    for p in (pmx, vmd):
        if not Path(p).is_file():
            raise FileNotFoundError(f"no such file: {p}")
    model = read_pmx(pmx)
    rig = build_rig(model, **import_options)
    read_vmd(vmd)  # a bad motion is refused before Blender is touched
    fresh_session()
    scene = bpy.context.scene
    scene.render.fps, scene.render.fps_base = int(FPS), 1.0  # a new file: at MMD's own rate
    result = create_pmx_armature(model, rig, scene.collection, physics=physics)
    applied = apply_vmd(result.obj, vmd)
    scene.frame_start, scene.frame_end = (round(f) for f in applied["frames"])
    if physics:
        from ..bridge.rigid_bodies import ensure_world, place_at_first_frame

        ensure_world(scene)
        place_at_first_frame(result.obj, scene)  # the simulation starts on the motion's first pose
    save_blend(output)
    report = result.report()
    report["motion"] = applied
    report["output"] = str(Path(output).resolve())
    return report
