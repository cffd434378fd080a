"""The start of a PMX rig's simulation as the timeline plays it (docs/formats.md, "Physics").

Blender builds the rigid-body world's joints while it evaluates the frame after the cache's
first, from where the bodies stand in that evaluation. The dynamic bodies and the joints were
placed on the first frame's pose (:func:`..bridge.rigid_bodies.place_at_first_frame`), but a
bone-following (Animated) body already stands on the second frame's pose then: a bone moving
from the first frame would fix its joints off by that move for the whole simulation (a hair
chain hanging off a turning head, an ornament off a knee).

So, when the timeline steps from the cache's first frame to the next, every Animated PMX body
is held where the first frame showed it for that evaluation only: unparented and placed before
it (``frame_change_pre``), parented back as it was once it ran (``frame_change_post``; Blender
evaluates the frame again after these handlers, so nothing shows it). The joints are then built
on the first frame's pose, and the first step carries no motion of the bones; the next one
carries two frames of it. Bake Physics does not need this: it simulates from a frame held
before the first (see :mod:`..usecases.bake_physics`).
"""

# mypy: disable-error-code="union-attr"
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import bpy
import numpy as np
from bpy.app.handlers import persistent
from mathutils import Matrix

from ..bridge.rigid_bodies import BODY_PROPERTY
from .live_preview import add_handlers, remove_handlers


@dataclass
class _SceneStart:
    """Per scene: the last whole frame shown, where the Animated bodies stood on the cache's
    first frame (by object name), and the parenting of the bodies held now."""

    last: int | None = None
    placed: dict[str, np.ndarray] = field(default_factory=dict)
    held: list[tuple[Any, Any, str, str, Matrix, Matrix]] = field(default_factory=list)


_scenes: dict[int, _SceneStart] = {}


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
    start = _cache_start(scene)
    state = _scenes.get(scene.as_pointer())
    if start is None or state is None or _rendering(depsgraph):
        return
    if state.last != start or scene.frame_current != start + 1 or not state.placed:
        return
    for body in _animated_bodies():
        placed = state.placed.get(body.name)
        if placed is None:
            continue
        state.held.append(
            (body, body.parent, body.parent_type, body.parent_bone, body.matrix_parent_inverse.copy(), body.matrix_basis.copy())
        )
        body.parent = None
        body.matrix_world = Matrix(placed.tolist())


@persistent
def _after_frame(scene: Any, depsgraph: Any = None) -> None:
    state = _scenes.setdefault(scene.as_pointer(), _SceneStart())
    put_back(state)  # also after a render's frame (Blender gives frame_change_pre no depsgraph)
    if _rendering(depsgraph):
        return
    start = _cache_start(scene)
    if start is None:
        state.last = None
        return
    frame = scene.frame_current
    if frame == start:
        state.placed = {b.name: np.array(b.matrix_world, dtype=np.float64) for b in _animated_bodies()}
    state.last = frame if scene.frame_subframe == 0.0 else None


def put_back(state: _SceneStart) -> None:
    """Parent the held bodies back as they were."""
    for body, parent, parent_type, parent_bone, inverse, basis in state.held:
        try:
            body.parent = parent
            body.parent_type = parent_type
            body.parent_bone = parent_bone
            body.matrix_parent_inverse = inverse
            body.matrix_basis = basis
        except ReferenceError:
            continue
    state.held.clear()


@persistent
def _on_load(*_args: Any) -> None:
    _scenes.clear()


_HANDLERS = (("frame_change_pre", _before_frame), ("frame_change_post", _after_frame), ("load_post", _on_load))


def register() -> None:
    add_handlers(_HANDLERS)


def unregister() -> None:
    remove_handlers(_HANDLERS)
    for state in _scenes.values():
        put_back(state)
    _scenes.clear()
