"""The round trip of an export: a clip retargeted with the ``retarget`` command's use case into an
engine file, the file re-imported in a fresh session with Blender's own importer, and the pose the
re-imported armature plays compared with the pose the baked Action plays, frame by frame, in world
space: every mapped bone's turn from its rest (independent of the bones' own axes, which importers
choose) and the hips' position, as a fraction of the hips' rest height above the lowest joint."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass
class RoundTrip:
    max_angle_deg: float
    max_hips_fraction: float
    #: The largest distance between a mapped joint and its re-imported self, as a fraction of hip height.
    max_joint_fraction: float
    #: The largest turn from rest the baked clip plays (the compared poses move).
    max_motion_deg: float
    #: How far the skinned meshes' world box (mid-clip) moved, as a fraction of the hips' height.
    max_mesh_fraction: float
    #: How far the hips travel, as a fraction of their height.
    hips_travel_fraction: float
    frames: int
    mapped: int
    clip_names: list[str]
    report: dict[str, Any]
    #: The mapped bones' world positions (metres, Blender's axes) at rest and on the clip's first frame.
    rest_places: dict[str, np.ndarray]
    first_places: dict[str, np.ndarray]
    hip_height: float
    #: Every bone of the exported armature.
    armature_bones: list[str]
    hips_name: str


def _rotations(m: np.ndarray) -> np.ndarray:
    r = np.asarray(m)[..., :3, :3]
    return r / np.linalg.norm(r, axis=-2, keepdims=True)


def _turns(world: np.ndarray, rest: np.ndarray) -> np.ndarray:
    """Each bone's world turn from its rest, ``(T, B, 3, 3)``."""
    return _rotations(world) @ np.swapaxes(_rotations(rest), -1, -2)[None]


def _angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Degrees between rotation matrices, well conditioned near zero (from the chord, not the trace)."""
    chord = np.linalg.norm(a - b, axis=(-2, -1)) / (2 * np.sqrt(2))
    return np.degrees(2 * np.arcsin(np.clip(chord, 0, 1)))


def _mesh_box(armature: Any) -> np.ndarray:
    """The world box ``(2, 3)`` of the meshes ``armature`` deforms, as Blender plays them now (zeros
    for an armature without meshes)."""
    import bpy

    depsgraph = bpy.context.evaluated_depsgraph_get()
    points = []
    for obj in bpy.data.objects:
        if obj.type == "MESH" and any(m.type == "ARMATURE" and m.object == armature for m in obj.modifiers):
            ev = obj.evaluated_get(depsgraph)
            mesh = ev.to_mesh()
            co = np.empty(len(mesh.vertices) * 3)
            mesh.vertices.foreach_get("co", co)
            mw = np.array(ev.matrix_world)
            points.append(co.reshape(-1, 3) @ mw[:3, :3].T + mw[:3, 3])
            ev.to_mesh_clear()
    if not points:
        return np.zeros((2, 3))
    allp = np.concatenate(points)
    return np.stack([allp.min(0), allp.max(0)])


def _rest_world(obj: Any, names: list[str]) -> np.ndarray:
    mw = np.array(obj.matrix_world)
    return np.stack([mw @ np.array(obj.data.bones[n].matrix_local) for n in names])


def _world(obj: Any, names: list[str], frames: np.ndarray) -> np.ndarray:
    import bpy

    scene = bpy.context.scene
    out = np.empty((len(frames), len(names), 4, 4))
    for k, f in enumerate(frames):
        scene.frame_set(int(f))
        mw = np.array(obj.matrix_world)
        out[k] = [mw @ np.array(obj.pose.bones[n].matrix) for n in names]
    return out


def glb_json(path: str | Path) -> dict[str, Any]:
    """The JSON chunk of a .glb file (or a .gltf file's JSON)."""
    data = Path(path).read_bytes()
    if data[:4] != b"glTF":
        return dict(json.loads(data))
    (length,) = struct.unpack_from("<I", data, 12)
    return dict(json.loads(data[20 : 20 + length]))


@dataclass
class _Played:
    names: list[str]
    hips: str
    frames: np.ndarray
    rest: np.ndarray
    world: np.ndarray
    hip_height: float
    box: np.ndarray
    report: dict[str, Any]
    bones: list[str]


def _played(outcome: Any) -> _Played:
    """What the retargeted armature of this session plays, in metres."""
    import bpy

    arm = next(o for o in bpy.data.objects if o.type == "ARMATURE" and o.animation_data and o.animation_data.action == outcome.action)
    names = [mb.bone for mb in outcome.target_mapping.slots.values()]
    hips = outcome.target_mapping.bone_for("hips")
    first, last = (int(round(f)) for f in outcome.action.frame_range)
    frames = np.arange(first, last + 1)
    rest, world = _rest_world(arm, names), _world(arm, names, frames)
    all_rest = _rest_world(arm, [b.name for b in arm.data.bones])
    bpy.context.scene.frame_set(int(frames[len(frames) // 2]))
    box = _mesh_box(arm)
    metres = float(bpy.context.scene.unit_settings.scale_length)
    for m in (rest, world):
        m[..., :3, 3] *= metres
    hip_height = float(rest[names.index(hips), 2, 3] - all_rest[:, 2, 3].min() * metres)
    return _Played(names, hips, frames, rest, world, hip_height, box * metres, outcome.report, [b.name for b in arm.data.bones])


def round_trip(
    source: str, target: str, out: Path, engine: str | None, clip: str | None = None, reference: bool = False, options: Any = None,
) -> RoundTrip:
    """Retarget ``source`` onto ``target`` into ``out`` for ``engine``, re-import ``out`` in a fresh
    session and compare. ``reference``: compare with the same retarget saved as a .blend (measured
    in its own session) rather than with the session the export ran in, for a preset whose export
    changes the session's units."""
    import bpy

    from marionette.bridge.file_import import load_file
    from marionette.bridge.session import fresh_session
    from marionette.usecases.retarget import retarget_files

    if reference:
        ref = _played(retarget_files(source, target, str(out.with_suffix(".blend")), clip=clip, options=options))
    exported = _played(retarget_files(source, target, str(out), clip=clip, engine=engine, options=options))
    if not reference:
        ref = exported
    fresh_session()
    loaded = load_file(str(out))
    back = next(a for a in loaded.armatures if a.data.bones.get(ref.hips) is not None)
    action = back.animation_data.action if back.animation_data else None
    assert action is not None, f"{out.name}: the re-imported armature plays no action"
    shift = int(round(action.frame_range[0])) - int(ref.frames[0])
    again = _world(back, ref.names, ref.frames + shift)
    bpy.context.scene.frame_set(int(ref.frames[len(ref.frames) // 2]) + shift)
    box_back = _mesh_box(back)
    turn_a, turn_b = _turns(ref.world, ref.rest), _turns(again, _rest_world(back, ref.names))
    angle = _angle(turn_a, turn_b)
    moved = _angle(turn_a, np.broadcast_to(np.eye(3), turn_a.shape))
    h = ref.names.index(ref.hips)
    hips = ref.world[:, h, :3, 3]
    drift = np.linalg.norm(hips - again[:, h, :3, 3], axis=-1) / ref.hip_height
    travel = np.linalg.norm(hips - hips[:1], axis=-1).max() / ref.hip_height
    joints = np.linalg.norm(ref.world[..., :3, 3] - again[..., :3, 3], axis=-1).max() / ref.hip_height
    return RoundTrip(
        float(angle.max()), float(drift.max()), float(joints), float(moved.max()), float(np.abs(ref.box - box_back).max() / ref.hip_height),
        float(travel), len(ref.frames), len(ref.names), [a.name for a in bpy.data.actions], exported.report,
        dict(zip(ref.names, ref.rest[:, :3, 3], strict=True)), dict(zip(ref.names, ref.world[0, :, :3, 3], strict=True)), ref.hip_height, ref.bones, ref.hips,
    )


# --- for a comparison made elsewhere (the sidebar's Export) ----------------------------------


def bone_worlds(obj: Any, names: list[str], frames: np.ndarray) -> np.ndarray:
    """``(T, B, 4, 4)``: the world matrices of ``obj``'s bones ``names`` at each of ``frames``, as
    Blender plays them (the scene's current frame is moved)."""
    return _world(obj, names, frames)


def rest_worlds(obj: Any, names: list[str]) -> np.ndarray:
    """``(B, 4, 4)``: the rest world matrices of ``obj``'s bones ``names``."""
    return _rest_world(obj, names)


def turn_errors_deg(world_a: np.ndarray, rest_a: np.ndarray, world_b: np.ndarray, rest_b: np.ndarray) -> np.ndarray:
    """``(T, B)`` degrees between two plays' world turns from rest, bone by bone (independent of
    the bones' own axes, which importers choose)."""
    return _angle(_turns(world_a, rest_a), _turns(world_b, rest_b))


def turns_from_rest_deg(world: np.ndarray, rest: np.ndarray) -> np.ndarray:
    """``(T, B)`` degrees each bone is turned from its rest (how much the compared play moves)."""
    turns = _turns(world, rest)
    return _angle(turns, np.broadcast_to(np.eye(3), turns.shape))
