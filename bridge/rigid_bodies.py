"""A PMX model's rigid bodies and joints as Blender rigid bodies in the scene's rigid-body world
(Blender's own Bullet), tied to the armature both ways.

Built from :class:`~..core.formats.pmx_physics.PhysicsModel` (converted in core):

* each body a mesh object (a box whose bounds give Blender's primitive shape its size: the
  sphere's radius, the box's half extents, the capsule's radius and length), wire-drawn, not
  rendered, in a collection ``<armature> Physics``, with an Active rigid body (mass, friction,
  bounce, damping as the model says, collision margin 1e-6 as mmd_tools uses: Blender's default
  of 4 cm is thicker than a strand of hair);
* a bone-following body is **Animated** (kinematic) and parented to its bone: it goes where the
  evaluated bone goes;
* a dynamic body is simulated; its bone (the last body in the model's order where several name one bone) gets
  a Copy Transforms constraint (Copy Rotation for "dynamic, bone position") toward an empty
  carried by the body at the bone's rest placement: the write-back Blender shows as it plays;
* each joint an empty with a Generic Spring constraint (limits on all six axes, springs with
  MMD's stiffness); each pair MMD keeps apart that no joint links, near each other at rest, an
  empty with a Generic constraint that only disables their collisions (as mmd_tools does).

The rigid-body world's cache starts at the scene's first frame: Blender re-simulates from there
when the timeline goes back. Objects carry custom properties naming their role
(``pmx_rigid_body``, ``pmx_bone``, ``pmx_body_mode``, ``pmx_rest_matrix``) and their armature (``pmx_armature``).
"""

# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import bpy
import numpy as np
from mathutils import Matrix

from ..core.formats.pmx import BodyMode
from ..core.formats.pmx_physics import PhysicsModel, body_bone_offsets, collides, gravity_weight

ARMATURE_PROPERTY = "pmx_armature"
BODY_PROPERTY = "pmx_rigid_body"
BONE_PROPERTY = "pmx_bone"
MODE_PROPERTY = "pmx_body_mode"
#: The body's placement in the model at rest (armature space, 16 floats, row-major).
REST_PROPERTY = "pmx_rest_matrix"
#: On the armature: MMD's gravity at the size its bodies were built (m/s²).
GRAVITY_PROPERTY = "pmx_gravity"
#: On the armature: the bones the model transforms after physics (PMX's "after physics" flag).
AFTER_PHYSICS_PROPERTY = "pmx_after_physics"
TRACK_CONSTRAINT = "Rigid body track"
MARGIN = 1e-6


@dataclass
class PhysicsObjects:
    """What :func:`build_rigid_bodies` made."""

    collection: Any
    bodies: list[Any] = field(default_factory=list)
    joints: list[Any] = field(default_factory=list)
    non_collision: list[Any] = field(default_factory=list)
    #: Bone name -> the body object that carries it (dynamic bodies only).
    carried: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _box_mesh(name: str, half: np.ndarray) -> Any:
    hx, hy, hz = (float(v) for v in half)
    verts = [(sx * hx, sy * hy, sz * hz) for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]
    faces = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(verts, [], faces)
    return mesh


def _half_extents(shape: str, dims: np.ndarray) -> np.ndarray:
    if shape == "SPHERE":
        return np.full(3, dims[0])
    if shape == "CAPSULE":
        # Blender's capsule: radius from X/Y, its cylinder part the Z extent less the two caps.
        return np.array([dims[0], dims[0], dims[0] + 0.5 * dims[1]])
    return np.asarray(dims, dtype=np.float64)


def ensure_world(scene: Any) -> Any:
    """The scene's rigid-body world (made if missing), its cache over the scene's frame range."""
    if scene.rigidbody_world is None:
        with bpy.context.temp_override(scene=scene):
            bpy.ops.rigidbody.world_add()
    world = scene.rigidbody_world
    world.enabled = True
    world.point_cache.frame_start = scene.frame_start
    world.point_cache.frame_end = max(scene.frame_end, scene.frame_start + 1)
    return world


def mmd_gravity(arm: Any, scene: Any) -> str:
    """Weigh the scene's rigid-body world's gravity so ``arm``'s bodies fall as in MMD (its
    :data:`GRAVITY_PROPERTY`, set when they were built); returns the line that says so. The
    weight is the world's: every rigid body of the scene falls alike."""
    world = scene.rigidbody_world
    g = float(arm.get(GRAVITY_PROPERTY, 0.0))
    weight = gravity_weight(g, float(np.linalg.norm(scene.gravity)) if scene.use_gravity else 0.0)
    if world is None or weight is None:
        return "the scene has no gravity: MMD's is not set"
    world.effector_weights.gravity = weight
    return f"gravity as in MMD: {g:.3g} m/s² (the rigid-body world's gravity weight {weight:.3g})"


def _with_active(obj: Any, view_layer: Any, run: Any) -> None:
    """Run a rigid-body operator on ``obj`` made the active object for the call. (A context
    override of the object crashes ``rigidbody.constraint_add`` in bpy 5.0.1.)"""
    before = view_layer.objects.active
    view_layer.objects.active = obj
    try:
        run()
    finally:
        view_layer.objects.active = before


def _add_rigid_body(obj: Any, view_layer: Any) -> None:
    _with_active(obj, view_layer, lambda: bpy.ops.rigidbody.object_add(type="ACTIVE"))


def _add_constraint(obj: Any, view_layer: Any, kind: str) -> None:
    _with_active(obj, view_layer, lambda: bpy.ops.rigidbody.constraint_add(type=kind))


def build_rigid_bodies(arm: Any, physics: PhysicsModel, bone_names: dict[int, str], collection: Any = None, scene: Any = None) -> PhysicsObjects:
    """Bodies, joints and non-collision constraints of ``physics`` for armature object ``arm``
    (``bone_names``: PMX bone index -> Blender bone name) in a new collection under
    ``collection`` (default: the armature's first collection). The armature must be at rest."""
    scene = scene or bpy.context.scene
    view_layer = bpy.context.view_layer
    parent = collection or (arm.users_collection[0] if arm.users_collection else scene.collection)
    coll = bpy.data.collections.new(f"{arm.name} Physics")
    parent.children.link(coll)
    out = PhysicsObjects(coll)
    ensure_world(scene)
    arm_world = np.array(arm.matrix_world, dtype=np.float64)
    # The bodies are built at the armature object's scale; MMD's gravity scales with them.
    arm[GRAVITY_PROPERTY] = physics.gravity * float(np.cbrt(abs(np.linalg.det(arm_world[:3, :3]))))
    out.notes.append(mmd_gravity(arm, scene))
    bones = arm.data.bones
    for k, spec in enumerate(physics.bodies):
        obj = bpy.data.objects.new(spec.name or f"body{k}", _box_mesh(spec.name or f"body{k}", _half_extents(spec.shape, spec.dimensions)))
        coll.objects.link(obj)
        obj.display_type = "WIRE"
        obj.hide_render = True
        obj[ARMATURE_PROPERTY] = arm.name
        obj[BODY_PROPERTY] = k
        obj[MODE_PROPERTY] = int(spec.mode)
        obj[REST_PROPERTY] = [float(v) for v in spec.matrix.ravel()]
        world = arm_world @ spec.matrix
        obj.matrix_world = Matrix(world.tolist())
        _add_rigid_body(obj, view_layer)
        rb = obj.rigid_body
        rb.collision_shape = spec.shape
        rb.mass = max(spec.mass, 1e-3)
        rb.friction = spec.friction
        rb.restitution = spec.restitution
        rb.linear_damping = min(max(spec.linear_damping, 0.0), 1.0)
        rb.angular_damping = min(max(spec.angular_damping, 0.0), 1.0)
        rb.use_margin = True
        rb.collision_margin = MARGIN
        rb.kinematic = spec.kinematic
        bone = bone_names.get(spec.bone)
        if bone is not None:
            obj[BONE_PROPERTY] = bone
        if spec.kinematic and bone is not None:
            # Parented to the bone: Blender places a bone child at the bone's tail.
            b = bones[bone]
            tail = np.array(b.matrix_local, dtype=np.float64) @ _along_bone(b.length)
            obj.parent = arm
            obj.parent_type = "BONE"
            obj.parent_bone = bone
            obj.matrix_parent_inverse = Matrix.Identity(4)
            obj.matrix_basis = Matrix(np.linalg.solve(arm_world @ tail, world).tolist())
        elif not spec.kinematic and bone is not None:
            # Several dynamic bodies on one bone: the last in the model's order carries it, as
            # MMD's players write each body's place to its bone in that order.
            out.carried[bone] = obj
        out.bodies.append(obj)
    for bone, body in out.carried.items():
        _track(arm, bone, body, coll, arm_world)
    for k, j in enumerate(physics.joints):
        obj = _constraint_object(f"J.{j.name or k}", coll, arm_world @ j.matrix, arm.name)
        obj[REST_PROPERTY] = [float(v) for v in j.matrix.ravel()]
        _add_constraint(obj, view_layer, "GENERIC_SPRING")
        c = obj.rigid_body_constraint
        c.object1, c.object2 = out.bodies[j.body_a], out.bodies[j.body_b]
        c.disable_collisions = not _collide(physics, j.body_a, j.body_b)
        c.spring_type = "SPRING2"
        for i, ax in enumerate("xyz"):
            setattr(c, f"use_limit_lin_{ax}", True)
            setattr(c, f"use_limit_ang_{ax}", True)
            setattr(c, f"limit_lin_{ax}_lower", float(j.translation_min[i]))
            setattr(c, f"limit_lin_{ax}_upper", float(j.translation_max[i]))
            setattr(c, f"limit_ang_{ax}_lower", float(j.rotation_min[i]))
            setattr(c, f"limit_ang_{ax}_upper", float(j.rotation_max[i]))
            setattr(c, f"use_spring_{ax}", bool(j.spring_translation[i] != 0.0))
            setattr(c, f"use_spring_ang_{ax}", bool(j.spring_rotation[i] != 0.0))
            setattr(c, f"spring_stiffness_{ax}", float(abs(j.spring_translation[i])))
            setattr(c, f"spring_stiffness_ang_{ax}", float(abs(j.spring_rotation[i])))
        out.joints.append(obj)
    for a, b in physics.non_colliding:
        obj = _constraint_object(f"NC.{physics.bodies[a].name}.{physics.bodies[b].name}", coll, arm_world, arm.name)
        _add_constraint(obj, view_layer, "GENERIC")
        c = obj.rigid_body_constraint
        c.object1, c.object2 = out.bodies[a], out.bodies[b]
        c.disable_collisions = True
        # A Generic constraint with no limit holds nothing: it only names the pair.
        obj.hide_viewport = True
        out.non_collision.append(obj)
    out.notes += list(physics.notes)
    return out


def _collide(physics: PhysicsModel, a: int, b: int) -> bool:
    return collides(physics.bodies[a], physics.bodies[b])


def _constraint_object(name: str, coll: Any, world: np.ndarray, arm_name: str) -> Any:
    obj = bpy.data.objects.new(name, None)
    coll.objects.link(obj)
    obj.empty_display_type = "ARROWS"
    obj.empty_display_size = 0.02
    obj.hide_render = True
    obj[ARMATURE_PROPERTY] = arm_name
    obj.matrix_world = Matrix(world.tolist())
    return obj


def _track(arm: Any, bone: str, body: Any, coll: Any, arm_world: np.ndarray) -> None:
    """The bone follows ``body``: an empty carried by the body at the bone's rest placement, and
    a constraint on the bone toward it (the whole transform, or the rotation only)."""
    rest = arm_world @ np.array(arm.data.bones[bone].matrix_local, dtype=np.float64)
    body_world = np.array(body.matrix_world, dtype=np.float64)
    empty = bpy.data.objects.new(f"T.{bone}", None)
    coll.objects.link(empty)
    empty.empty_display_size = 0.01
    empty.hide_render = True
    empty[ARMATURE_PROPERTY] = arm.name
    empty.parent = body
    empty.matrix_parent_inverse = Matrix.Identity(4)
    empty.matrix_basis = Matrix(body_bone_offsets(rest[None], body_world[None])[0].tolist())
    pb = arm.pose.bones[bone]
    kind = "COPY_ROTATION" if body[MODE_PROPERTY] == int(BodyMode.DYNAMIC_BONE_POSITION) else "COPY_TRANSFORMS"
    c = pb.constraints.new(kind)
    c.name = TRACK_CONSTRAINT
    c.target = empty


def _along_bone(length: float) -> np.ndarray:
    m = np.eye(4)
    m[1, 3] = length
    return m


def rest_basis(body: Any) -> Matrix:
    """An Animated body's own transform under its bone as built: from the bone's tail at rest to
    the body's rest placement."""
    bone = bpy.data.objects[body[ARMATURE_PROPERTY]].data.bones[body[BONE_PROPERTY]]
    tail = np.array(bone.matrix_local, dtype=np.float64) @ _along_bone(bone.length)
    return Matrix(np.linalg.solve(tail, rest_matrix(body)).tolist())


def carry_animated_bodies(arm: Any, index: dict[str, int], shown: np.ndarray, evaluated: np.ndarray) -> list[Any]:
    """Give each Animated body of ``arm`` the own transform that puts it where its bone is
    ``shown`` (armature space, ``(B, 4, 4)`` by ``index``) while Blender evaluates the bone at
    ``evaluated``; bodies whose bone stands the same in both, or is carried by a dynamic body
    (its place is not known before the simulation), are left alone. Returns the bodies moved
    (:func:`rest_basis` puts one back)."""
    tracked = {pb.name for pb in arm.pose.bones if TRACK_CONSTRAINT in pb.constraints}
    moved = []
    for body in physics_objects(arm):
        if not body.rigid_body or not body.rigid_body.kinematic or body.parent != arm or body.parent_type != "BONE":
            continue
        j = index.get(body.parent_bone)
        if j is None or np.allclose(shown[j], evaluated[j], rtol=0.0, atol=1e-7):
            continue
        bone = arm.data.bones[body.parent_bone]
        if bone.name in tracked or any(b.name in tracked for b in bone.parent_recursive):
            continue
        tail = _along_bone(bone.length)
        basis = np.linalg.solve(evaluated[j] @ tail, shown[j] @ tail @ np.array(rest_basis(body), dtype=np.float64))
        body.matrix_basis = Matrix(basis.tolist())
        moved.append(body)
    return moved


@dataclass
class CarriedBones:
    """The bones a dynamic body carries (through its track constraint), in skeleton order: the
    bodies, each bone's placement relative to its body at rest ``(C, 4, 4)``, and whether only
    its rotation comes from the body ("dynamic, bone position")."""

    bones: list[str]
    bodies: list[Any]
    offsets: np.ndarray
    position_kept: list[bool]


def carried_bones(arm: Any, names: list[str]) -> CarriedBones:
    """Which of ``names`` (``arm``'s bones) the dynamic bodies carry (see :class:`CarriedBones`)."""
    tracks: dict[str, Any] = {}
    for pb in arm.pose.bones:
        c = pb.constraints.get(TRACK_CONSTRAINT)
        if c is not None and c.target is not None and c.target.parent is not None:
            tracks[pb.name] = c.target.parent
    bones = [n for n in names if n in tracks]
    bodies = [tracks[n] for n in bones]
    offsets = [np.linalg.solve(rest_matrix(b), np.array(arm.data.bones[n].matrix_local, dtype=np.float64)) for n, b in zip(bones, bodies, strict=True)]
    kept = [int(b[MODE_PROPERTY]) == int(BodyMode.DYNAMIC_BONE_POSITION) for b in bodies]
    return CarriedBones(bones, bodies, np.array(offsets).reshape(len(bones), 4, 4), kept)


def physics_objects(arm: Any) -> list[Any]:
    """The rigid-body objects built for ``arm``, by body index."""
    found = [o for o in bpy.data.objects if o.get(ARMATURE_PROPERTY) == arm.name and BODY_PROPERTY in o]
    return sorted(found, key=lambda o: int(o[BODY_PROPERTY]))


def set_tracks(arm: Any, on: bool) -> None:
    """Mute (``on`` False) or unmute the bones' constraints toward their bodies."""
    for pb in arm.pose.bones:
        c = pb.constraints.get(TRACK_CONSTRAINT)
        if c is not None:
            c.mute = not on


def rest_matrix(body: Any) -> np.ndarray:
    """A body's rest placement in armature space (4x4)."""
    return np.array(body[REST_PROPERTY], dtype=np.float64).reshape(4, 4)


def physics_enabled(arm: Any, scene: Any) -> bool:
    """Whether ``arm``'s physics runs: the scene's rigid-body world on and its bones' tracks unmuted."""
    world = scene.rigidbody_world
    tracks = [pb.constraints[TRACK_CONSTRAINT] for pb in arm.pose.bones if TRACK_CONSTRAINT in pb.constraints]
    return world is not None and world.enabled and any(not c.mute for c in tracks)


def set_physics(arm: Any, scene: Any, on: bool) -> None:
    """Switch ``arm``'s physics on (the world on, bodies and joints placed at the first frame's
    pose, the tracks unmuted) or off (the bones play their keys)."""
    world = ensure_world(scene) if on else scene.rigidbody_world
    if world is not None:
        world.enabled = on
    if on:
        mmd_gravity(arm, scene)
        place_at_first_frame(arm, scene)
    set_tracks(arm, on)


def place_at_first_frame(arm: Any, scene: Any) -> dict[str, np.ndarray]:
    """Put every dynamic body, and every joint, where the pose of the rigid-body cache's first
    frame carries them (the bodies' bones at that frame, the joints with their first body), so
    the simulation starts at rest relative to the bones, as Bullet reads the constraints' frames
    from where their objects stand at the start. The bones' tracks are muted meanwhile and
    restored. Returns the placements given (world space), by body object name."""
    world = scene.rigidbody_world
    start = scene.frame_start if world is None else int(world.point_cache.frame_start)
    arm_world = np.array(arm.matrix_world, dtype=np.float64)
    tracked = [pb.constraints[TRACK_CONSTRAINT] for pb in arm.pose.bones if TRACK_CONSTRAINT in pb.constraints]
    was = [c.mute for c in tracked]
    set_tracks(arm, False)
    # A dynamic bone its action does not key keeps whatever pose was last put on it (a bake played
    # before): it starts from its rest, as MMD's do; a keyed one gets its keys back below.
    for b in physics_objects(arm):
        pb = arm.pose.bones.get(b.get(BONE_PROPERTY) or "")
        if pb is not None and int(b[MODE_PROPERTY]) != int(BodyMode.FOLLOW_BONE):
            pb.matrix_basis = Matrix.Identity(4)
    scene.frame_set(start)
    placed: dict[str, np.ndarray] = {}
    for b in physics_objects(arm):
        bone = b.get(BONE_PROPERTY)
        if int(b[MODE_PROPERTY]) == int(BodyMode.FOLLOW_BONE) or bone is None or bone not in arm.pose.bones:
            continue
        pose = np.array(arm.pose.bones[bone].matrix, dtype=np.float64)
        bone_rest = np.array(arm.data.bones[bone].matrix_local, dtype=np.float64)
        placed[b.name] = arm_world @ pose @ np.linalg.solve(bone_rest, rest_matrix(b))
        b.matrix_world = Matrix(placed[b.name].tolist())
    for j in bpy.data.objects:
        c = j.rigid_body_constraint
        if j.get(ARMATURE_PROPERTY) != arm.name or REST_PROPERTY not in j or c is None or c.object1 is None:
            continue
        body = c.object1
        now = placed.get(body.name)
        now = np.array(body.matrix_world, dtype=np.float64) if now is None else now
        delta = now @ np.linalg.inv(arm_world @ rest_matrix(body))
        j.matrix_world = Matrix((delta @ arm_world @ rest_matrix(j)).tolist())
    for c, m in zip(tracked, was, strict=True):
        c.mute = m
    return placed
