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
    #: The largest turn from rest the baked clip plays (the compared poses move).
    max_motion_deg: float
    #: How far the hips travel, as a fraction of their height.
    hips_travel_fraction: float
    frames: int
    bones: int
    clip_names: list[str]
    report: dict[str, Any]


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


def round_trip(source: str, target: str, out: Path, engine: str | None, clip: str | None = None) -> RoundTrip:
    import bpy

    from marionette.bridge.file_import import load_file
    from marionette.bridge.session import fresh_session
    from marionette.usecases.retarget import retarget_files

    outcome = retarget_files(source, target, str(out), clip=clip, engine=engine)
    arm = next(o for o in bpy.data.objects if o.type == "ARMATURE" and o.animation_data and o.animation_data.action == outcome.action)
    names = [mb.bone for mb in outcome.target_mapping.slots.values()]
    hips = outcome.target_mapping.bone_for("hips")
    first, last = (int(round(f)) for f in outcome.action.frame_range)
    frames = np.arange(first, last + 1)
    rest = _rest_world(arm, names)
    baked = _world(arm, names, frames)
    all_rest = _rest_world(arm, [b.name for b in arm.data.bones])
    hip_height = rest[names.index(hips), 2, 3] - all_rest[:, 2, 3].min()

    fresh_session()
    loaded = load_file(str(out))
    back = next(a for a in loaded.armatures if a.data.bones.get(hips) is not None)
    action = back.animation_data.action if back.animation_data else None
    assert action is not None, f"{out.name}: the re-imported armature plays no action"
    start = int(round(action.frame_range[0]))
    again = _world(back, names, frames - first + start)
    turn_a, turn_b = _turns(baked, rest), _turns(again, _rest_world(back, names))
    angle = _angle(turn_a, turn_b)
    moved = _angle(turn_a, np.broadcast_to(np.eye(3), turn_a.shape))
    h = names.index(hips)
    drift = np.linalg.norm(baked[:, h, :3, 3] - again[:, h, :3, 3], axis=-1) / hip_height
    clips = [a.name for a in bpy.data.actions]
    travel = np.linalg.norm(baked[:, h, :3, 3] - baked[:1, h, :3, 3], axis=-1).max() / hip_height
    return RoundTrip(float(angle.max()), float(drift.max()), float(moved.max()), float(travel), len(frames), len(names), clips, outcome.report)
