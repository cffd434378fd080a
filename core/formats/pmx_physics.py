"""A PMX model's rigid bodies and joints in Blender's space and Blender's rigid-body conventions,
and the write-back of simulated bodies to their bones' local poses.

The simulation itself is Blender's (Bullet); this module only converts and, after a simulation,
turns body placements back into bone poses. No ``bpy`` here.

Axes and units as :mod:`core.formats.pmx_rig`: a point ``(x, y, z)_mmd`` is
``scale * (x, z, y)`` in Blender, a rotation ``R`` of MMD space is ``S R S`` (``S`` the Y/Z swap).

Body and joint angles. MMD stores a body's (and a joint's) orientation as Euler angles
``(rx, ry, rz)`` about MMD's X, Y, Z, applied Z first, then X, then Y (``R = Ry Rx Rz``, Direct3D's
yaw-pitch-roll). Followed and checked against mmd_tools (MMD-Blender/blender_mmd_tools,
``core/pmx/importer.py`` and ``core/rigid_body.py``): it sets a body object's Euler angles to
``-(rx, rz, ry)`` in Blender's ``YXZ`` mode, which is ``S Ry(ry) Rx(rx) Rz(rz) S`` (each
``S R_a(t) S`` is a turn about the swapped axis by ``-t``). Joint limits follow the same rule:
translations are points (swapped, scaled, no sign change), rotation ranges ``[lo, hi]`` about
MMD's X, Y, Z become ``[-hi, -lo]`` about Blender's X, Z, Y. Spring constants are swapped per
axis, values kept (MMD's own numbers, as mmd_tools keeps them).

Shapes. Blender's primitives: a sphere's radius; a box's half extents (swapped like a point); a
capsule's radius and the height of its cylinder part, along its local Y in MMD, which ``S R S``
maps onto the body's local Z, Blender's capsule axis. Sizes are scaled.

Collisions. In MMD (Bullet's filters) bodies ``a`` and ``b`` collide when each one's mask has the
other's group bit. Blender makes bodies collide when they share a collision collection, which
cannot say "a not with b" pairwise; as mmd_tools does, every body stays in one collection and
each pair that MMD keeps apart gets a constraint that disables their collisions (a joint between
them says it itself). mmd_tools only adds those for pairs near each other at rest (closer than
1.5 times their mean size); :func:`non_colliding_pairs` does the same, for the same reason (a
model has hundreds of bodies; all pairs would be tens of thousands of constraints).

Modes. Bone-following bodies are kinematic (Blender's "Animated"), placed by their bones; dynamic
bodies are simulated and place their bones; "dynamic, bone position" bodies are simulated but
write back only their rotation, their bone keeping the position its parent gives it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ..controls.stack import ControlStack
from ..rig.rotations import FloatArray, parts_from_transform
from ..rig.skeleton import Skeleton
from .pmx import BodyMode, BodyShape, PmxJoint, PmxModel, PmxRigidBody
from .pmx_rig import AXIS_SWAP, DEFAULT_SCALE

#: Blender's names of the shapes and modes.
SHAPES = {BodyShape.SPHERE: "SPHERE", BodyShape.BOX: "BOX", BodyShape.CAPSULE: "CAPSULE"}
#: Pairs farther apart at rest than this times their mean size get no non-collision constraint.
NEAR_FACTOR = 1.5


@dataclass(frozen=True)
class BodySpec:
    """One rigid body in Blender's space: ``matrix`` (4x4, rest placement, armature space),
    the shape's ``dimensions`` (sphere: radius; box: half extents X, Y, Z; capsule: radius and
    cylinder height), the bone's PMX index (``-1`` = none) and the physical values as MMD has them."""

    name: str
    bone: int
    shape: str
    dimensions: FloatArray
    matrix: FloatArray
    mode: BodyMode
    mass: float
    linear_damping: float
    angular_damping: float
    friction: float
    restitution: float
    group: int
    collides_with: int

    @property
    def kinematic(self) -> bool:
        return self.mode == BodyMode.FOLLOW_BONE

    @property
    def radius(self) -> float:
        """Half the largest extent: a size for "near each other"."""
        d = self.dimensions
        if self.shape == "SPHERE":
            return float(d[0])
        if self.shape == "CAPSULE":
            return float(d[0] + 0.5 * d[1])
        return float(np.linalg.norm(d))


@dataclass(frozen=True)
class JointSpec:
    """One joint as a Blender Generic Spring constraint: its placement (4x4, armature space),
    the two bodies, translation limits ``(lo, hi)`` per Blender axis (metres), rotation limits
    (radians), spring stiffness per axis (translation, rotation)."""

    name: str
    body_a: int
    body_b: int
    matrix: FloatArray
    translation_min: FloatArray
    translation_max: FloatArray
    rotation_min: FloatArray
    rotation_max: FloatArray
    spring_translation: FloatArray
    spring_rotation: FloatArray


def mmd_body_rotation(angles: ArrayLike) -> FloatArray:
    """The rotation matrix ``(..., 3, 3)`` of MMD Euler angles ``(..., 3)`` (``Ry Rx Rz``, MMD space)."""
    a = np.asarray(angles, dtype=np.float64)
    cx, cy, cz = np.cos(a[..., 0]), np.cos(a[..., 1]), np.cos(a[..., 2])
    sx, sy, sz = np.sin(a[..., 0]), np.sin(a[..., 1]), np.sin(a[..., 2])
    one, zero = np.ones_like(cx), np.zeros_like(cx)
    rx = np.stack([one, zero, zero, zero, cx, -sx, zero, sx, cx], axis=-1).reshape(a.shape[:-1] + (3, 3))
    ry = np.stack([cy, zero, sy, zero, one, zero, -sy, zero, cy], axis=-1).reshape(a.shape[:-1] + (3, 3))
    rz = np.stack([cz, -sz, zero, sz, cz, zero, zero, zero, one], axis=-1).reshape(a.shape[:-1] + (3, 3))
    return ry @ rx @ rz


def blender_placement(position: ArrayLike, angles: ArrayLike, scale: float = DEFAULT_SCALE) -> FloatArray:
    """The Blender 4x4 placement of an MMD position and Euler angles: ``S R S`` and ``scale * S p``."""
    m = np.eye(4)
    m[:3, :3] = AXIS_SWAP @ mmd_body_rotation(angles) @ AXIS_SWAP
    m[:3, 3] = scale * (AXIS_SWAP @ np.asarray(position, dtype=np.float64))
    return m


def blender_euler_yxz(angles: ArrayLike) -> FloatArray:
    """The same rotation as Blender Euler angles (X, Y, Z) in mode ``YXZ``: ``-(rx, rz, ry)``."""
    a = np.asarray(angles, dtype=np.float64)
    return -a[..., [0, 2, 1]] + 0.0


def body_spec(body: PmxRigidBody, scale: float = DEFAULT_SCALE) -> BodySpec:
    size = np.asarray(body.size, dtype=np.float64)
    if body.shape == BodyShape.SPHERE:
        dims = scale * size[:1]
    elif body.shape == BodyShape.BOX:
        dims = scale * size[[0, 2, 1]]
    else:
        dims = scale * size[:2]
    return BodySpec(
        name=body.name,
        bone=int(body.bone),
        shape=SHAPES[body.shape],
        dimensions=np.abs(dims),
        matrix=blender_placement(body.position, body.rotation, scale),
        mode=body.mode,
        mass=float(body.mass),
        linear_damping=float(body.linear_damping),
        angular_damping=float(body.angular_damping),
        friction=float(body.friction),
        restitution=float(body.restitution),
        group=int(body.group),
        collides_with=int(body.collides_with),
    )


def joint_spec(joint: PmxJoint, scale: float = DEFAULT_SCALE) -> JointSpec:
    tmin = scale * np.asarray(joint.translation_min, dtype=np.float64)[[0, 2, 1]]
    tmax = scale * np.asarray(joint.translation_max, dtype=np.float64)[[0, 2, 1]]
    rmin = np.asarray(joint.rotation_min, dtype=np.float64)[[0, 2, 1]]
    rmax = np.asarray(joint.rotation_max, dtype=np.float64)[[0, 2, 1]]
    return JointSpec(
        name=joint.name,
        body_a=int(joint.body_a),
        body_b=int(joint.body_b),
        matrix=blender_placement(joint.position, joint.rotation, scale),
        translation_min=np.minimum(tmin, tmax),
        translation_max=np.maximum(tmin, tmax),
        # A reflection reverses the sense of turning: [lo, hi] becomes [-hi, -lo].
        rotation_min=-np.maximum(rmin, rmax) + 0.0,
        rotation_max=-np.minimum(rmin, rmax) + 0.0,
        spring_translation=np.asarray(joint.spring_translation, dtype=np.float64)[[0, 2, 1]].copy(),
        spring_rotation=np.asarray(joint.spring_rotation, dtype=np.float64)[[0, 2, 1]].copy(),
    )


def collides(a: BodySpec, b: BodySpec) -> bool:
    """MMD's rule: each body's mask holds the other's group bit."""
    return bool((a.collides_with >> b.group) & 1 and (b.collides_with >> a.group) & 1)


def non_colliding_pairs(bodies: Sequence[BodySpec], joints: Sequence[JointSpec] = ()) -> list[tuple[int, int]]:
    """Pairs ``(i, j)``, ``i < j``, that MMD keeps from colliding, near each other at rest
    (see the module docstring) and not already joined by a joint."""
    joined = {frozenset((j.body_a, j.body_b)) for j in joints}
    out = []
    pos = np.array([b.matrix[:3, 3] for b in bodies]).reshape(-1, 3)
    for i in range(len(bodies)):
        for j in range(i + 1, len(bodies)):
            if collides(bodies[i], bodies[j]) or frozenset((i, j)) in joined:
                continue
            reach = NEAR_FACTOR * (bodies[i].radius + bodies[j].radius)
            if float(np.linalg.norm(pos[i] - pos[j])) < reach:
                out.append((i, j))
    return out


def joint_disables_collisions(joint: JointSpec, bodies: Sequence[BodySpec]) -> bool:
    return not collides(bodies[joint.body_a], bodies[joint.body_b])


@dataclass(frozen=True)
class PhysicsModel:
    """A model's bodies and joints converted (see the module docstring); ``gravity`` is MMD's
    (:data:`MMD_GRAVITY`) in the converted model's units, metres per second squared."""

    bodies: tuple[BodySpec, ...]
    joints: tuple[JointSpec, ...]
    non_colliding: tuple[tuple[int, int], ...]
    notes: tuple[str, ...] = ()
    gravity: float = 0.0


#: MMD's gravity, in its units per second squared: 9.8 × 10, as MMD and the Bullet ports that play
#: its models set their world (a unit is about 8 cm: 7.84 m/s² at the default 0.08 m per unit).
MMD_GRAVITY = 98.0


def gravity_weight(gravity: float, scene_gravity: float) -> float | None:
    """The rigid-body world's gravity weight under which a model whose MMD gravity is
    ``gravity`` (m/s², :attr:`PhysicsModel.gravity` at the size its bodies were built) falls as in
    MMD, the scene's gravity being ``scene_gravity`` long; ``None`` when the scene has no gravity
    to weigh."""
    if not (scene_gravity > 0.0 and gravity > 0.0):
        return None
    return gravity / scene_gravity


def build_physics(model: PmxModel, scale: float = DEFAULT_SCALE) -> PhysicsModel:
    """Every body and joint of ``model`` in Blender's space. A joint whose two bodies are the
    same, and a dynamic body with no bone (nothing to write back to), are kept and named in
    the notes."""
    bodies = tuple(body_spec(b, scale) for b in model.rigid_bodies)
    joints = tuple(joint_spec(j, scale) for j in model.joints)
    notes = []
    for b in bodies:
        if b.bone < 0 and not b.kinematic:
            notes.append(f"rigid body {b.name!r} is dynamic but has no bone: it is simulated, nothing follows it")
        if b.bone < 0 and b.kinematic:
            notes.append(f"rigid body {b.name!r} follows no bone: it stays where the model puts it")
    for j in joints:
        if j.body_a == j.body_b:
            notes.append(f"joint {j.name!r} links body {j.body_a} to itself; it holds nothing")
    return PhysicsModel(bodies, joints, tuple(non_colliding_pairs(bodies, joints)), tuple(notes), MMD_GRAVITY * scale)


# --- write-back ------------------------------------------------------------------------------


def body_bone_offsets(bone_rest: ArrayLike, body_rest: ArrayLike) -> FloatArray:
    """Per body, the bone's placement in the body's frame, ``inv(body) @ bone`` ``(N, 4, 4)``,
    from rest placements (armature space) ``(N, 4, 4)`` each: constant while the body carries the
    bone."""
    return np.linalg.solve(np.asarray(body_rest, dtype=np.float64), np.asarray(bone_rest, dtype=np.float64))


def write_back(
    skeleton: Skeleton,
    rotations: ArrayLike,
    translations: ArrayLike,
    joints: Sequence[int],
    body_world: ArrayLike,
    offsets: ArrayLike,
    position_kept: Sequence[bool] | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Bone poses after a simulation: joint ``joints[k]`` placed where body ``k`` carries it
    (``body_world[:, k] @ offsets[k]``, skeleton space, ``(T, N, 4, 4)``), its local pose solved
    under its parent's *new* placement, every other joint keeping its local pose (the hierarchy
    rebuilt from parents down, nothing solved again). ``position_kept[k]``: only the rotation
    comes from the body, the position from the parent. Returns ``(rotations (T, B, 4),
    translations (T, B, 3))``."""
    rot = np.asarray(rotations, dtype=np.float64)
    tr = np.asarray(translations, dtype=np.float64)
    bw = np.asarray(body_world, dtype=np.float64)
    off = np.asarray(offsets, dtype=np.float64)
    n_t, n_b = rot.shape[:2]
    if bw.shape != (n_t, len(joints), 4, 4) or off.shape != (len(joints), 4, 4):
        raise ValueError(f"body placements must be ({n_t}, {len(joints)}, 4, 4) and offsets ({len(joints)}, 4, 4), got {bw.shape} and {off.shape}")
    keep = [False] * len(joints) if position_kept is None else list(position_kept)
    target = {int(j): (bw[:, k] @ off[k], keep[k]) for k, j in enumerate(joints)}
    local = skeleton.local_transforms(rot, tr)
    c0 = skeleton.parent_frames
    inv_c1 = None if skeleton.child_frames is None else np.linalg.inv(skeleton.child_frames)
    world = np.empty((n_t, n_b, 4, 4))
    for j in _parents_first(skeleton):
        p = int(skeleton.parents[j])
        attached = c0[j] @ local[:, j]
        if inv_c1 is not None:
            attached = attached @ inv_c1[j]
        placed = attached if p < 0 else world[:, p] @ attached
        if j in target:
            m, kept = target[j]
            m = m.copy()
            if kept:
                m[:, :3, 3] = placed[:, :3, 3]
            local[:, j] = skeleton.joint_local_from_world(j, m, None if p < 0 else world[:, p])
            placed = m
        world[:, j] = placed
    q, t, _s = parts_from_transform(local)
    return q, t


def _parents_first(skeleton: Skeleton) -> list[int]:
    order: list[int] = []
    seen: set[int] = set()
    for j in range(len(skeleton)):
        chain = []
        k = j
        while k >= 0 and k not in seen:
            chain.append(k)
            k = int(skeleton.parents[k])
        for c in reversed(chain):
            seen.add(c)
            order.append(c)
    return order


def after_physics_stack(stack: ControlStack | None, bones: set[str]) -> ControlStack | None:
    """The controls of ``stack`` that write only bones the model transforms after physics (PMX's
    flag), as a stack of their own in the same order (``None`` when there are none)."""
    if stack is None or not bones:
        return None
    names = stack.skeleton.names
    late = [c for c in stack.controls if c.written and all(names[j] in bones for j in c.written)]
    return ControlStack(stack.skeleton, late) if late else None


def run_after_physics(
    late: ControlStack, rotations: FloatArray, translations: FloatArray, time: ArrayLike, placement: ArrayLike
) -> tuple[FloatArray, FloatArray, list[int]]:
    """Run ``late`` (:func:`after_physics_stack`) on the pose the bodies left ``(T, B, 4)``,
    ``(T, B, 3)``, as MMD runs those bones' transforms after the simulation: returns the pose with
    the joints it writes replaced, and those joints."""
    again = late.instance().evaluate(rotations, translations, time=time, placement=placement)
    moved = sorted({j for c in late.controls for j in c.written})
    rot, tr = rotations.copy(), translations.copy()
    rot[:, moved], tr[:, moved] = again.rotations[:, moved], again.translations[:, moved]
    return rot, tr, moved
