"""A PMX rig's rigid-body simulation as the timeline plays it (docs/formats.md, "Physics").

Blender steps the rigid-body world inside the evaluation of each frame, before
``frame_change_post``, where the live preview shows the frame with its controls. What is changed
for that evaluation is put back once it ran (Blender evaluates the frame again after the
handlers, so the bodies show where they belong):

* **Carried by the controlled pose.** Each live-previewed armature with physics is shown on
  ``frame_change_pre`` too, so bodies on bones the controls alone move (leg IK on unkeyed legs)
  stand on this frame's controlled pose when Bullet steps. Where the action keys a channel the
  controls override (FK keys under an IK), the animation sets it in that evaluation all the same:
  each Animated body on such a bone is given the own transform that makes up the difference
  (:func:`..bridge.rigid_bodies.carry_animated_bodies`).
* **Bones transformed after physics.** Once the step ran (``frame_change_post``), the controls of
  the bones the model flags "after physics" run again on the frame just shown, its carried bones
  where the bodies left them, and the result is shown, as Bake Physics does (:func:`_after_physics`).
* **Joints built on the first frame's pose.** Blender builds the joints while it evaluates the
  frame after the cache's first, from where the bodies stand in that evaluation. The dynamic
  bodies and the joints were placed on the first frame's pose
  (:func:`..bridge.rigid_bodies.place_at_first_frame`), but a bone-following body already stands
  on the second frame's then: a bone moving from the first frame would fix its joints off by
  that move for the whole simulation. So, when the timeline steps from the cache's first frame
  to the next, every Animated PMX body is held where the first frame showed it (unparented and
  placed), and the first step carries no motion of the bones; the next one carries two frames of
  it. Bake Physics does not need this: it simulates from a frame held before the first (see
  :mod:`..usecases.bake_physics`).
"""

# mypy: disable-error-code="union-attr"
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import bpy
import numpy as np
from bpy.app.handlers import persistent
from mathutils import Matrix

from ..bridge.file_import import scene_fps
from ..bridge.rigid_bodies import (
    AFTER_PHYSICS_PROPERTY,
    BODY_PROPERTY,
    GRAVITY_PROPERTY,
    carried_bones,
    carry_animated_bodies,
    rest_basis,
)
from ..core.formats.pmx_physics import after_physics_stack, run_after_physics, write_back
from . import live_preview
from .live_preview import ObjectRuntime, add_handlers, remove_handlers


@dataclass
class _SceneStart:
    """Per scene: the last whole frame shown, where the Animated bodies stood on the cache's
    first frame (by object name), and the parenting of the bodies held now."""

    last: int | None = None
    placed: dict[str, np.ndarray] = field(default_factory=dict)
    held: list[tuple[Any, Any, str, str, Matrix]] = field(default_factory=list)


_scenes: dict[int, _SceneStart] = {}
#: Animated bodies given an own transform for the evaluation under way (see _carry_bodies).
_carried: list[Any] = []


def _animated_bodies() -> list[Any]:
    return [
        o
        for o in bpy.data.objects
        if BODY_PROPERTY in o and o.rigid_body is not None and o.rigid_body.kinematic and o.parent is not None
    ]


def _cache_start(scene: Any) -> int | None:
    world = scene.rigidbody_world
    if world is None or not world.enabled or world.point_cache.is_baked:
        return None
    return int(world.point_cache.frame_start)


def _rendering(depsgraph: Any) -> bool:
    return depsgraph is not None and depsgraph.mode == "RENDER"


@persistent
def _before_frame(scene: Any, depsgraph: Any = None) -> None:
    # Blender gives frame_change_pre no depsgraph, and a render's frame changes reach it too.
    start = _cache_start(scene)
    if start is None or _rendering(depsgraph):
        return
    if not live_preview.quiet():
        for obj in live_preview.live_objects(scene):
            if obj.get(GRAVITY_PROPERTY) is not None:
                _carried.extend(_carry_bodies(obj, live_preview.show_before_frame(obj, scene)))
    state = _scenes.get(scene.as_pointer())
    if state is None or state.last != start or scene.frame_current != start + 1 or not state.placed:
        return
    for body in _animated_bodies():
        placed = state.placed.get(body.name)
        if placed is None:
            continue
        state.held.append((body, body.parent, body.parent_type, body.parent_bone, body.matrix_parent_inverse.copy()))
        body.parent = None
        body.matrix_world = Matrix(placed.tolist())


def _carry_bodies(obj: Any, rt: ObjectRuntime) -> list[Any]:
    """Where the action keys channels the controls override, the bones stand on the keys in the
    evaluation about to run: give ``obj``'s Animated bodies on them the own transforms that put
    them where the frame just shown places their bones."""
    kept = live_preview.shown(rt)
    if rt.error or rt.pose is None or rt.built is None or rt.built.stack is None or kept is None or not rt.pose.writes_keyed:
        return []
    io = rt.pose.io
    animated = {p: v[None].astype(np.float64) for p, v in rt.pose.last.items()}
    rot = io.quats(animated)[0]
    tr = animated["location"][0].copy()
    tr[io.connected] = 0.0
    evaluated_rot = np.where(rt.pose.rotation_keyed[:, None], rot, kept.rotations)
    evaluated_tr = np.where(rt.pose.location_keyed[:, None], tr, kept.translations)
    if np.allclose(evaluated_rot, kept.rotations, rtol=0.0, atol=1e-9) and np.allclose(evaluated_tr, kept.translations, rtol=0.0, atol=1e-9):
        return []  # the controls override no key: every bone stands as shown
    skeleton = rt.built.stack.skeleton
    shown = skeleton.forward_kinematics(kept.rotations[None], kept.translations[None])[0]
    evaluated = skeleton.forward_kinematics(evaluated_rot[None], evaluated_tr[None])[0]
    return carry_animated_bodies(obj, {n: j for j, n in enumerate(skeleton.names)}, shown, evaluated)


@persistent
def _after_frame(scene: Any, depsgraph: Any = None) -> None:
    state = _scenes.setdefault(scene.as_pointer(), _SceneStart())
    put_back(state)  # also after a render's frame
    if _rendering(depsgraph):
        return
    start = _cache_start(scene)
    if start is None:
        state.last = None
        return
    if not live_preview.quiet():
        for obj in live_preview.live_objects(scene):
            if obj.get(AFTER_PHYSICS_PROPERTY):
                _after_physics(obj, scene)
    frame = scene.frame_current
    if frame == start:
        state.placed = {b.name: np.array(b.matrix_world, dtype=np.float64) for b in _animated_bodies()}
    state.last = frame if scene.frame_subframe == 0.0 else None


def _after_physics(obj: Any, scene: Any) -> None:
    """Run the controls of the bones ``obj``'s model transforms after physics again on the frame
    just shown, its carried bones where the bodies left them in the step that ran, and show the
    result (as Bake Physics does over a whole range)."""
    rt = live_preview.runtime(obj)
    kept = None if rt is None else live_preview.shown(rt)
    if rt is None or kept is None or rt.built is None or rt.built.stack is None or rt.error:
        return
    skeleton = rt.built.stack.skeleton
    late = after_physics_stack(rt.built.stack, set(obj[AFTER_PHYSICS_PROPERTY]))
    if late is None:
        return
    carried = carried_bones(obj, list(skeleton.names))
    arm = np.array(obj.matrix_world, dtype=np.float64)
    bodies = np.array([np.array(b.matrix_world, dtype=np.float64) for b in carried.bodies]).reshape(-1, 4, 4)
    joints = [skeleton.index(n) for n in carried.bones]
    rot, tr = write_back(skeleton, kept.rotations[None], kept.translations[None], joints, np.linalg.solve(arm, bodies)[None], carried.offsets, carried.position_kept)
    rot, tr, moved = run_after_physics(late, rot, tr, np.array([rt.frame / scene_fps(scene)]), arm)
    shown_rot, shown_tr = kept.rotations.copy(), kept.translations.copy()
    shown_rot[moved], shown_tr[moved] = rot[0, moved], tr[0, moved]
    live_preview.reshow(obj, rt, shown_rot, shown_tr)


def put_back(state: _SceneStart) -> None:
    """The bodies carried or held for the evaluation that ran, back under their bones as built."""
    for body, parent, parent_type, parent_bone, inverse in state.held:
        with contextlib.suppress(ReferenceError):
            body.parent = parent
            body.parent_type = parent_type
            body.parent_bone = parent_bone
            body.matrix_parent_inverse = inverse
            body.matrix_basis = rest_basis(body)
    state.held.clear()
    for body in _carried:
        with contextlib.suppress(ReferenceError):
            body.matrix_basis = rest_basis(body)
    _carried.clear()


@persistent
def _on_load(*_args: Any) -> None:
    _scenes.clear()
    _carried.clear()


_HANDLERS = (("frame_change_pre", _before_frame), ("frame_change_post", _after_frame), ("load_post", _on_load))


def register() -> None:
    add_handlers(_HANDLERS)


def unregister() -> None:
    remove_handlers(_HANDLERS)
    for state in _scenes.values():
        put_back(state)
    _scenes.clear()
    put_back(_SceneStart())
