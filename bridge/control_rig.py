"""A control rig read for the control solve (docs/control_rigs.md): the bones, their active
constraints and drivers as :class:`~..core.control_rig.graph.RigGraph`, the pose Blender evaluates
with every control at rest; the rig's switches keyed into a new action; the check that what
Blender plays is what the solve wanted.

Reading the rest pose sets every pose bone's local transform to identity and the plan's switches
for one evaluation, with the object's action and NLA set aside, and puts everything back.
"""

# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

import bpy
import numpy as np

from ..core.control_rig.graph import Link, RigGraph
from ..core.rig.rotations import FloatArray
from . import compat
from .evaluated_pose import _in_view_layer, evaluated_pose_matrices
from .skeleton_read import _armature, _matrices, _skeleton

_BONE_PATH = re.compile(r'^pose\.bones\["((?:[^"\\]|\\.)*)"\]\.?(.*)$')
_TRANSFORM = ("location", "rotation_quaternion", "rotation_euler", "rotation_axis_angle", "scale")


def bone_properties(obj: Any) -> dict[str, set[str]]:
    """Custom property names of every pose bone that has some."""
    out = {}
    for pb in _armature(obj).pose.bones:
        keys = set(pb.keys())
        if keys:
            out[pb.name] = keys
    return out


def _path_bone(path: str) -> tuple[str, str] | None:
    m = _BONE_PATH.match(path)
    if m is None:
        return None
    return re.sub(r"\\(.)", r"\1", m.group(1)), m.group(2)


_MATH = {name: getattr(math, name) for name in ("pi", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sqrt", "exp", "log", "radians", "degrees", "floor", "ceil", "fabs")}
_MATH.update({"min": min, "max": max, "abs": abs, "True": True, "False": False})


def _driver_value(obj: Any, fc: Any) -> float | None:
    """What a driver F-curve gives now (its variables read from ``obj``'s properties, its
    expression or sum, its curve and modifiers), or ``None`` when it reads what this does not."""
    drv = fc.driver
    values = {}
    for v in drv.variables:
        t = v.targets[0]
        if v.type != "SINGLE_PROP" or t.id is None:
            return None
        try:
            values[v.name] = float(t.id.path_resolve(t.data_path))
        except (ValueError, TypeError, AttributeError):
            return None
    vals = list(values.values())
    if drv.type == "SCRIPTED":
        try:
            raw = float(eval(drv.expression, {"__builtins__": {}}, {**_MATH, **values}))  # noqa: S307 - the rig's own expression
        except Exception:
            return None
    elif not vals:
        return None
    else:
        raw = {"SUM": sum(vals), "AVERAGE": sum(vals) / len(vals), "MIN": min(vals), "MAX": max(vals)}.get(drv.type, vals[0])
    if len(fc.keyframe_points) or len(fc.modifiers):
        return float(fc.evaluate(raw))
    return raw


def _driven(obj: Any) -> dict[str, float]:
    """Constraint influences and Armature weights that drivers set, by data path, as they are now."""
    ad = obj.animation_data
    out = {}
    for fc in ad.drivers if ad is not None else ():
        if fc.mute or not (fc.data_path.endswith(".influence") or fc.data_path.endswith(".weight")):
            continue
        value = _driver_value(obj, fc)
        if value is not None:
            out[fc.data_path] = value
    return out


def _link(c: Any, index: dict[str, int], obj: Any, driven: dict[str, float] | None = None, bone: str = "") -> Link | None:
    """One constraint as a model link (influences and weights as ``driven`` says drivers set
    them); ``None`` when it does nothing."""
    at = f'pose.bones["{bpy.utils.escape_identifier(bone)}"].constraints["{bpy.utils.escape_identifier(c.name)}"]'
    driven = driven or {}
    influence = driven.get(at + ".influence", c.influence)
    if c.mute or not c.is_valid or influence <= 0.0:
        return None
    kind = c.type

    def bone_of(target: Any, sub: str) -> int:
        return index.get(sub, -1) if target == obj and sub else -1

    if kind == "ARMATURE":
        weights = [driven.get(f"{at}.targets[{k}].weight", t.weight) for k, t in enumerate(c.targets)]
        targets = tuple((bone_of(t.target, t.subtarget), float(w)) for t, w in zip(c.targets, weights, strict=True) if w != 0.0)
        exact = not c.use_deform_preserve_volume and not c.use_bone_envelopes
        return Link(kind, c.name, float(influence), targets, "WORLD", "REPLACE", exact)
    target = getattr(c, "target", None)
    if target is None and kind not in ("LIMIT_ROTATION", "LIMIT_LOCATION", "LIMIT_SCALE", "LIMIT_DISTANCE"):
        return None  # no target: Blender skips it
    targets = ((bone_of(target, getattr(c, "subtarget", "")), 1.0),) if target is not None else ()
    owner, theirs = getattr(c, "owner_space", "WORLD"), getattr(c, "target_space", "WORLD")
    # Pose space is the armature's: the same as world space for bones of one armature.
    owner, theirs = ("WORLD" if x == "POSE" else x for x in (owner, theirs))
    space = owner if owner == theirs and owner in ("WORLD", "LOCAL") else "OTHER"
    mix = getattr(c, "mix_mode", getattr(c, "limit_mode", "REPLACE"))
    exact = getattr(c, "head_tail", 0.0) == 0.0
    if kind in ("COPY_ROTATION", "COPY_LOCATION"):
        exact = exact and c.use_x and c.use_y and c.use_z and not (c.invert_x or c.invert_y or c.invert_z)
        exact = exact and not getattr(c, "use_offset", False)
    elif kind == "DAMPED_TRACK":
        exact = exact and c.track_axis == "TRACK_Y"
    elif kind == "STRETCH_TO":
        exact = exact and c.keep_axis == "SWING_Y" and not (c.use_bulge_min or c.use_bulge_max) and c.rest_length > 0.0
        return Link(kind, c.name, float(influence), targets, space, "REPLACE", exact, stretch=(float(c.rest_length), c.volume, float(c.bulge)))
    elif kind == "CHILD_OF":
        flags = ("use_location_x", "use_location_y", "use_location_z", "use_rotation_x", "use_rotation_y", "use_rotation_z")
        exact = all(getattr(c, f) for f in flags) and not c.set_inverse_pending
        # In armature space: the inverse sits between the target and the object's placement.
        matrix = np.array(c.inverse_matrix, dtype=np.float64) @ np.array(obj.matrix_world, dtype=np.float64)
        return Link(kind, c.name, float(influence), targets, space, "REPLACE", exact, matrix)
    return Link(kind, c.name, float(influence), targets, space, mix, exact)


def _drivers(obj: Any, index: dict[str, int]) -> list[object]:
    """What drives each bone's transform channels (see :attr:`RigGraph.drivers`)."""
    out: list[object] = [None] * len(index)
    ad = obj.animation_data
    if ad is None:
        return out
    per_bone: dict[int, list[Any]] = {}
    for d in ad.drivers:
        got = _path_bone(d.data_path)
        if d.mute or got is None or got[1] not in _TRANSFORM or got[0] not in index:
            continue
        per_bone.setdefault(index[got[0]], []).append(d)
    for i, ds in per_bone.items():
        sources: set[int] = set()
        copies: set[int] = set()
        plain = True
        for d in ds:
            prop = _path_bone(d.data_path)[1]  # type: ignore[index]
            drv = d.driver
            variables = list(drv.variables)
            for v in variables:
                for t in v.targets:
                    if v.type == "SINGLE_PROP":
                        src = _path_bone(t.data_path or "")
                        if t.id == obj and src is not None and src[0] in index:
                            sources.add(index[src[0]])
                    elif t.id == obj and t.bone_target in index:
                        sources.add(index[t.bone_target])
            one = len(variables) == 1 and (drv.type in ("AVERAGE", "SUM", "MIN", "MAX") or drv.expression.strip() == variables[0].name)
            copied = None
            if one and variables[0].type == "SINGLE_PROP":
                t = variables[0].targets[0]
                src = _path_bone(t.data_path or "")
                if t.id == obj and src is not None and src[0] in index and src[1] == f"{prop}[{d.array_index}]":
                    copied = index[src[0]]
            if copied is None:
                plain = False
            else:
                copies.add(copied)
        what = ", ".join(sorted({_path_bone(d.data_path)[1] for d in ds}))  # type: ignore[index]
        copy_of = next(iter(copies)) if plain and len(copies) == 1 else -1
        out[i] = (copy_of, tuple(sorted(sources)), f"drivers set its {what}")
    return out


#: Settings of a constraint that shape what it does (those present on each kind are read).
_SETTINGS = (
    "type", "mute", "influence", "subtarget", "owner_space", "target_space", "mix_mode", "head_tail", "use_x", "use_y", "use_z",
    "invert_x", "invert_y", "invert_z", "use_offset", "track_axis", "keep_axis", "volume", "bulge", "rest_length", "limit_mode",
    "distance", "chain_count", "pole_subtarget", "use_deform_preserve_volume", "use_bone_envelopes", "set_inverse_pending",
)
_GRAPHS: dict[Any, RigGraph] = {}


def _fingerprint(obj: Any, switches: tuple[tuple[str, str, float], ...]) -> Any:
    """Everything :func:`read_graph` reads, cheaply: bones, rests, constraints' settings and
    targets, drivers, the pose bones' custom properties, the switches."""
    bones = obj.data.bones
    n = len(bones)
    rest = np.empty(n * 16, dtype=np.float32)
    bones.foreach_get("matrix_local", rest)
    flags = np.empty(n, dtype=bool)
    bones.foreach_get("use_local_location", flags)
    parts: list[Any] = [obj.session_uid, obj.name, switches, rest.tobytes(), flags.tobytes()]
    for b in bones:
        parts.append((b.name, b.parent.name if b.parent else None, b.use_deform))
    for pb in obj.pose.bones:
        parts.append((pb.custom_shape is not None, tuple(sorted((k, repr(pb[k])) for k in pb.keys()))))
        for c in pb.constraints:
            parts.append(tuple(repr(getattr(c, a, None)) for a in _SETTINGS))
            target = getattr(c, "target", None)
            parts.append(target.name if target is not None else None)
            if c.type == "ARMATURE":
                parts.append(tuple((t.target.name if t.target else None, t.subtarget, t.weight) for t in c.targets))
            if c.type == "CHILD_OF":
                parts.append(tuple(np.array(c.inverse_matrix).ravel().tolist()))
    ad = obj.animation_data
    for d in ad.drivers if ad is not None else ():
        drv = d.driver
        parts.append((d.data_path, d.array_index, d.mute, drv.type, drv.expression, len(d.keyframe_points), len(d.modifiers)))
        for v in drv.variables:
            parts.append(tuple((v.name, v.type, t.id.name if t.id else None, t.data_path, t.bone_target, t.transform_type) for t in v.targets))
    parts.append(tuple(np.array(obj.matrix_world).ravel().tolist()))
    return hash(tuple(parts))


def read_graph(obj: Any, switches: Iterable[tuple[str, str, float]] = ()) -> RigGraph:
    """``obj`` as a :class:`RigGraph`, evaluated with every pose bone's local transform at
    identity and ``switches`` (``(bone, property, value)``) set; the object is left as it was.
    A rig read before and not changed since (its bones, rests, constraints, drivers, custom
    properties) is not evaluated again."""
    obj = _armature(obj)
    _in_view_layer(obj)
    switches = tuple(switches)
    key = _fingerprint(obj, switches)
    if key not in _GRAPHS:
        if len(_GRAPHS) >= 8:
            _GRAPHS.pop(next(iter(_GRAPHS)))
        _GRAPHS[key] = _read_graph(obj, switches)
    return _GRAPHS[key]


def _read_graph(obj: Any, switches: tuple[tuple[str, str, float], ...]) -> RigGraph:
    pbs = obj.pose.bones
    n = len(pbs)
    names = [pb.name for pb in pbs]
    index = {nm: i for i, nm in enumerate(names)}
    bones = obj.data.bones
    parents = np.array([index[b.parent.name] if b.parent is not None else -1 for b in (bones[nm] for nm in names)])
    buf = np.empty(n * 16, dtype=np.float32)
    rest = np.array([np.array(bones[nm].matrix_local, dtype=np.float64) for nm in names])
    pbs.foreach_get("matrix_basis", buf)
    kept_basis = buf.copy()
    kept_props = []
    for bone, prop, value in switches:
        pb = pbs.get(bone)
        if pb is not None and prop in pb.keys():
            kept_props.append((pb, prop, pb[prop]))
            pb[prop] = type(pb[prop])(value) if isinstance(pb[prop], (int, float)) else value
        elif pb is not None and hasattr(pb, prop):
            kept_props.append((pb, prop, getattr(pb, prop)))
            setattr(pb, prop, value)
    ad = obj.animation_data
    kept_anim = (ad.action, getattr(ad, "action_slot", None), ad.use_nla) if ad is not None else None
    try:
        if ad is not None:
            ad.action = None
            ad.use_nla = False
        pbs.foreach_set("matrix_basis", np.tile(np.eye(4, dtype=np.float32).ravel(), n))
        bpy.context.view_layer.update()
        ev = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
        epbs = ev.pose.bones
        epbs.foreach_get("matrix", buf)
        posed = _matrices(buf, n)
        epbs.foreach_get("matrix_basis", buf)
        rest_basis = _matrices(buf, n)
        links = _links(obj, names, index)
    finally:
        pbs.foreach_set("matrix_basis", kept_basis)
        for pb, prop, value in kept_props:
            if prop in pb.keys():
                pb[prop] = value
            else:
                setattr(pb, prop, value)
        if ad is not None and kept_anim is not None:
            compat.assign_action(obj, kept_anim[0], kept_anim[1])
            ad.use_nla = kept_anim[2]
        bpy.context.view_layer.update()
    drivers = _drivers(obj, index)
    shaped = np.array([pb.custom_shape is not None for pb in pbs])
    deform = np.array([bones[nm].use_deform for nm in names])
    free = np.array([not links[i] and drivers[i] is None for i in range(n)])
    controls = free & (shaped if shaped.any() else ~deform)
    local_location = np.array([bones[nm].use_local_location for nm in names])
    return RigGraph(
        tuple(names), parents, rest, posed, rest_basis, links, tuple(drivers), controls, deform, local_location=local_location
    )


def _links(obj: Any, names: Sequence[str], index: dict[str, int]) -> tuple[tuple[Link, ...], ...]:
    """Every bone's constraints as links, with the influences and weights drivers give now."""
    driven = _driven(obj)
    out = []
    for nm in names:
        row = [k for k in (_link(c, index, obj, driven, nm) for c in obj.pose.bones[nm].constraints) if k is not None]
        out.append(tuple(row))
    return tuple(out)


def key_switches(obj: Any, action: Any, switches: Iterable[tuple[str, str, float]], frames: Any) -> list[str]:
    """Key each ``(bone, property, value)`` switch (a custom property of the pose bone, or one of
    its own settings such as ``ik_stretch``) at the first and last of ``frames`` (constant), in
    the bone's group of ``action``; the data paths keyed."""
    f = np.asarray(frames, dtype=np.float64).reshape(-1)
    ends = sorted({float(f[0]), float(f[-1])})
    bag = compat.channelbag(action, compat.action_slot_for(action, obj), create=True)
    done = []
    for bone, prop, value in switches:
        pb = obj.pose.bones.get(bone)
        at = f'pose.bones["{bpy.utils.escape_identifier(bone)}"]'
        if pb is not None and prop in pb.keys():
            path = f'{at}["{bpy.utils.escape_identifier(prop)}"]'
        elif pb is not None and hasattr(pb, prop):
            path = f"{at}.{prop}"
        else:
            continue
        curve = compat.new_fcurve(bag, path, 0, bone)
        curve.keyframe_points.add(len(ends))
        curve.keyframe_points.foreach_set("co", np.array([[e, value] for e in ends], dtype=np.float32).ravel())
        curve.keyframe_points.foreach_set("interpolation", [0] * len(ends))  # CONSTANT
        curve.update()
        done.append(path)
    return done


def bone_placements(obj: Any, frames: Any, names: Sequence[str]) -> FloatArray:
    """Evaluated armature-space placements ``(T, len(names), 4, 4)`` of bones ``names`` at
    ``frames`` (the scene's current frame restored)."""
    skeleton = _skeleton(_armature(obj))
    return evaluated_pose_matrices(obj, frames, skeleton)[:, [skeleton.index(n) for n in names]]
