"""Bake Physics: an MMD rig's rigid-body simulation (Blender's own Bullet, built by
``import-pmx --physics``) written into a new Action, after animation, IK and the Controls stack,
for ``bake-controls --physics``.

The order of effects, as MMD runs them:

1. the armature's animation with its controls (IK, inheritance...) is baked first
   (:func:`.bake_controls.bake_controls`), so the bone-following (Animated) bodies are carried by
   the controlled pose;
2. the dynamic bodies are placed where the first frame's pose carries them (no jump from the rest
   pose at the cache start: the simulation starts at rest relative to its bones), then the scene is
   stepped frame by frame from one frame before the rigid-body cache's first, that frame holding
   the first frame's pose (Blender builds the joints from where the bodies stand on the second
   frame it simulates: see :func:`_simulate`), Blender simulating;
3. each dynamic body's bone takes the place its body reaches (its rotation only for "dynamic,
   bone position"), solved as a local pose under its parent's new placement; every other bone
   keeps its baked local pose, so the hierarchy is rebuilt from the parents down and IK is not
   solved again (:func:`..core.formats.pmx_physics.write_back`);
4. the controls of the bones the model transforms after physics (PMX's "after physics" flag: an
   inheritance or IK that reads a bone the bodies carry) run again on that pose, as MMD runs them
   after the simulation.

The result is one new Action (the user's Action is not modified; the intermediate controls bake
is removed); afterwards the rigid-body world is switched off and the bones' constraints toward
their bodies muted, so the Action plays as baked.
"""

# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bpy
import numpy as np

from ..bridge import compat
from ..bridge.action_write import write_action
from ..bridge.animated_pose import carry_other_curves
from ..bridge.control_rows import build_controls
from ..bridge.file_import import FPS_PROPERTY, scene_fps
from ..bridge.rigid_bodies import (
    AFTER_PHYSICS_PROPERTY,
    MODE_PROPERTY,
    carried_bones,
    physics_objects,
    place_at_first_frame,
    set_tracks,
)
from ..bridge.session import save_blend
from ..bridge.skeleton_read import skeleton_from_armature
from ..core.errors import ClipError, RigError
from ..core.formats.pmx import BodyMode
from ..core.formats.pmx_physics import after_physics_stack, run_after_physics, write_back
from ..core.rig.clip import Clip
from ..core.rig.rotations import parts_from_transform
from ..viewport import live_preview
from .bake_controls import bake_controls, check_bakeable, open_for_bake


def _matrices(objs: list[Any]) -> np.ndarray:
    return np.array([np.array(o.matrix_world, dtype=np.float64) for o in objs]).reshape(len(objs), 4, 4)


@dataclass
class PhysicsBake:
    """What :func:`bake_physics` did: the report (JSON-ready), the new Action, and the bodies'
    simulated placements ``(T, N, 4, 4)`` (armature space) over the simulated frames, by body index."""

    report: dict[str, Any]
    action: Any
    frames: np.ndarray
    placements: np.ndarray


def bake_physics(obj: Any, frames: np.ndarray | None = None, name: str | None = None, scene: Any = None) -> PhysicsBake:
    """Simulate and write back (see the module docstring) over ``frames`` (whole, increasing,
    contiguous; default the scene's range). Refuses (``RigError``/``ClipError``) before changing
    anything. The report has ``first_step`` (the largest distance a body moved over the
    first step, from the held frame before the first: gravity alone, metres) and ``start_offset`` (how far a dynamic body started from where
    the first frame's pose carries it, metres)."""
    t0 = time.perf_counter()
    scene = scene or bpy.context.scene
    bodies = physics_objects(obj)
    if not bodies:
        raise RigError(f"{obj.name!r} has no rigid bodies; import the model with physics (import-pmx --physics)")
    f = np.arange(scene.frame_start, scene.frame_end + 1, dtype=np.float64) if frames is None else np.asarray(frames, dtype=np.float64).reshape(-1)
    if f.size == 0 or not np.all(np.diff(f) == 1.0) or not np.all(f == np.round(f)):
        raise ClipError("frames to bake with physics must be whole, increasing one by one")
    world = scene.rigidbody_world
    if world is None:
        raise RigError(f"the scene {scene.name!r} has no rigid-body world; import the model with physics (import-pmx --physics)")
    start = int(world.point_cache.frame_start)
    if f[0] < start:
        raise ClipError(f"the rigid-body cache starts at frame {start}; physics cannot be baked from frame {int(f[0])}")
    built = build_controls(obj)
    if built.stack is not None or built.errors:
        check_bakeable(obj)  # the controls' own refusals, before anything changes
    world.enabled = True
    world.point_cache.frame_end = max(int(world.point_cache.frame_end), int(f[-1]))
    steps = np.arange(start, f[-1] + 1, dtype=np.float64)
    previous = compat.current_action(obj)
    intermediate = None
    if built.stack is not None:
        outcome = bake_controls(obj, steps, f"{obj.name}_controls_for_physics", disable_live=True, scene=scene)
        intermediate = outcome.action
        skeleton = built.stack.skeleton
    else:
        live_preview.stop(obj, restore=True)
        skeleton = skeleton_from_armature(obj)
    names = list(skeleton.names)
    dynamic = [b for b in bodies if int(b[MODE_PROPERTY]) != int(BodyMode.FOLLOW_BONE)]
    arm_world = np.array(obj.matrix_world, dtype=np.float64)
    carried = carried_bones(obj, names)  # a dynamic bone follows its body through its track
    sim = _simulate(obj, scene, bodies, carried.bodies, names, steps)
    # Over the held frame (see _simulate) only gravity acts: a body moves by its first step.
    first_step = float(np.linalg.norm(sim.bodies[0, :, :3, 3] - sim.held[:, :3, 3], axis=-1).max())
    start_offset = max(
        (float(np.linalg.norm((arm_world @ sim.held[k])[:3, 3] - sim.placed[b.name][:3, 3])) for k, b in enumerate(bodies) if b.name in sim.placed),
        default=0.0,
    )
    q, t, _s = parts_from_transform(sim.basis)
    joints = [skeleton.index(n) for n in carried.bones]
    rot, tr = write_back(skeleton, q, t, joints, sim.carried, carried.offsets, carried.position_kept)
    fps = scene_fps(scene)
    late = after_physics_stack(built.stack, set(obj.get(AFTER_PHYSICS_PROPERTY, ())))
    if late is not None:
        rot, tr, _moved = run_after_physics(late, rot, tr, (steps - steps[0]) / fps, arm_world)
    keep = np.isin(steps, f)
    base = name or f"{(previous[0].name if previous[0] is not None else obj.name)}_physics"
    clip = Clip(
        names=names,
        times=(f - f[0]) / fps,
        fps=fps,
        rotations=rot[keep],
        translations=tr[keep],
        coverage=np.ones(len(names)),
        name=base,
        first_frame=float(f[0]),
    )
    source = compat.current_action(obj)
    new = write_action(obj, clip, base, frames=f, fps=fps)
    new[FPS_PROPERTY] = fps
    if source[0] is not None:
        carry_other_curves(source[0], source[1] or compat.action_slot_for(source[0], obj), new, compat.current_action(obj)[1])
    if intermediate is not None:
        intermediate.use_fake_user = False
        if intermediate.users == 0:
            bpy.data.actions.remove(intermediate)
    set_tracks(obj, False)
    world.enabled = False
    report = {
        "object": obj.name,
        "action": new.name,
        "frames": [float(f[0]), float(f[-1])],
        "frame_count": int(f.size),
        "simulated_from": start,
        "bodies": len(bodies),
        "dynamic_bodies": len(dynamic),
        "bones_written_back": carried.bones,
        "after_physics_controls": [] if late is None else [c.name for c in late.controls],
        "first_step": round(first_step, 6),
        "start_offset": round(start_offset, 6),
        "seconds": round(time.perf_counter() - t0, 4),
    }
    return PhysicsBake(report, new, steps, sim.bodies)


@dataclass
class _Simulated:
    """What :func:`_simulate` read: where each dynamic body was placed to start (world space, by
    object name), the bodies at the held frame ``(N, 4, 4)``, and over the steps the bodies
    ``(T, N, 4, 4)`` and the carrying bodies ``(T, C, 4, 4)`` (armature space), and the bones'
    local matrices ``(T, B, 4, 4)``."""

    placed: dict[str, np.ndarray]
    held: np.ndarray
    bodies: np.ndarray
    carried: np.ndarray
    basis: np.ndarray


def _simulate(obj: Any, scene: Any, bodies: list[Any], carried: list[Any], names: list[str], steps: np.ndarray) -> _Simulated:
    """Step the scene over ``steps`` from one held frame before them, reading the bodies and
    the bones at each.

    Blender builds the joints while it evaluates the cache's second frame, from where the bodies
    stand then: a bone-following body moved between the first two frames would fix its joints
    off by that move for the whole simulation. So the cache starts one frame earlier (restored
    afterwards), where the pose holds the first frame's (the controls bake starts at that frame
    and its keys hold before it), and the bodies are placed there: the joints are built on the
    first frame's pose, and the first step moves the bodies by gravity only."""
    cache = scene.rigidbody_world.point_cache
    kept = int(cache.frame_start)
    held = np.concatenate([[steps[0] - 1.0], steps])
    cache.frame_start = int(held[0])
    try:
        placed = place_at_first_frame(obj, scene)
        set_tracks(obj, True)
        arm_inv = np.linalg.inv(np.array(obj.matrix_world, dtype=np.float64))
        every = np.empty((held.size, len(bodies), 4, 4))
        tracks = np.empty((held.size, len(carried), 4, 4))
        basis = np.empty((held.size, len(names), 4, 4))
        pbs = [obj.pose.bones[n] for n in names]
        for i, fr in enumerate(held):
            scene.frame_set(int(fr))
            every[i] = arm_inv @ _matrices(bodies)
            if carried:
                tracks[i] = arm_inv @ _matrices(carried)
            basis[i] = [np.array(pb.matrix_basis, dtype=np.float64) for pb in pbs]
    finally:
        cache.frame_start = kept
    return _Simulated(placed, every[0], every[1:], tracks[1:], basis[1:])


def bake_physics_file(path: str, object_name: str, output: str, frames: Sequence[int] | None = None, action_name: str | None = None) -> dict[str, Any]:
    """The ``bake-controls --physics`` job: open ``path``, bake ``object_name``'s controls and
    physics over ``frames`` (``(first, last)``, default the scene's range), save everything to
    ``output`` (``path`` itself is not written). Returns the report."""
    obj, scene, f = open_for_bake(path, object_name, frames)
    report = bake_physics(obj, f, action_name, scene=scene).report
    save_blend(output)
    report["output"] = str(Path(output).resolve())
    return report
