"""Live preview: the viewport shows each armature's animation with its controls applied, as the
timeline plays or is scrubbed (SPEC 8.3).

Per object with ``marionette_controls.live_preview`` on, a runtime (its core
:class:`~marionette.core.controls.ControlInstance`, the :class:`~.control_bridge.AnimatedPose`
reader, the last reports) is kept by the object's ``session_uid``: two objects that share one
Armature have separate controls, instances and spring state. On ``frame_change_post`` each one
does one bulk read of the animated pose (the action's keys, sampled once, in numpy; never the
pose bones after its own write), one core call, one bulk write of the driven channels. Springs
are given the scene time of the frame, so scrubbing backwards or jumping recomputes them from the
core's cached states, deterministically.

Renders never run controls on a render thread. A render started on the main thread (the command
line, ``bpy.ops.render.render()`` from a script, ``blender -b … -f/-a``) is prepared there: on
``render_init`` each live object's action is held aside (kept on the object, so nothing is lost
if the render is interrupted) so the render's own animation pass leaves the pose channels alone,
on ``render_pre`` the frame's pose is computed exactly as the viewport computes it and written,
and on ``render_complete`` / ``render_cancel`` the action is put back.

A render running on another thread (F12 and Ctrl+F12 in the interface) is given what the main
thread computed: every frame the viewport shows is kept (:class:`RenderFrame`, the driven
channels and the placements of the armature and its targets they were computed from), and on the
render's ``frame_change_post`` (after its animation pass, before the second pass that follows a
handler's edits) a kept frame whose inputs stand where the render evaluated them is written over
the rendered frame's animated channels. A frame not kept (never shown since the last change, or
its targets since moved) renders without the controls and is reported; :func:`prepare_render`
shows a range once to keep it all. While such a render runs, the main thread's handlers pause.

Handlers are persistent (a loaded file keeps its live preview) and removed by :func:`unregister`,
which also puts every previewed pose back to its animation.
"""

# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import bpy
import numpy as np
from bpy.app.handlers import persistent

from ..core.controls import ControlInstance, ControlReport
from ..core.errors import MarionetteError
from . import compat
from .control_bridge import (
    AnimatedPose,
    BuiltControls,
    TargetReader,
    build_controls,
    evaluate,
    forget_live_property,
    inputs_match,
    pose_problems,
)


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
#: Render in progress on the main thread: held actions by object name.
_rendering: dict[str, bool] = {}
#: A render is running on another thread (the main thread's handlers pause meanwhile).
_render_thread = [False]
#: The last render on another thread, per object name: the frames written from what the main
#: thread kept ("kept") and those rendered without the controls ("missed").
last_render: dict[str, dict[str, list[float]]] = {}
#: Per scene (by pointer): its object count and the names of its live objects, as last found
#: (see _live_objects).
_live_names: dict[int, tuple[int, list[str]]] = {}


def rest_signature(obj: bpy.types.Object) -> bytes:
    bones = obj.data.bones
    buf = np.empty(len(bones) * 16, dtype=np.float32)
    bones.foreach_get("matrix_local", buf)
    return buf.tobytes() + "\n".join(b.name for b in bones).encode()


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _paused() -> bool:
    """The handlers do nothing: held, off the main thread, or while a render runs."""
    if _render_thread[0] and not bpy.app.is_job_running("RENDER"):
        _render_thread[0] = False  # a render that ended without telling
    return bool(_hold[0] or _rendering or _render_thread[0]) or not _main_thread()


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
    rt.built = rt.instance = rt.pose = rt.reader = None
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
    for s in rt.built.specs:
        if s.row < len(rows):
            row = rows[s.row]
            rt.instance.set_enabled(s.name, bool(row.enabled))
            rt.instance.set_weight(s.name, float(row.weight))


def evaluate_object(obj: bpy.types.Object, scene: bpy.types.Scene, depsgraph: Any, render: bool = False) -> ObjectRuntime:
    """Show the current frame of ``obj`` with its controls (main thread only). For a render the
    runtime is used as it stands (the action is held aside, so it must not be rebuilt)."""
    rt = _runtimes.get(obj.session_uid)
    if rt is None:
        rt = _runtimes[obj.session_uid] = ObjectRuntime(obj.name)
    t0 = time.perf_counter()
    try:
        if not render and (rt.dirty or rt.problems or (rt.pose is not None and rt.pose.stale(obj))):
            _build(obj, rt, scene)
        if rt.built is None or rt.instance is None or rt.pose is None or rt.reader is None:
            return rt
        missing = rt.reader.missing()
        if missing:
            rt.error = "; ".join(missing)
            return rt
        result, current, frames = evaluate(obj, rt.built, rt.instance, rt.pose, rt.reader, None, scene, depsgraph)
        rotations, translations = result.rotations[0], result.translations[0]
        rt.pose.write(obj, rotations, translations, current, over=rt.pose.last if render else None)
        _wrote.add(obj.name)
        rt.reports = dict(result.reports)
        rt.frame = float(frames[0])
        if not render and rt.reader.seen is not None and len(rt.frames) < KEEP_FRAMES:
            rt.frames[_frame_key(rt.frame)] = RenderFrame(rotations.copy(), translations.copy(), rt.reader.seen)
        rt.error = ""
    except (MarionetteError, ValueError, KeyError, ReferenceError) as exc:
        rt.error = str(exc)
    rt.seconds = time.perf_counter() - t0
    return rt


def _live_objects(scene: bpy.types.Scene) -> list[bpy.types.Object]:
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
    if depsgraph is not None and depsgraph.mode == "RENDER" and _render_thread[0] and not _main_thread():
        _render_kept(scene, depsgraph)
        return
    if _paused():
        return
    if depsgraph is not None and depsgraph.mode != "VIEWPORT":
        return
    for obj in _live_objects(scene):
        evaluate_object(obj, scene, depsgraph or bpy.context.evaluated_depsgraph_get())


@persistent
def _on_depsgraph_update(scene: bpy.types.Scene, depsgraph: Any) -> None:
    """Follow targets moved and keys edited between frame changes."""
    _live_names.clear()  # an edit may have added, removed or renamed a live object
    if _paused():
        return
    live = _live_objects(scene)
    if not live:
        _wrote.clear()
        return
    ours = set(_wrote)
    _wrote.clear()
    moved: set[str] = set()
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
        rt.frames.clear()  # the frames kept were computed with things where they no longer are
        evaluate_object(obj, scene, depsgraph)


def _ground_moved(rt: ObjectRuntime, meshes: set[str]) -> bool:
    """A mesh other than the character's own moved or changed shape under Ground Feet."""
    if not meshes or rt.built is None or not any(s.kind == "GROUND" for s in rt.built.specs):
        return False
    return bool(meshes - rt.built.own_meshes)


@persistent
def _on_render_init(scene: bpy.types.Scene, *_args: Any) -> None:
    if not _main_thread():
        last_render.clear()
        _render_thread[0] = bool(_live_objects(scene))
        return
    for obj in _live_objects(scene):
        _hold_action(obj)


def _render_kept(scene: bpy.types.Scene, depsgraph: Any) -> None:
    """On a render thread: write each live object's frame as the main thread computed it, if it
    was kept and its inputs stand where this render evaluated them (no control runs here)."""
    frame = _frame_key(scene.frame_current_final)
    for obj in _live_objects(scene):
        log = last_render.setdefault(obj.name, {"kept": [], "missed": []})
        rt = _runtimes.get(obj.session_uid)
        kept = None if rt is None or rt.dirty or rt.pose is None else rt.frames.get(frame)
        try:
            if rt is not None and rt.pose is not None and kept is not None and inputs_match(obj, kept.seen, depsgraph):
                animated = rt.pose.io.read(obj.evaluated_get(depsgraph))
                rt.pose.write(obj, kept.rotations, kept.translations, animated, over=animated, save=False)
                log["kept"].append(frame)
                continue
        except (ReferenceError, KeyError, ValueError, MarionetteError):
            pass
        log["missed"].append(frame)


@persistent
def _on_render_pre(scene: bpy.types.Scene, *_args: Any) -> None:
    if not _main_thread() or not any(_rendering.values()):
        return
    # The render has set the frame but the view layer is still at the previous one: evaluate it
    # there (with the handlers held) so targets stand where the frame puts them.
    with held():
        scene.frame_set(scene.frame_current, subframe=scene.frame_subframe)
    depsgraph = bpy.context.evaluated_depsgraph_get()
    for obj in _live_objects(scene):
        if _rendering.get(obj.name):
            evaluate_object(obj, scene, depsgraph, render=True)


@persistent
def _on_render_end(scene: bpy.types.Scene, *_args: Any) -> None:
    if not _main_thread():
        if _render_thread[0]:
            _render_thread[0] = False
            for name, log in last_render.items():
                if log["missed"]:
                    print(
                        f"Marionette: {name!r}: {_frames_text(log['missed'])} rendered without the live controls (not "
                        "shown in the viewport since the last change). Prepare Render or Bake Controls first.",
                        file=sys.stderr,
                    )
        return
    for name in list(_rendering):
        obj = bpy.data.objects.get(name)
        if obj is not None:
            _release_action(obj)
    _rendering.clear()


def _hold_action(obj: bpy.types.Object) -> None:
    """Evaluate the object on the main thread, then keep its action on its settings and take it
    off the object for the render, so the render's animation pass keeps the pose written here."""
    settings = obj.marionette_controls
    rt = evaluate_object(obj, bpy.context.scene, bpy.context.evaluated_depsgraph_get())
    _rendering[obj.name] = rt.pose is not None
    ad = obj.animation_data
    if rt.pose is None or ad is None or ad.action is None or settings.holding:
        return
    settings.held_action = ad.action
    settings.held_slot = ad.action_slot.identifier if compat.SLOTTED_ACTIONS and ad.action_slot is not None else ""
    settings.held_use_nla = ad.use_nla
    settings.holding = True
    ad.action = None
    ad.use_nla = False


def _release_action(obj: bpy.types.Object) -> None:
    settings = obj.marionette_controls
    if not settings.holding:
        return
    action = settings.held_action
    slot = None
    if action is not None and compat.SLOTTED_ACTIONS:
        slot = next((s for s in action.slots if s.identifier == settings.held_slot), None)
    ad = obj.animation_data or obj.animation_data_create()
    compat.assign_action(obj, action, slot)
    ad.use_nla = settings.held_use_nla
    settings.held_action = None
    settings.held_slot = ""
    settings.holding = False


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


def frames_not_kept(obj: bpy.types.Object, start: int, end: int) -> list[int]:
    """The frames of ``start``..``end`` a render on another thread would show without controls."""
    rt = _runtimes.get(obj.session_uid)
    kept = {} if rt is None or rt.dirty else rt.frames
    return [f for f in range(start, end + 1) if _frame_key(f) not in kept]


def prepare_render(scene: bpy.types.Scene, start: int, end: int, progress: Callable[[int], None] | None = None) -> int:
    """Show frames ``start``..``end`` once on the main thread (springs run from ``start``) so a
    render on another thread finds each one kept; the current frame is put back. Returns how
    many frames were shown."""
    keep = (scene.frame_current, scene.frame_subframe)
    try:
        for k, f in enumerate(range(start, end + 1)):
            scene.frame_set(f)
            if progress is not None:
                progress(k)
    finally:
        scene.frame_set(keep[0], subframe=keep[1])
    return max(0, end - start + 1)


@persistent
def _on_undo(*_args: Any) -> None:
    # Undo and redo rebuild every datablock: nothing the runtimes reference survives. The
    # channels' base values come back from the object's ID property with the channels.
    for rt in _runtimes.values():
        rt.dirty = True
        rt.built = rt.instance = rt.pose = rt.reader = None
        rt.frames.clear()
    _wrote.clear()
    _live_names.clear()


@persistent
def _on_load(*_args: Any) -> None:
    _runtimes.clear()
    _live_names.clear()
    _validated.clear()
    _wrote.clear()
    _rendering.clear()
    _render_thread[0] = False
    for obj in bpy.data.objects:
        settings = getattr(obj, "marionette_controls", None)
        if settings is not None and settings.holding and obj.library is None:
            _release_action(obj)  # a render interrupted before it could put the action back


_HANDLERS = (
    ("frame_change_post", _on_frame_change),
    ("depsgraph_update_post", _on_depsgraph_update),
    ("render_init", _on_render_init),
    ("render_pre", _on_render_pre),
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
    from .control_properties import MarionetteControl

    names = tuple(MarionetteControl.__annotations__)
    rows = []
    for r in obj.marionette_controls.controls:
        values = []
        for n in names:
            v = getattr(r, n)
            values.append(v.name if isinstance(v, bpy.types.ID) else (tuple(v) if hasattr(v, "__len__") and not isinstance(v, str) else v))
        rows.append(tuple(values))
    return (tuple(rows), rest_signature(obj))


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
        }
    return out


def register() -> None:
    for name, fn in _HANDLERS:
        handlers = getattr(bpy.app.handlers, name)
        if fn not in handlers:
            handlers.append(fn)


def unregister() -> None:
    for name, fn in _HANDLERS:
        handlers = getattr(bpy.app.handlers, name)
        while fn in handlers:
            handlers.remove(fn)
    for obj in bpy.data.objects:
        if obj.session_uid in _runtimes:
            with contextlib.suppress(ReferenceError, MarionetteError, KeyError, ValueError):
                if obj.marionette_controls.holding:
                    _release_action(obj)
            _drop(obj, restore=True)
    _runtimes.clear()
    _validated.clear()
    _wrote.clear()
    _rendering.clear()
    _render_thread[0] = False
    last_render.clear()
    _live_names.clear()
    _hold[0] = 0
