"""Live preview: the viewport shows each armature's animation with its controls applied, as the
timeline plays or is scrubbed (docs/controls.md#live-preview).

Per object with ``marionette_controls.live_preview`` on, a runtime (its core
:class:`~marionette.core.controls.stack.ControlInstance`, the :class:`~.animated_pose.AnimatedPose`
reader, the last reports) is kept by the object's ``session_uid``: two objects that share one
Armature have separate controls, instances and spring state. On ``frame_change_post`` each one
does one bulk read of the animated pose (the action's keys, sampled once, in numpy; never the
pose bones after its own write), one core call, one bulk write of the driven channels. Springs
are given the scene time of the frame, so scrubbing backwards or jumping recomputes them from the
core's cached states, deterministically. An armature whose PMX rigid bodies the scene simulates is
also shown before Blender evaluates the frame (:mod:`.physics_playback`).

Renders never run controls on a render thread. Every render (F12 and Ctrl+F12 in the interface,
``bpy.ops.render.render()`` from a script, ``blender -b … -f/-a``) evaluates its own depsgraph and
calls ``frame_change_post`` with it after its animation pass, once per frame and subframe (motion
blur); what a handler writes there is taken by the render's second pass, which does not animate
again. There each live object's frame is written over the rendered frame's animated channels:

* a frame the viewport showed since the last change (kept as a :class:`RenderFrame`: the driven
  channels and the placements of the armature and its targets they were computed from), when
  those placements stand where the render evaluated them;
* on a render thread, a subframe between two kept frames, blended from them;
* on the main thread, otherwise, the frame computed there as the viewport computes it (the view
  layer moved to it, handlers held);
* on a render thread, otherwise, nothing: the frame renders without the controls and is reported.

:func:`prepare_render` shows a range once so that all of it is kept. While a render runs, the
viewport's handlers pause.

Handlers are persistent (a loaded file keeps its live preview) and removed by :func:`unregister`,
which also puts every previewed pose back to its animation.
"""

# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

import contextlib
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import bpy
import numpy as np
from bpy.app.handlers import persistent

from ..bridge import compat
from ..bridge.animated_pose import AnimatedPose, forget_live_property, pose_problems
from ..bridge.control_evaluation import evaluate, switched_rows
from ..bridge.control_rows import BuiltControls, build_controls
from ..bridge.control_targets import TargetReader, inputs_match
from ..core.controls.stack import ControlInstance, ControlReport
from ..core.errors import MarionetteError


@dataclass
class ObjectRuntime:
    """What one previewed object keeps between frames (nothing of it is saved)."""

    name: str
    built: BuiltControls | None = None
    instance: ControlInstance | None = None
    pose: AnimatedPose | None = None
    reader: TargetReader | None = None
    #: Why the object cannot be previewed (shown in the panel).
    problems: list[str] = field(default_factory=list)
    reports: dict[str, ControlReport] = field(default_factory=dict)
    frame: float = float("nan")
    #: Seconds the last evaluation took (read, core call, write).
    seconds: float = 0.0
    error: str = ""
    dirty: bool = True
    #: The bones' rest matrices when the stack was built (an edit of the bones rebuilds it).
    rest: bytes = b""
    #: The frames shown since the last change, by frame (for renders on another thread).
    frames: dict[float, RenderFrame] = field(default_factory=dict)
    #: The frame shown last (kept whatever the number of frames kept for renders).
    last: RenderFrame | None = None
    #: The frame shown before Blender evaluated it (see show_before_frame), until shown after.
    early: float = float("nan")


@dataclass(frozen=True)
class RenderFrame:
    """One frame as the viewport showed it: the stack's rotations ``(B, 4)`` and translations
    ``(B, 3)``, and the placements it was computed from (:attr:`TargetReader.seen`)."""

    rotations: np.ndarray
    translations: np.ndarray
    seen: tuple[np.ndarray, dict[Any, np.ndarray]]


#: Frames kept per object at most (about 4 KB each on a 65-bone character).
KEEP_FRAMES = 20000


_runtimes: dict[int, ObjectRuntime] = {}
#: While above zero, the handlers do nothing (a bake reading targets through frame_set).
_hold = [0]
#: Objects this module wrote since the last depsgraph update (their update is our own).
_wrote: set[str] = set()
#: The thread a render of live objects runs on, while it runs (the viewport's handlers pause).
_render_thread: list[int | None] = [None]
#: The last render, per object name: its frames (and subframes) by how each was written: from a
#: kept frame ("kept"), blended from two ("blended"), computed on the main thread ("computed"),
#: or not at all ("missed": rendered without the controls).
last_render: dict[str, dict[str, list[float]]] = {}
RENDER_OUTCOMES = ("kept", "blended", "computed", "missed")
#: Per scene (by pointer): its object count and the names of its live objects, as last found
#: (see live_objects).
_live_names: dict[int, tuple[int, list[str]]] = {}


def rest_signature(obj: bpy.types.Object) -> bytes:
    bones = obj.data.bones
    buf = np.empty(len(bones) * 16, dtype=np.float32)
    bones.foreach_get("matrix_local", buf)
    return buf.tobytes() + "\n".join(b.name for b in bones).encode()


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _paused() -> bool:
    """The viewport's handlers do nothing: held, off the main thread, or while a render runs on
    another thread."""
    if _hold[0] or not _main_thread():
        return True
    owner = _render_thread[0]
    if owner is None:
        return False
    if owner != threading.main_thread().ident and bpy.app.is_job_running("RENDER"):
        return True
    # A render on the main thread reaches these handlers only held (see _render_object): this
    # one has ended, or stopped before telling (Blender sends no render_cancel when a render
    # fails to start).
    _render_thread[0] = None
    return False


def quiet() -> bool:
    """Whether nothing may be shown now: held, off the main thread, or while a render runs (a
    render's frame changes reach every frame handler; unlike :func:`_paused` this leaves a
    render's state alone)."""
    return bool(_hold[0]) or not _main_thread() or _render_thread[0] is not None


def shown(rt: ObjectRuntime) -> RenderFrame | None:
    """The frame ``rt`` showed last (``None`` before one was shown, or after a change)."""
    return rt.last


def reshow(obj: bpy.types.Object, rt: ObjectRuntime, rotations: np.ndarray, translations: np.ndarray) -> None:
    """Write the frame ``rt`` showed last again as ``rotations`` ``(B, 4)`` and ``translations``
    ``(B, 3)`` (a pass run after it, such as the controls MMD runs after physics), and keep it so."""
    assert rt.pose is not None
    rt.pose.write(obj, rotations, translations, rt.pose.io.read(obj))
    _wrote.add(obj.name)
    if rt.last is not None:
        rt.last = RenderFrame(rotations.copy(), translations.copy(), rt.last.seen)
        key = _frame_key(rt.frame)
        if key in rt.frames:
            rt.frames[key] = rt.last


def _frame_key(frame: float) -> float:
    return round(float(frame), 4)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Handlers do nothing inside this block."""
    _hold[0] += 1
    try:
        yield
    finally:
        _hold[0] -= 1


def runtime(obj: bpy.types.Object) -> ObjectRuntime | None:
    """The object's runtime, if it has one (for the panel)."""
    return _runtimes.get(obj.session_uid)


def _drop(obj: bpy.types.Object, restore: bool) -> None:
    rt = _runtimes.pop(obj.session_uid, None)
    if restore:
        if rt is not None and rt.pose is not None:
            with contextlib.suppress(MarionetteError, ReferenceError, KeyError, ValueError):
                rt.pose.restore(obj)
        forget_live_property(obj)


def _build(obj: bpy.types.Object, rt: ObjectRuntime, scene: bpy.types.Scene) -> None:
    """(Re)build the stack, instance and pose reader; the previous output is removed first."""
    if rt.pose is not None:
        rt.pose.restore(obj)
    rt.built = rt.instance = rt.pose = rt.reader = rt.last = None
    rt.reports = {}
    rt.frames.clear()
    rt.error = ""
    rt.dirty = False
    rt.problems = pose_problems(obj)
    rt.rest = rest_signature(obj)
    if rt.problems:
        return
    built = build_controls(obj)
    rt.built = built
    if built.stack is None:
        return
    rt.instance = built.stack.instance()
    rt.pose = AnimatedPose(obj, built.stack.skeleton, scene, built.rot_joints, built.tr_joints)
    rt.reader = TargetReader(obj, built)
    _apply_states(obj, rt)


def _apply_states(obj: bpy.types.Object, rt: ObjectRuntime) -> None:
    rt.frames.clear()
    if rt.built is None or rt.instance is None:
        return
    rows = obj.marionette_controls.controls
    keyed = switched_rows(obj)  # switched frame by frame by their keys (see control_evaluation)
    for s in rt.built.specs:
        if s.row < len(rows):
            row = rows[s.row]
            rt.instance.set_enabled(s.name, bool(row.enabled) or s.row in keyed)
            rt.instance.set_weight(s.name, float(row.weight))


def evaluate_object(obj: bpy.types.Object, scene: bpy.types.Scene, depsgraph: Any) -> ObjectRuntime:
    """Show the current frame of ``obj`` with its controls, and keep it (main thread only)."""
    rt = _runtimes.get(obj.session_uid)
    if rt is None:
        rt = _runtimes[obj.session_uid] = ObjectRuntime(obj.name)
    t0 = time.perf_counter()
    try:
        if rt.dirty or rt.problems or (rt.pose is not None and rt.pose.stale(obj)):
            _build(obj, rt, scene)
        if rt.built is None or rt.instance is None or rt.pose is None or rt.reader is None:
            return rt
        missing = rt.reader.missing()
        if missing:
            rt.error = "; ".join(missing)
            return rt
        result, current, frames = evaluate(obj, rt.built, rt.instance, rt.pose, rt.reader, None, scene, depsgraph)
        rotations, translations = result.rotations[0], result.translations[0]
        rt.pose.write(obj, rotations, translations, current)
        _wrote.add(obj.name)
        rt.reports = dict(result.reports)
        rt.frame = float(frames[0])
        rt.last = None if rt.reader.seen is None else RenderFrame(rotations.copy(), translations.copy(), rt.reader.seen)
        if rt.last is not None and len(rt.frames) < KEEP_FRAMES:
            rt.frames[_frame_key(rt.frame)] = rt.last
        rt.error = ""
    except (MarionetteError, ValueError, KeyError, ReferenceError) as exc:
        rt.error = str(exc)
    rt.seconds = time.perf_counter() - t0
    return rt


def live_objects(scene: bpy.types.Scene) -> list[bpy.types.Object]:
    """The armatures of ``scene`` with the live preview on. Which ones they are changes only
    with an edit (a depsgraph update, an undo, a load, a toggle; each forgets the names kept
    here), so a frame change looks them up by name instead of walking every object of the
    scene."""
    objs = scene.objects
    count = len(objs)
    kept = _live_names.get(scene.as_pointer())
    # An object linked by a script (a copy of a previewed armature) may come with no edit
    # Blender reports: a changed object count looks again too.
    if kept is not None and kept[0] == count:
        found = [objs.get(n) for n in kept[1]]
        if all(o is not None and o.type == "ARMATURE" and o.marionette_controls.live_preview for o in found):
            return found
    live = [o for o in objs if o.type == "ARMATURE" and o.marionette_controls.live_preview] if count else []
    _live_names[scene.as_pointer()] = (count, [o.name for o in live])
    return live


# --- handlers --------------------------------------------------------------------------------


@persistent
def _on_frame_change(scene: bpy.types.Scene, depsgraph: Any = None) -> None:
    if depsgraph is not None and depsgraph.mode == "RENDER":
        if not _hold[0]:
            _render_frame(scene, depsgraph)
        return
    if _paused():
        return
    if depsgraph is not None and depsgraph.mode != "VIEWPORT":
        return
    for obj in live_objects(scene):
        dg = depsgraph or bpy.context.evaluated_depsgraph_get()
        if not _show_early_frame(obj, scene, dg):
            evaluate_object(obj, scene, dg)


def show_before_frame(obj: bpy.types.Object, scene: bpy.types.Scene) -> ObjectRuntime:
    """Show the scene's new frame of ``obj`` before Blender evaluates it (``frame_change_pre``):
    targets are read where the last evaluation left them. Once Blender evaluated the frame, it is
    shown again from what was computed here when the armature and its targets stand where they
    were read (no core call), or computed again."""
    rt = evaluate_object(obj, scene, bpy.context.evaluated_depsgraph_get())
    rt.early = _frame_key(rt.frame) if rt.pose is not None and not rt.error else float("nan")
    return rt


def _show_early_frame(obj: bpy.types.Object, scene: bpy.types.Scene, depsgraph: Any) -> bool:
    """Write the frame :func:`show_before_frame` computed, over the animation Blender set since,
    if it still holds (see there); False when it must be computed again."""
    rt = _runtimes.get(obj.session_uid)
    if rt is None:
        return False
    early, rt.early = rt.early, float("nan")
    kept = rt.last
    if early != _frame_key(scene.frame_current_final) or kept is None or rt.dirty or rt.pose is None or rt.built is None:
        return False
    # A ground probed then stood where the last frame left it.
    if any(s.kind == "GROUND" for s in rt.built.specs) or not inputs_match(obj, kept.seen, depsgraph):
        return False
    if rt.pose.writes_keyed:  # the animation set them again: the frame is written over it
        rt.pose.write(obj, kept.rotations, kept.translations, rt.pose.io.read(obj))
        _wrote.add(obj.name)
    return True


@persistent
def _on_depsgraph_update(scene: bpy.types.Scene, depsgraph: Any) -> None:
    """Follow targets moved and keys edited between frame changes."""
    _live_names.clear()  # an edit may have added, removed or renamed a live object
    if _paused():
        return
    live = live_objects(scene)
    if not live:
        _wrote.clear()
        return
    ours = set(_wrote)
    _wrote.clear()
    moved: set[str] = set()
    #: Objects Blender says were moved (or reshaped, for meshes): kept frames no longer hold.
    transformed: set[str] = set()
    meshes: set[str] = set()
    actions: set[int] = set()
    armatures: set[str] = set()
    for u in depsgraph.updates:
        idn = u.id.original if u.id is not None else None
        if idn is None:
            continue
        if isinstance(idn, bpy.types.Object):
            if idn.name not in ours or u.is_updated_transform:
                moved.add(idn.name)
            if idn.name not in ours and u.is_updated_transform:
                transformed.add(idn.name)
            if idn.type == "MESH" and (u.is_updated_transform or u.is_updated_geometry):
                meshes.add(idn.name)
        elif isinstance(idn, bpy.types.Action):
            actions.add(idn.as_pointer())
        elif isinstance(idn, bpy.types.Armature):
            armatures.add(idn.name)
    if not moved and not actions and not armatures:
        return
    for obj in live:
        rt = _runtimes.get(obj.session_uid)
        if rt is None or rt.reader is None:
            evaluate_object(obj, scene, depsgraph)
            continue
        action, _slot = compat.current_action(obj)
        if action is not None and action.as_pointer() in actions:
            rt.dirty = True  # keys edited: sample them again
        elif obj.data.name in armatures and rt.rest != rest_signature(obj):
            rt.dirty = True  # bones edited
        elif not (obj.name in moved or any(r.object_name in moved for r in rt.reader.refs) or _ground_moved(rt, meshes)):
            continue
        if obj.name in transformed or any(r.object_name in transformed for r in rt.reader.refs) or _ground_moved(rt, meshes):
            rt.frames.clear()  # the frames kept were computed with things where they no longer are
        evaluate_object(obj, scene, depsgraph)


def _ground_moved(rt: ObjectRuntime, meshes: set[str]) -> bool:
    """A mesh other than the character's own moved or changed shape under Ground Feet."""
    if not meshes or rt.built is None or not any(s.kind == "GROUND" for s in rt.built.specs):
        return False
    return bool(meshes - rt.built.own_meshes)


@persistent
def _on_render_init(scene: bpy.types.Scene, *_args: Any) -> None:
    last_render.clear()
    _render_thread[0] = threading.current_thread().ident if live_objects(scene) else None


def _render_frame(scene: bpy.types.Scene, depsgraph: Any) -> None:
    """Write each live object's frame for the render evaluating ``depsgraph`` (see the module
    docstring) and note how."""
    frame = float(scene.frame_current_final)
    for obj in live_objects(scene):
        try:
            how = _render_object(obj, scene, depsgraph, frame)
        except (ReferenceError, KeyError, ValueError, MarionetteError):
            how = "missed"
        if _render_thread[0] is not None:  # a render, not another evaluation for rendering
            last_render.setdefault(obj.name, {k: [] for k in RENDER_OUTCOMES})[how].append(_frame_key(frame))


def _render_object(obj: bpy.types.Object, scene: bpy.types.Scene, depsgraph: Any, frame: float) -> str:
    rt = _runtimes.get(obj.session_uid)
    if rt is not None and not rt.dirty and rt.pose is not None:
        kept = rt.frames.get(_frame_key(frame))
        if kept is not None and inputs_match(obj, kept.seen, depsgraph):
            _write_over(obj, rt, depsgraph, kept.rotations, kept.translations)
            return "kept"
        if not _main_thread():
            blended = _blend_kept(rt, frame)
            if blended is not None:
                _write_over(obj, rt, depsgraph, *blended)
                return "blended"
    if not _main_thread():
        return "missed"
    # As the viewport shows it: the view layer at the frame (so targets stand where it puts them
    # and the original pose holds the frame's animation), then the usual evaluation and write.
    with held():
        whole = math.floor(frame)
        scene.frame_set(whole, subframe=frame - whole)
    rt = evaluate_object(obj, scene, bpy.context.evaluated_depsgraph_get())
    return "computed" if rt.pose is not None and not rt.error and not rt.problems else "missed"


def _write_over(obj: bpy.types.Object, rt: ObjectRuntime, depsgraph: Any, rotations: np.ndarray, translations: np.ndarray) -> None:
    """Write a frame's driven channels over the animated channels the render evaluated (its
    second pass takes every channel from the object as written here)."""
    assert rt.pose is not None
    animated = rt.pose.io.read(obj.evaluated_get(depsgraph))
    rt.pose.write(obj, rotations, translations, animated, over=animated, save=_main_thread())
    _wrote.add(obj.name)


def _blend_kept(rt: ObjectRuntime, frame: float) -> tuple[np.ndarray, np.ndarray] | None:
    """A subframe between two kept frames (motion blur): their rotations blended along the
    shorter arc, their translations linearly."""
    lo = math.floor(frame)
    a, b = rt.frames.get(_frame_key(lo)), rt.frames.get(_frame_key(lo + 1))
    if a is None or b is None or frame == lo:
        return None
    w = frame - lo
    qb = np.where((np.einsum("ij,ij->i", a.rotations, b.rotations) < 0.0)[:, None], -b.rotations, b.rotations)
    q = (1.0 - w) * a.rotations + w * qb
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return q, (1.0 - w) * a.translations + w * b.translations


@persistent
def _on_render_end(scene: bpy.types.Scene, *_args: Any) -> None:
    if _render_thread[0] is None:
        return
    _render_thread[0] = None
    for name, log in last_render.items():
        if log["missed"]:
            print(
                f"Marionette: {name!r}: {_frames_text(log['missed'])} rendered without the live controls (not "
                "shown in the viewport since the last change). Prepare Render or Bake Controls first.",
                file=sys.stderr,
            )
        if log["blended"]:
            print(
                f"Marionette: {name!r}: motion blur steps at {_frames_text(log['blended'])} blended from the frames "
                "around them; Prepare Render keeps them exactly.",
                file=sys.stderr,
            )


def _frames_text(frames: list[float]) -> str:
    """``frames 3–7, 12`` from frame numbers."""
    runs: list[list[float]] = []
    for f in sorted(set(frames)):
        if runs and f - runs[-1][1] == 1.0:
            runs[-1][1] = f
        else:
            runs.append([f, f])
    text = ", ".join(f"{a:g}" if a == b else f"{a:g}–{b:g}" for a, b in runs)
    return ("frame " if len(frames) == 1 else "frames ") + text


def shutter_offsets(scene: bpy.types.Scene) -> list[float]:
    """Where a render of a frame evaluates, from the frame: 0, and with motion blur the
    shutter's steps (Cycles: ``2^(steps-1)`` each side for the objects' largest Motion Steps;
    EEVEE: its Motion Steps), placed by the shutter position."""
    render = scene.render
    if not render.use_motion_blur:
        return [0.0]
    sides = max(1, int(getattr(getattr(scene, "eevee", None), "motion_blur_steps", 1)))
    for o in scene.objects:
        cycles = getattr(o, "cycles", None)
        if cycles is not None and getattr(cycles, "use_motion_blur", False):
            sides = max(sides, 2 ** (max(1, int(cycles.motion_steps)) - 1))
    half = 0.5 * float(render.motion_blur_shutter)
    centre = {"START": half, "END": -half}.get(render.motion_blur_position, 0.0)
    return sorted({0.0} | {centre + half * k / sides for k in range(-sides, sides + 1)})


def render_times(scene: bpy.types.Scene, frame: int) -> list[float]:
    """The times a render of ``frame`` evaluates (see :func:`shutter_offsets`)."""
    return [_frame_key(frame + o) for o in shutter_offsets(scene)]


def frames_not_kept(obj: bpy.types.Object, scene: bpy.types.Scene, start: int, end: int) -> list[int]:
    """The frames of ``start``..``end`` a render on another thread would not find all kept (the
    frame and, with motion blur, its shutter's steps)."""
    rt = _runtimes.get(obj.session_uid)
    kept = {} if rt is None or rt.dirty else rt.frames
    offsets = shutter_offsets(scene)
    return [f for f in range(start, end + 1) if any(_frame_key(f + o) not in kept for o in offsets)]


def prepare_render(scene: bpy.types.Scene, start: int, end: int, progress: Callable[[int], None] | None = None) -> int:
    """Show frames ``start``..``end`` once on the main thread, with their motion blur steps
    (springs run from the first), so a render on another thread finds each one kept; the
    current frame is put back. Returns how many times were shown."""
    keep = (scene.frame_current, scene.frame_subframe)
    shown = 0
    try:
        for k, f in enumerate(range(start, end + 1)):
            for t in render_times(scene, f):
                whole = math.floor(t)
                scene.frame_set(whole, subframe=t - whole)
                shown += 1
            if progress is not None:
                progress(k)
    finally:
        scene.frame_set(keep[0], subframe=keep[1])
    return shown


@persistent
def _on_undo(*_args: Any) -> None:
    # Undo and redo rebuild every datablock: nothing the runtimes reference survives. The
    # channels' base values come back from the object's ID property with the channels.
    for rt in _runtimes.values():
        rt.dirty = True
        rt.built = rt.instance = rt.pose = rt.reader = rt.last = None
        rt.frames.clear()
    _wrote.clear()
    _live_names.clear()


@persistent
def _on_load(*_args: Any) -> None:
    _runtimes.clear()
    _live_names.clear()
    _validated.clear()
    _wrote.clear()
    _render_thread[0] = None


_HANDLERS = (
    ("frame_change_post", _on_frame_change),
    ("depsgraph_update_post", _on_depsgraph_update),
    ("render_init", _on_render_init),
    ("render_complete", _on_render_end),
    ("render_cancel", _on_render_end),
    ("undo_post", _on_undo),
    ("redo_post", _on_undo),
    ("load_post", _on_load),
)


# --- called by properties and operators ------------------------------------------------------


def _refresh(obj: bpy.types.Object) -> None:
    if _paused():
        return
    if obj is None or obj.type != "ARMATURE" or not obj.marionette_controls.live_preview:
        return
    context = bpy.context
    scene = context.scene
    if scene is None or scene.objects.get(obj.name) is None:
        return
    evaluate_object(obj, scene, context.evaluated_depsgraph_get())


def definitions_changed(obj: bpy.types.Object) -> None:
    rt = _runtimes.get(obj.session_uid)
    if rt is not None:
        rt.dirty = True
    _refresh(obj)


def state_changed(obj: bpy.types.Object) -> None:
    rt = _runtimes.get(obj.session_uid)
    if rt is not None:
        _apply_states(obj, rt)
    _refresh(obj)


def live_toggled(obj: bpy.types.Object) -> None:
    _live_names.clear()
    if obj.marionette_controls.live_preview:
        _refresh(obj)
    else:
        _drop(obj, restore=not _skip_restore[0])


_skip_restore = [False]


def stop(obj: bpy.types.Object, restore: bool = True) -> None:
    """Turn the live preview of ``obj`` off (its output removed from the pose when ``restore``)."""
    if not obj.marionette_controls.live_preview:
        _drop(obj, restore)
        return
    _skip_restore[0] = not restore
    try:
        obj.marionette_controls.live_preview = False
    finally:
        _skip_restore[0] = False
    _drop(obj, restore)


def reset(obj: bpy.types.Object) -> None:
    """Forget smoothing and spring state; the current frame is shown again from scratch."""
    rt = _runtimes.get(obj.session_uid)
    if rt is not None and rt.instance is not None:
        rt.instance.reset()
        rt.frames.clear()
    _refresh(obj)


def refresh(obj: bpy.types.Object) -> None:
    """Evaluate the current frame again (after a change the handlers do not see)."""
    rt = _runtimes.get(obj.session_uid)
    if rt is not None:
        rt.dirty = True
    _refresh(obj)


_validated: dict[int, tuple[Any, dict[int, str]]] = {}


def _rows_key(obj: bpy.types.Object) -> Any:
    controls = obj.marionette_controls.controls
    # Every setting the rows' class declares (each row is an instance of that property group).
    names = tuple(type(controls[0]).__annotations__) if len(controls) else ()
    rows = []
    for r in controls:
        values = []
        for n in names:
            v = getattr(r, n)
            values.append(v.name if isinstance(v, bpy.types.ID) else (tuple(v) if hasattr(v, "__len__") and not isinstance(v, str) else v))
        rows.append(tuple(values))
    colliders = tuple(
        (c.name, c.group, c.kind, c.bone, tuple(c.offset), tuple(c.tail), c.radius) for c in obj.marionette_controls.colliders
    )
    return (tuple(rows), colliders, rest_signature(obj))


def validation(obj: bpy.types.Object) -> dict[int, str]:
    """Why each control row cannot run (row index -> reason), for the panel; the live runtime's
    when there is one, else built once per change of the rows."""
    rt = _runtimes.get(obj.session_uid)
    if rt is not None and rt.built is not None and not rt.dirty:
        return rt.built.errors
    key = _rows_key(obj)
    hit = _validated.get(obj.session_uid)
    if hit is not None and hit[0] == key:
        return hit[1]
    try:
        errors = build_controls(obj).errors
    except MarionetteError as exc:
        errors = dict.fromkeys(range(len(obj.marionette_controls.controls)), str(exc))
    _validated[obj.session_uid] = (key, errors)
    return errors


def summary(obj: bpy.types.Object) -> dict[str, Any]:
    """Per control: what the last evaluation did, in plain figures (for the panel)."""
    rt = _runtimes.get(obj.session_uid)
    if rt is None:
        return {}
    out: dict[str, Any] = {}
    if rt.built is None:
        return out
    for s in rt.built.specs:
        r = rt.reports.get(s.name)
        if r is None:
            continue
        details = r.details or {}
        reset_reason = ""
        if "reset" in details:
            reset_reason = str(np.asarray(details["reset"])[-1])
        stop_reason = str(np.asarray(details["stop"])[-1]) if "stop" in details else ""
        penetration = float(np.asarray(details["penetration"])[-1]) if "penetration" in details else None
        out[s.name] = {
            "row": s.row,
            "ran": bool(np.asarray(r.ran)[-1]),
            "skipped": bool(np.asarray(r.skipped)[-1]),
            "residual": float(np.asarray(r.residual)[-1]),
            "converged": bool(np.asarray(r.converged)[-1]),
            "limited": bool(np.asarray(r.limited)[-1]),
            "iterations": int(np.asarray(r.iterations)[-1]),
            "reset": reset_reason,
            "stop": stop_reason,
            # Springs: the deepest a segment end point is inside a collider at this frame.
            "penetration": penetration,
        }
    return out


def add_handlers(pairs: tuple[tuple[str, Callable[..., None]], ...]) -> None:
    """Append each ``(handler list name, function)`` to Blender's handlers, once."""
    for name, fn in pairs:
        handlers = getattr(bpy.app.handlers, name)
        if fn not in handlers:
            handlers.append(fn)


def remove_handlers(pairs: tuple[tuple[str, Callable[..., None]], ...]) -> None:
    for name, fn in pairs:
        handlers = getattr(bpy.app.handlers, name)
        while fn in handlers:
            handlers.remove(fn)


def register() -> None:
    add_handlers(_HANDLERS)


def unregister() -> None:
    remove_handlers(_HANDLERS)
    for obj in bpy.data.objects:
        if obj.session_uid in _runtimes:
            _drop(obj, restore=True)
    _runtimes.clear()
    _validated.clear()
    _wrote.clear()
    _render_thread[0] = None
    last_render.clear()
    _live_names.clear()
    _hold[0] = 0
