"""An armature object's control rows (``object.marionette_controls``) read into one core
:class:`~marionette.core.controls.stack.ControlStack`, with what the Blender layer feeds each
control (:class:`ControlSpec`: its targets by name, its ground collection). A row that cannot be
built is reported with the reason and left out of the stack."""

# The bpy stubs type Object.data as a union of every data type, context members as optional and
# many RNA functions as returning None; those reports say nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import bpy
import numpy as np

from ..core.controls.chains import JointPath
from ..core.controls.colliders import Collider, ColliderGroup
from ..core.controls.joint_limits import ConeLimit, HingeLimit, JointLimit, link_limit
from ..core.controls.look_at import LookAtChain
from ..core.controls.stack import Control, ControlStack, IKControl, LookAtControl
from ..core.errors import MarionetteError, RigError
from ..core.rig.rotations import FloatArray
from ..core.rig.skeleton import Skeleton
from .control_kinds import AXIS_VECTORS, CLOSURE_SOLVERS, IK_KINDS, LOOK_AT_BONES
from .skeleton_read import rest_heads_tails


def rest_skeleton(obj: bpy.types.Object) -> Skeleton:
    """The armature's bones as a core skeleton (rests from ``bone.matrix_local``, placement the
    object's world matrix as it stands), without updating the view layer: safe while drawing."""
    bones = obj.data.bones
    n = len(bones)
    buf = np.empty(n * 16, dtype=np.float32)
    bones.foreach_get("matrix_local", buf)
    rest = buf.reshape(n, 4, 4).transpose(0, 2, 1).astype(np.float64)
    parents: list[int | str | None] = [b.parent.name if b.parent is not None else None for b in bones]
    return Skeleton.from_rest_matrices([b.name for b in bones], parents, rest, np.array(obj.matrix_world, dtype=np.float64))


@dataclass(frozen=True)
class TargetRef:
    """An object, or a bone of an armature object, by name."""

    object_name: str
    bone: str = ""

    def describe(self) -> str:
        return f"{self.object_name!r}" + (f" bone {self.bone!r}" if self.bone else "")


@dataclass
class ControlSpec:
    """How the Blender layer feeds one core control: its targets and ground settings."""

    name: str
    row: int
    kind: str
    target: TargetRef | None = None
    pole: TargetRef | None = None
    second: TargetRef | None = None
    orient: bool = False
    ground_collection: str = ""


@dataclass
class BuiltControls:
    """The core stack built from an object's control rows; rows that could not be built are in
    ``errors`` (row index -> reason) and left out of the stack."""

    stack: ControlStack | None
    specs: list[ControlSpec]
    errors: dict[int, str]
    #: Every joint some control may rotate / move.
    rot_joints: tuple[int, ...] = ()
    tr_joints: tuple[int, ...] = ()
    #: Objects whose geometry ground rays pass through (the character's own meshes).
    own_meshes: frozenset[str] = field(default_factory=frozenset)

    def spec_of_row(self, row: int) -> ControlSpec | None:
        return next((s for s in self.specs if s.row == row), None)


def _ref(obj: Any, bone: str) -> TargetRef | None:
    return None if obj is None else TargetRef(obj.name, bone if obj.type == "ARMATURE" else "")


def own_meshes(arm: bpy.types.Object) -> frozenset[str]:
    """Objects deformed by or parented (at any depth) to the armature: the character itself."""
    out = set()
    for o in bpy.data.objects:
        if o == arm:
            continue
        p = o.parent
        while p is not None and p != arm:
            p = p.parent
        if p == arm or any(m.type == "ARMATURE" and m.object == arm for m in getattr(o, "modifiers", ())):
            out.add(o.name)
    out.add(arm.name)
    return frozenset(out)


def _unique_names(rows: Sequence[Any]) -> list[str]:
    seen: dict[str, int] = {}
    for r in rows:
        seen[r.name] = seen.get(r.name, 0) + 1
    return [r.name if seen[r.name] == 1 and r.name else f"{r.name or 'Control'} #{i + 1}" for i, r in enumerate(rows)]


class _RowError(MarionetteError):
    pass


def _bone(skeleton: Skeleton, name: str, what: str) -> int:
    if not name:
        raise _RowError(f"pick the {what}")
    j = skeleton.find(name)
    if j is None:
        raise _RowError(f"the {what} {name!r} is not a bone of this armature")
    return j


def _chain(skeleton: Skeleton, start: str, end: str, what: str = "chain") -> list[int]:
    a = _bone(skeleton, start, f"first bone of the {what}")
    b = _bone(skeleton, end or start, f"last bone of the {what}")
    try:
        return skeleton.chain(a, b)
    except RigError as exc:
        raise _RowError(f"the {what} must run down through parents: {exc}") from exc


def _tail_path(skeleton: Skeleton, lengths: FloatArray, joints: list[int]) -> JointPath:
    """Path over ``joints`` whose end point is the last bone's tail (Blender bones: +Y)."""
    return JointPath.between(skeleton, joints[0], joints[-1], end_offset=[0.0, float(lengths[joints[-1]]), 0.0])


def _ik_limits(obj: bpy.types.Object, skeleton: Skeleton, joints: list[int]) -> tuple[JointLimit | None, ...] | None:
    """Each bone's Blender IK locks and limits as an Euler box on its local rotation."""
    out: list[JointLimit | None] = []
    for j in joints:
        pb = obj.pose.bones[skeleton.names[j]]
        lo, hi = np.full(3, -math.pi), np.full(3, math.pi)
        any_limit = False
        for i, axis in enumerate("xyz"):
            if getattr(pb, f"lock_ik_{axis}"):
                lo[i] = hi[i] = 0.0
                any_limit = True
            elif getattr(pb, f"use_ik_limit_{axis}"):
                # Blender stores 180 degrees as a float32 just above pi: clamp into the circle.
                lo[i] = max(-math.pi, getattr(pb, f"ik_min_{axis}"))
                hi[i] = min(math.pi, getattr(pb, f"ik_max_{axis}"))
                any_limit = True
        # One free axis (a knee) is a hinge, which the solvers honour far better than a box.
        out.append(link_limit(lo, hi) if any_limit else None)
    return tuple(out) if any(x is not None for x in out) else None


def _row_limits(obj: bpy.types.Object, skeleton: Skeleton, joints: list[int], row: Any) -> tuple[JointLimit | None, ...] | None:
    """The limits of a chain's joints from a control row: the Bone IK Limits when asked for,
    replaced by the cone on the first bone and the hinge on the bones after it when those are on."""
    limits: list[JointLimit | None] = [None] * len(joints)
    if row.use_bone_limits:
        limits = list(_ik_limits(obj, skeleton, joints) or limits)
    if row.use_cone_limit:
        twist = float(row.cone_twist)
        limits[0] = ConeLimit(np.array([0.0, 1.0, 0.0]), float(row.cone_angle), -twist, twist)
    if row.use_hinge_limit:
        if row.hinge_min > row.hinge_max:
            raise _RowError("the hinge's minimum must not exceed its maximum")
        for k in range(1, len(joints)):
            limits[k] = HingeLimit(np.array(AXIS_VECTORS[row.hinge_axis], dtype=np.float64), float(row.hinge_min), float(row.hinge_max))
    return tuple(limits) if any(x is not None for x in limits) else None


def rig_forward(skeleton: Skeleton, tails: FloatArray) -> FloatArray:
    """The rig's rest forward in armature space: from the legs' knees and feet when the
    humanoid mapper finds them, else Blender's convention (-Y)."""
    from ..core.mapping.auto_map import auto_map_skeleton
    from ..core.retarget.facing import Leg, infer_facing

    heads = skeleton.rest_placements()[:, :3, 3]
    try:
        mapping = auto_map_skeleton(skeleton, tails)
        s = {k: skeleton.index(v.bone) for k, v in mapping.slots.items()}
        legs = [
            Leg(heads[s[f"thigh.{x}"]], heads[s[f"shin.{x}"]], heads[s[f"foot.{x}"]], heads[s[f"toes.{x}"]] if f"toes.{x}" in s else None)
            for x in ("L", "R")
            if all(f"{p}.{x}" in s for p in ("thigh", "shin", "foot"))
        ]
        if "hips" in s and "head" in s and legs:
            facing = infer_facing(heads[s["hips"]], heads[s["head"]], legs)
            if facing.forward is not None:
                f = np.asarray(facing.forward, dtype=np.float64)
                f = f - f[2] * np.array([0.0, 0.0, 1.0])
                if np.linalg.norm(f) > 1e-6:
                    return f / np.linalg.norm(f)
    except MarionetteError:
        pass
    return np.array([0.0, -1.0, 0.0])


#: Collider kinds of the properties, as the core names them.
COLLIDER_KINDS = {
    "SPHERE": "sphere", "CAPSULE": "capsule", "PLANE": "plane", "INSIDE_SPHERE": "inside_sphere", "INSIDE_CAPSULE": "inside_capsule",
}


@dataclass(frozen=True)
class ColliderSet:
    """The object's colliders as core groups, and why the groups that hold a collider that
    cannot be built are refused (group name -> reason)."""

    groups: tuple[ColliderGroup, ...]
    errors: dict[str, str]


def read_colliders(obj: bpy.types.Object, skeleton: Skeleton) -> ColliderSet:
    """``obj.marionette_controls.colliders`` as core collider groups (a collider on a missing
    bone, or of no size, refuses its group with the reason)."""
    by_group: dict[str, list[Collider]] = {}
    errors: dict[str, str] = {}
    for c in obj.marionette_controls.colliders:
        group = c.group.strip()
        by_group.setdefault(group, [])
        kind = COLLIDER_KINDS[c.kind]
        try:
            if not c.bone:
                raise _RowError(f"collider {c.name!r}: pick its bone")
            extra = {"normal": tuple(c.tail)} if kind == "plane" else {"tail": tuple(c.tail)}
            by_group[group].append(
                Collider.build(skeleton, kind, c.bone, offset=tuple(c.offset), radius=float(c.radius), name=c.name, **extra)
            )
        except MarionetteError as exc:
            errors.setdefault(group, str(exc))
    return ColliderSet(tuple(ColliderGroup(g, tuple(cs)) for g, cs in by_group.items()), errors)


def _spring_colliders(row: Any, colliders: ColliderSet) -> tuple[Collider, ...]:
    from ..core.controls.colliders import select_groups

    names = [n.strip() for n in row.collider_groups.split(",") if n.strip()]
    for n in names:
        if n in colliders.errors:
            raise _RowError(colliders.errors[n])
    try:
        return select_groups(colliders.groups, names)
    except RigError as exc:
        raise _RowError(str(exc)) from exc


def _build_row(
    obj: bpy.types.Object, skeleton: Skeleton, lengths: FloatArray, row: Any, name: str, index: int, forward: Callable[[], FloatArray],
    colliders: Callable[[], ColliderSet] | None = None,
) -> tuple[Control, ControlSpec]:
    kind = row.kind
    spec = ControlSpec(name=name, row=index, kind=kind)
    common = {"name": name, "priority": int(row.priority), "weight": float(row.weight)}
    if kind in IK_KINDS:
        joints = _chain(skeleton, row.bone_start, row.bone_end)
        if kind == "TWO_BONE_IK" and len(joints) != 2:
            raise _RowError(f"a two-bone chain has 2 bones; {row.bone_start!r} to {row.bone_end!r} has {len(joints)} (use FABRIK or CCD)")
        if row.end_bone:
            end = _bone(skeleton, row.end_bone, "end bone")
            if int(skeleton.parents[end]) != joints[-1]:
                raise _RowError(f"the end bone {row.end_bone!r} must be a child of {skeleton.names[joints[-1]]!r}")
            path = JointPath.between(skeleton, joints[0], joints[-1], end=end)
        else:
            if row.orient_end:
                raise _RowError("Match Target Rotation needs an End Bone (the bone that takes the rotation)")
            path = _tail_path(skeleton, lengths, joints)
        if row.target_object is None:
            raise _RowError("pick a target (an object, or an armature and a bone)")
        limits = _row_limits(obj, skeleton, joints, row)
        control: Control = IKControl(
            path=path,
            solver={"TWO_BONE_IK": "two_bone", "FABRIK": "fabrik", "CCD": "ccd"}[kind],
            smooth_time=float(row.smooth_time),
            tolerance=float(row.tolerance),
            max_passes=int(row.max_passes),
            limits=limits,
            orient_end=bool(row.orient_end),
            **common,
        )
        spec.target = _ref(row.target_object, row.target_bone)
        spec.pole = _ref(row.pole_object, row.pole_bone)
        spec.orient = bool(row.orient_end)
        return control, spec
    if kind == "LOOK_AT":
        joints = _chain(skeleton, row.bone_start, row.bone_end)
        if row.target_object is None:
            raise _RowError("pick a target to look at")
        head = skeleton.rest_placements()[joints[-1], :3, :3]
        facing = AXIS_VECTORS.get(row.facing_axis) or tuple(np.linalg.solve(head, forward()))
        up = AXIS_VECTORS.get(row.up_axis) or tuple(np.linalg.solve(head, np.array([0.0, 0.0, 1.0])))
        space: int | None
        if row.space_bone:
            space = _bone(skeleton, row.space_bone, "limits space bone")
        else:
            p = int(skeleton.parents[joints[0]])
            space = p if p >= 0 else None
        if len(joints) > LOOK_AT_BONES:
            raise _RowError(f"a look-at chain has at most {LOOK_AT_BONES} bones; {row.bone_start!r} to {row.bone_end!r} has {len(joints)}")
        # Each bone's share of the turn, first bone first (by default the head takes the
        # largest share, the bones above it less and less).
        weights = np.array(row.look_weights[: len(joints)], dtype=np.float64)
        try:
            chain = LookAtChain.build(
                skeleton, joints, weights=weights, facing_axis=facing, up_axis=up, space_joint=space,
                yaw_limits=(float(row.yaw_min), float(row.yaw_max)), pitch_limits=(float(row.pitch_min), float(row.pitch_max)),
                behind_falloff=bool(row.look_ease_behind),
            )
        except RigError as exc:
            raise _RowError(str(exc)) from exc
        control = LookAtControl(chain=chain, smooth_time=float(row.smooth_time), **common)
        spec.target = _ref(row.target_object, row.target_bone)
        return control, spec
    return _build_secondary(obj, skeleton, lengths, row, spec, common, forward, colliders or (lambda: read_colliders(obj, skeleton)))


def _build_secondary(
    obj: bpy.types.Object, skeleton: Skeleton, lengths: FloatArray, row: Any, spec: ControlSpec, common: dict[str, Any],
    forward: Callable[[], FloatArray], colliders: Callable[[], ColliderSet],
) -> tuple[Control, ControlSpec]:
    """Ground feet, springs, inheritance, fixed axes and closures (docs/controls.md#kinds)."""
    from ..core.controls import stack as cc

    kind = row.kind
    if kind == "GROUND":
        from ..core.controls.ground import GroundRig

        legs = []
        for start, end, side in ((row.bone_start, row.bone_end, "left leg"), (row.second_start, row.second_end, "right leg")):
            if not start and not end:
                continue
            joints = _chain(skeleton, start, end, side)
            if len(joints) != 3:
                raise _RowError(f"the {side} runs from the thigh down to the foot (3 bones); it has {len(joints)}")
            legs.append(tuple(joints))
        if not legs:
            raise _RowError("pick the leg bones (thigh to foot)")
        pelvis = _bone(skeleton, row.pelvis_bone, "pelvis") if row.pelvis_bone else None
        settings = {
            "pelvis": pelvis, "up": (0.0, 0.0, 1.0), "floor": float(row.floor_height), "probe_height": float(row.probe_height),
            "max_offset": float(row.max_offset), "max_tilt": float(row.max_tilt),
        }
        try:  # the facing from the feet and knees, as the core infers it ...
            rig = GroundRig.build(skeleton, legs, **settings)
        except RigError:  # ... or, when they do not tell, from the whole rig
            rig = GroundRig.build(skeleton, legs, forward=forward(), **settings)
        spec.ground_collection = row.ground_collection.name if row.ground_collection is not None else ""
        return cc.GroundControl(rig=rig, smooth_time=float(row.smooth_time), pelvis_smooth_time=float(row.pelvis_smooth_time), **common), spec
    if kind == "SPRING":
        from ..core.controls.springs import SpringChain
        from ..core.controls.wind import Wind

        joints = _chain(skeleton, row.bone_start, row.bone_end)
        center = _bone(skeleton, row.center_bone, "center bone") if row.center_bone else -1
        if center in joints:
            raise _RowError(f"the center bone {row.center_bone!r} is one of the chain's own bones; pick one above it (the hips, the root)")
        wind = None
        scene_wind = getattr(bpy.context.scene, "marionette_wind", None)
        if row.wind_strength > 0.0:
            wind = Wind.build(
                tuple(row.wind_direction), float(row.wind_strength), gust=float(row.wind_gust),
                frequency=float(row.wind_frequency), seed=int(row.wind_seed),
            )
        elif scene_wind is not None and scene_wind.strength > 0.0:  # no wind of its own: the scene's
            wind = Wind.build(
                tuple(scene_wind.direction), float(scene_wind.strength), gust=float(scene_wind.gust),
                frequency=float(scene_wind.frequency), seed=int(scene_wind.seed),
            )
        chain = SpringChain.build(
            _tail_path(skeleton, lengths, joints), stiffness=float(row.stiffness), damping=float(row.damping), gravity=tuple(row.gravity),
            radius=float(row.point_radius), colliders=_spring_colliders(row, colliders()), wind=wind, center=center,
        )
        return cc.SpringControl(chain=chain, **common), spec
    if kind == "INHERIT":
        from ..core.controls.inheritance import Grant, Inheritance

        joints = _chain(skeleton, row.bone_start, row.bone_end)
        source = _bone(skeleton, row.source_bone, "source bone")
        grants = tuple(
            Grant.build(skeleton, j, source, rotation=float(row.rotation_fraction), translation=float(row.translation_fraction)) for j in joints
        )
        return cc.InheritControl(inheritance=Inheritance(grants), **common), spec
    if kind == "FIXED_AXIS":
        from ..core.controls.inheritance import FixedAxes

        joints = _chain(skeleton, row.bone_start, row.bone_end)
        return cc.FixedAxisControl(axes=FixedAxes.build(skeleton, joints, AXIS_VECTORS[row.twist_axis]), **common), spec
    if kind == "CLOSURE":
        from ..core.controls.closure import DiamondClosure

        left_joints = _chain(skeleton, row.bone_start, row.bone_end, "first branch")
        right_joints = _chain(skeleton, row.second_start, row.second_end, "second branch")
        left = _tail_path(skeleton, lengths, left_joints)
        right = _tail_path(skeleton, lengths, right_joints)
        if row.target_object is None or row.second_object is None:
            raise _RowError("pick both branches' targets")
        try:
            closure = DiamondClosure.build(
                skeleton, left, right, solver=CLOSURE_SOLVERS[row.closure_solver],
                limits_left=_row_limits(obj, skeleton, left_joints, row), limits_right=_row_limits(obj, skeleton, right_joints, row),
            )
        except RigError as exc:
            raise _RowError(str(exc)) from exc
        spec.target = _ref(row.target_object, row.target_bone)
        spec.second = _ref(row.second_object, row.second_bone)
        control = cc.ClosureControl(
            closure=closure, smooth_time=float(row.smooth_time), tolerance=max(float(row.tolerance), 1e-9),
            max_iterations=int(row.max_iterations), max_passes=int(row.max_passes), **common,
        )
        return control, spec
    raise _RowError(f"unknown control type {kind!r}")


def build_controls(obj: bpy.types.Object, skeleton: Skeleton | None = None) -> BuiltControls:
    """The object's control rows as one core stack. A row that cannot be built (a missing bone,
    a chain that is not a parent chain, branches sharing bones...) is reported, not run."""
    skeleton = skeleton or rest_skeleton(obj)
    heads, tails = rest_heads_tails(obj, skeleton)
    lengths = np.linalg.norm(tails - heads, axis=1)
    rows = list(obj.marionette_controls.controls)
    names = _unique_names(rows)
    forward_cache: list[FloatArray] = []
    collider_cache: list[ColliderSet] = []

    def forward() -> FloatArray:
        if not forward_cache:
            forward_cache.append(rig_forward(skeleton, tails))
        return forward_cache[0]

    def colliders() -> ColliderSet:
        if not collider_cache:
            collider_cache.append(read_colliders(obj, skeleton))
        return collider_cache[0]

    controls: list[Control] = []
    specs: list[ControlSpec] = []
    errors: dict[int, str] = {}
    for i, row in enumerate(rows):
        try:
            control, spec = _build_row(obj, skeleton, lengths, row, names[i], i, forward, colliders)
        except (MarionetteError, ValueError, TypeError, AttributeError, ImportError) as exc:
            errors[i] = str(exc)
            continue
        controls.append(control)
        specs.append(spec)
    stack = None
    if controls:
        try:
            stack = ControlStack(skeleton, controls)
        except RigError as exc:
            # A stack-level refusal (inheritance cycle...) disables every row it names.
            for s in specs:
                errors[s.row] = str(exc)
            specs = []
    rot: set[int] = set()
    tr: set[int] = set()
    if stack is not None:
        for c in stack.controls:
            rot.update(c.written)
            tr.update(c.moved)
    ground = any(s.kind == "GROUND" for s in specs)
    return BuiltControls(stack, specs, errors, tuple(sorted(rot)), tuple(sorted(tr)), own_meshes(obj) if ground else frozenset())
