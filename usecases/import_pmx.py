"""Import a PMX (MikuMikuDance) model's rig: an armature with the model's IK chains, inheritance
("append"/"grant") and fixed axes as controls of the object's stack.

The file is read and converted in ``core`` (:mod:`..core.formats.pmx`, :mod:`..core.formats.pmx_rig`) before
anything in Blender changes; a file that cannot be read or converted is refused with nothing
created. No mesh is imported: this is the rig, for retargeting and controls.

Names. A bone's Blender name is its Japanese name (MMD's own key: motion files name bones by it,
and Marionette's humanoid mapper knows MMD's Japanese names); the English name, often empty or
shared between bones in real models, could not serve as a key. Both stay on each bone as custom
properties ``mmd_name`` and ``mmd_name_english`` (``mmd_name`` is the whole name even where Blender's
63-byte limit or a twin forced a shorter or suffixed bone name). The importer can use the English
names instead where the model gives every bone a distinct one.

Controls. They are stored as rows of ``object.marionette_controls`` (:mod:`..properties.control_settings`),
the per-object definitions the Controls panel, the live preview and Bake Controls build their
stack from (:func:`..bridge.control_rows.build_controls`): one CCD row per IK bone (the IK bone of this
armature is its target; its links' limits are the bones' IK limits, Use Bone IK Limits on), one
Inheritance row per append bone and one Fixed Axis row per fixed-axis bone, in MMD's evaluation
order as priorities. What a row cannot hold is reported, not stored silently wrong:

* Blender's bone IK limits always contain 0 (``ik_min`` <= 0 <= ``ik_max``), so a range such as
  a knee's [0.5, 180] degrees is stored as [0, 180];
* a chain whose target bone is not a child of its last link (the core carries it at a rest
  offset; a row's end point is a bone) and a fixed axis that is not one of its bone's axes are
  not stored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bpy
import numpy as np

from ..bridge.action_write import create_armature
from ..bridge.rigid_bodies import AFTER_PHYSICS_PROPERTY, build_rigid_bodies
from ..bridge.session import fresh_session, save_blend
from ..core.controls.stack import FixedAxisControl, IKControl, InheritControl
from ..core.errors import RigError
from ..core.formats.pmx import BoneFlag, PmxModel, read_pmx
from ..core.formats.pmx_physics import build_physics
from ..core.formats.pmx_rig import DEFAULT_SCALE, PmxRig, build_rig

NAME_PROPERTY = "mmd_name"
ENGLISH_PROPERTY = "mmd_name_english"
#: Object properties recording where the rig came from.
SOURCE_PROPERTY = "pmx_file"
SCALE_PROPERTY = "pmx_scale"

_AXES = {"POS_X": (1.0, 0.0, 0.0), "NEG_X": (-1.0, 0.0, 0.0), "POS_Y": (0.0, 1.0, 0.0), "NEG_Y": (0.0, -1.0, 0.0), "POS_Z": (0.0, 0.0, 1.0), "NEG_Z": (0.0, 0.0, -1.0)}


@dataclass
class PmxImport:
    """What an import made: the armature object, the rig it was built from, and what the model
    has that the armature does not carry (core conversion notes, then storage notes)."""

    obj: Any
    rig: PmxRig
    model: PmxModel
    notes: list[str] = field(default_factory=list)
    #: The rigid bodies and joints built with ``physics=True`` (else ``None``).
    physics: Any = None

    def report(self) -> dict[str, Any]:
        kinds = {"IKControl": "ik", "InheritControl": "inherit", "FixedAxisControl": "fixed_axis"}
        rows = list(self.obj.marionette_controls.controls)
        return {
            "file": self.model.path,
            "object": self.obj.name,
            "model": {"name": self.model.name, "name_english": self.model.name_english, "version": self.model.version, "bones": len(self.model.bones)},
            "scale": self.rig.scale,
            "bones": len(self.rig.skeleton),
            "controls": {
                kind: sum(1 for c in self.rig.stack.controls if kinds[type(c).__name__] == kind) for kind in ("ik", "inherit", "fixed_axis")
            },
            "stored_controls": [{"name": r.name, "kind": r.kind, "priority": int(r.priority)} for r in rows],
            "notes": list(self.notes),
            **({} if self.physics is None else {"physics": self.physics_report()}),
        }

    def physics_report(self) -> dict[str, Any]:
        p = self.physics
        modes = [int(o["pmx_body_mode"]) for o in p.bodies]
        return {
            "collection": p.collection.name,
            "bodies": len(p.bodies),
            "kinematic": modes.count(0),
            "dynamic": modes.count(1),
            "dynamic_bone_position": modes.count(2),
            "joints": len(p.joints),
            "non_collision_pairs": len(p.non_collision),
            "bones_written_back": sorted(p.carried),
        }


def controls_available() -> bool:
    """Whether the per-object control rows exist (the Controls workflow is registered)."""
    return hasattr(bpy.types.Object, "marionette_controls")


def import_pmx_rig(
    path: str | Path, *, scale: float = DEFAULT_SCALE, names: str = "japanese", collection: Any = None, physics: bool = False
) -> PmxImport:
    """Read ``path``, build its rig and an armature with its controls in ``collection`` (default:
    the active one); with ``physics``, its rigid bodies and joints too
    (:mod:`..bridge.rigid_bodies`). Refuses (:class:`~..core.errors.MarionetteError`) before
    changing anything."""
    model = read_pmx(path)
    return create_pmx_armature(model, build_rig(model, scale=scale, names=names), collection, physics=physics)


def create_pmx_armature(model: PmxModel, rig: PmxRig, collection: Any = None, *, physics: bool = False) -> PmxImport:
    """The armature of an already built rig, its names kept and its controls stored; with
    ``physics`` its rigid bodies and joints in the scene's rigid-body world."""
    converted = build_physics(model, rig.scale) if physics else None
    if not controls_available():
        raise RigError("the Controls workflow is not registered; the rig's controls would have nowhere to go")
    name = model.name.strip() or Path(model.path).stem
    obj = create_armature(rig.skeleton, name, tails=rig.tails, collection=collection)
    try:
        notes = list(rig.notes)
        _keep_names(obj, rig)
        notes += _store_controls(obj, rig)
        obj[SOURCE_PROPERTY] = str(Path(model.path).resolve())
        obj[SCALE_PROPERTY] = rig.scale
        obj[AFTER_PHYSICS_PROPERTY] = [
            rig.skeleton.names[j] for j, b in enumerate(rig.pmx_index) if model.bones[b].flags & BoneFlag.AFTER_PHYSICS
        ]
        built = None
        if converted is not None:
            bone_names = {rig.pmx_index[j]: nm for j, nm in enumerate(rig.skeleton.names)}
            built = build_rigid_bodies(obj, converted, bone_names, collection)
            notes += built.notes
    except Exception:
        # Half an import is worse than none: the armature goes with whatever failed.
        arm = obj.data
        bpy.data.objects.remove(obj)
        bpy.data.armatures.remove(arm)
        raise
    return PmxImport(obj, rig, model, notes, built)


def _keep_names(obj: Any, rig: PmxRig) -> None:
    bones = obj.data.bones
    for j, bone_name in enumerate(rig.skeleton.names):
        b = bones[bone_name]
        b[NAME_PROPERTY] = rig.japanese[j]
        b[ENGLISH_PROPERTY] = rig.english[j]


def _store_controls(obj: Any, rig: PmxRig) -> list[str]:
    """One row per control of the rig's stack (run order); returns what could not be stored."""
    sk = rig.skeleton
    names = sk.names
    rows = obj.marionette_controls.controls
    notes: list[str] = []
    for control in rig.stack.controls:
        if isinstance(control, IKControl):
            path = control.path
            if path.end_joint < 0:
                notes.append(f"{control.name}: its end point is not a bone's head; the chain is not stored as a control")
                continue
            notes += _set_ik_limits(obj, rig, control)
            row = rows.add()
            row.name = control.name
            row.kind = "CCD"
            row.bone_start = names[path.joints[0]]
            row.bone_end = names[path.joints[-1]]
            row.end_bone = names[path.end_joint]
            row.target_object = obj
            row.target_bone = names[rig.ik_targets[control.name]]
            row.max_passes = control.max_passes
            row.tolerance = control.tolerance
            row.use_bone_limits = control.limits is not None
            row.priority = control.priority
        elif isinstance(control, InheritControl):
            (grant,) = control.inheritance.grants
            row = rows.add()
            row.name = control.name
            row.kind = "INHERIT"
            row.bone_start = row.bone_end = names[grant.target]
            row.source_bone = names[grant.source]
            row.rotation_fraction = grant.rotation
            row.translation_fraction = grant.translation
            row.priority = control.priority
        elif isinstance(control, FixedAxisControl):
            axis = control.axes.axes[0]
            key = next((k for k, v in _AXES.items() if np.abs(axis - np.array(v)).max() < 1e-9), None)
            if key is None:
                notes.append(f"{control.name}: the axis is not one of the bone's own axes; it is not stored as a control")
                continue
            row = rows.add()
            row.name = control.name
            row.kind = "FIXED_AXIS"
            row.bone_start = row.bone_end = names[control.axes.joints[0]]
            row.twist_axis = key
            row.priority = control.priority
    return notes


def _set_ik_limits(obj: Any, rig: PmxRig, control: IKControl) -> list[str]:
    """The chain's link limits as its bones' IK limits: an axis at [0, 0] locked, a limited axis
    widened to contain 0 where needed (Blender's IK limits always do), a free one left free."""
    notes = []
    bounds = rig.link_bounds[control.name]
    for j, bound in zip(control.path.joints, bounds, strict=True):
        if bound is None:
            continue
        pb = obj.pose.bones[rig.skeleton.names[j]]
        lo, hi = bound
        for i, axis in enumerate("xyz"):
            a, b = float(lo[i]), float(hi[i])
            if a == 0.0 and b == 0.0:
                setattr(pb, f"lock_ik_{axis}", True)
            elif a > -math.pi or b < math.pi:
                setattr(pb, f"use_ik_limit_{axis}", True)
                setattr(pb, f"ik_min_{axis}", _within_half_turn(min(a, 0.0)))
                setattr(pb, f"ik_max_{axis}", _within_half_turn(max(b, 0.0)))
                if a > 0.0 or b < 0.0:
                    notes.append(
                        f"{control.name}: bone {pb.name!r} may turn {math.degrees(a):.1f} to {math.degrees(b):.1f} degrees about "
                        f"its {axis.upper()} axis; Blender's IK limits hold {math.degrees(min(a, 0.0)):.1f} to {math.degrees(max(b, 0.0)):.1f}"
                    )
    return notes


def _within_half_turn(angle: float) -> float:
    """``angle`` as the float32 Blender stores, inside [-pi, pi]: float32's nearest value to pi
    lies just above pi, which limits built from the bone refuse, so a half turn is stored one
    float32 step inside it (2.4e-7 rad)."""
    v = np.float32(angle)
    edge = np.float32(math.pi)
    if abs(float(v)) > math.pi:
        v = np.copysign(np.nextafter(edge, np.float32(0.0)), v)
    return float(v)


def import_pmx_file(path: str, output: str, *, scale: float = DEFAULT_SCALE, names: str = "japanese", physics: bool = False) -> dict[str, Any]:
    """The ``import-pmx`` job: a new empty file holding the rig of ``path``, saved to ``output``;
    returns the report. A file that cannot be read is refused before anything is written.
    The Controls workflow must be registered (the command line registers it for the job)."""
    src = Path(path)
    if not src.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    model = read_pmx(src)
    rig = build_rig(model, scale=scale, names=names)  # a bad file is refused before Blender is touched
    fresh_session()
    scene = bpy.context.scene
    assert scene is not None
    result = create_pmx_armature(model, rig, scene.collection, physics=physics)
    save_blend(output)
    report = result.report()
    report["output"] = str(Path(output).resolve())
    return report

