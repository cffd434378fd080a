"""Ground rays of the Ground Feet controls: what each ray down from a sole hits in the scene."""

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
from mathutils import Matrix, Vector

from ..core.rig.rotations import FloatArray
from .control_rows import BuiltControls, ControlSpec, TargetRef
from .control_targets import evaluated_tracks, object_moves, object_world_track

#
# Ground rays hit what ``scene.ray_cast`` hits (the evaluated geometry of the view layer's visible
# mesh objects and mesh instances) except the character's own meshes, but they are cast object
# by object (``Object.ray_cast`` in the object's space), not through ``scene.ray_cast``. A ray
# down from a sole starts inside the character's own bounds, so ``scene.ray_cast`` tests its
# deforming body every frame, and the body's ray-cast tree, which Blender rebuilds whenever the
# mesh deforms, costs about 10 ms a frame for a 17k-vertex body, all for a hit that is then skipped.
# ``Object.ray_cast`` on an evaluated object uses the tree Blender keeps with the evaluated mesh
# (built once for a still or merely moving ground, rebuilt only when its geometry changes), so
# the character's meshes are never touched; each call costs a few microseconds. A
# ``mathutils.bvhtree.BVHTree`` kept here would cast a little faster (about 1 against 2-9
# microseconds) but needs 10 ms to build for a 45k-triangle ground and cannot tell cheaply when
# the evaluated geometry changed.


@dataclass
class _Ground:
    """One object ground rays may hit: its evaluated object and its world matrices (one, or one
    per frame of a bake), with their inverses, linear parts and the normals' matrices."""

    evaluated: Any
    worlds: list[Matrix]
    inverses: list[Matrix] = field(default_factory=list)
    turns: list[Matrix] = field(default_factory=list)
    normals: list[Matrix] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.inverses = [m.inverted_safe() for m in self.worlds]
        self.turns = [m.to_3x3() for m in self.inverses]
        self.normals = [m.transposed() for m in self.turns]


class GroundRays:
    """For each ground control of one evaluation, a world-space ray cast in the form
    :mod:`core.controls.ground` expects: against the scene's visible meshes but the character's own (see
    above), or the mesh objects of the control's ground collection. Over the frames of a bake,
    grounds moved by their keys, a constraint or a parent follow their motion frame by frame
    (the geometry itself is taken as it stands at the current frame)."""

    def __init__(self, scene: bpy.types.Scene, depsgraph: Any, built: BuiltControls, frames: np.ndarray | None = None) -> None:
        self.depsgraph = depsgraph
        self.built = built
        self.view_layer = getattr(depsgraph, "view_layer", None) or bpy.context.view_layer
        #: Frames of a bake (``None``: the current frame), and the world tracks of the objects
        #: that move over them (by name), read before any ray is cast (reading some may set frames).
        self.frames = frames if frames is not None and frames.shape[0] > 1 else None
        self.tracks: dict[str, FloatArray] = {}
        if self.frames is not None and any(s.kind == "GROUND" for s in built.specs):
            self._read_tracks(self.frames)

    def for_spec(self, spec: ControlSpec) -> Callable[[FloatArray, FloatArray, FloatArray], tuple[Any, Any, Any]]:
        def cast(origins: FloatArray, directions: FloatArray, distances: FloatArray) -> tuple[Any, Any, Any]:
            return _cast(self._grounds(spec), origins, directions, distances, 1 if self.frames is None else self.frames.shape[0])

        return cast

    # -- which objects

    def _placed(self, spec: ControlSpec) -> list[tuple[Any, Matrix, Any]]:
        """``(evaluated object, world matrix now, the object whose motion it follows)``."""
        ignore = self.built.own_meshes
        collection = bpy.data.collections.get(spec.ground_collection) if spec.ground_collection else None
        if collection is not None:
            out = []
            for o in collection.all_objects:
                if o.type == "MESH" and o.name not in ignore:
                    ev = o.evaluated_get(self.depsgraph)
                    out.append((ev, ev.matrix_world.copy(), o))
            return out
        out = []
        for inst in self.depsgraph.object_instances:
            ob = inst.object
            if ob.type != "MESH" or not inst.show_self:
                continue
            if inst.is_instance:
                owner = inst.parent
                owner = owner.original if owner is not None else None
                if ob.original.name in ignore or owner is None or owner.name in ignore:
                    continue
            else:
                owner = ob.original
                # The depsgraph also holds objects of hidden layer collections.
                if owner.name in ignore or not owner.visible_get(view_layer=self.view_layer):
                    continue
            out.append((ob, inst.matrix_world.copy(), owner))
        return out

    def _read_tracks(self, frames: np.ndarray) -> None:
        owners = {}
        for spec in self.built.specs:
            if spec.kind == "GROUND":
                for _ob, _m, owner in self._placed(spec):
                    if owner.name not in owners and object_moves(owner):
                        owners[owner.name] = owner
        slow = []
        for name, owner in owners.items():
            track = object_world_track(owner, frames)
            if track is None:
                slow.append(TargetRef(name))
            else:
                self.tracks[name] = track
        if slow:
            self.tracks.update({r.object_name: t for r, t in evaluated_tracks(slow, frames).items()})

    def _grounds(self, spec: ControlSpec) -> list[_Ground]:
        out = []
        for ob, now, owner in self._placed(spec):
            track = self.tracks.get(owner.name)
            if track is None:
                out.append(_Ground(ob, [now]))
                continue
            # An instance keeps its place relative to its instancer.
            rel = np.array(owner.matrix_world.inverted_safe() @ now, dtype=np.float64) if ob.original != owner else np.eye(4)
            out.append(_Ground(ob, [Matrix(m) for m in (track @ rel).tolist()]))
        return out


def make_ray_cast(scene: bpy.types.Scene, depsgraph: Any, built: BuiltControls, frames: np.ndarray | None = None) -> Callable[[ControlSpec], Any]:
    """The ray cast of each ground control (see :class:`GroundRays`)."""
    return GroundRays(scene, depsgraph, built, frames).for_spec


def _cast(grounds: Sequence[_Ground], origins: Any, directions: Any, distances: Any, frames: int) -> tuple[Any, Any, Any]:
    """The nearest hit of each ray on ``grounds``. Over ``frames`` frames the rays come leg by
    leg, each over the frames in order (ray ``i`` is at frame ``i % frames``; see
    :func:`core.controls.ground.adapt_to_ground`)."""
    starts = [Vector(p) for p in np.asarray(origins, dtype=np.float64).reshape(-1, 3).tolist()]
    n = len(starts)
    hit = [False] * n
    points = [(0.0, 0.0, 0.0)] * n
    normals = [(0.0, 0.0, 0.0)] * n
    if not grounds or n == 0:
        return np.array(hit, dtype=bool), np.array(points, dtype=np.float64), np.array(normals, dtype=np.float64)
    # Per ray in mathutils: for a live frame's few rays, numpy calls on 3-vectors would cost
    # more than the ray casts themselves. A zero direction stays zero and is skipped below.
    units = [Vector(d).normalized() for d in np.asarray(directions, dtype=np.float64).reshape(-1, 3).tolist()]
    reach = np.asarray(distances, dtype=np.float64).reshape(-1).tolist()
    if len(reach) != n:
        reach = reach[:1] * n
    best = [math.inf] * n
    for g in grounds:
        per_frame = len(g.worlds) > 1
        for i in range(n):
            k = i % frames if per_frame else 0
            start = g.inverses[k] @ starts[i]
            direction = g.turns[k] @ units[i]
            scale = direction.length
            if scale < 1e-12:
                continue
            try:
                ok, loc, normal, _index = g.evaluated.ray_cast(start, direction / scale, distance=reach[i] * scale)
            except RuntimeError:  # an object with no geometry to cast on
                break
            if not ok:
                continue
            along = (loc - start).length / scale
            if along < best[i]:
                best[i] = along
                hit[i] = True
                points[i] = (g.worlds[k] @ loc).to_tuple()
                normals[i] = (g.normals[k] @ normal).normalized().to_tuple()
    return np.array(hit, dtype=bool), np.array(points, dtype=np.float64), np.array(normals, dtype=np.float64)
