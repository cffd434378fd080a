"""Load a clip or character file into the current scene and hand back what it brought.

One entry point, :func:`load_file`, dispatching on the extension:

* ``.bvh`` -- read first with :mod:`core.formats.bvh` (which validates the whole file and names the line
  of any problem), then imported with Blender's importer, keeping the file's frame numbers
  (``use_fps_scale=False``, first frame 1) and Euler channels in the file's own order. Z-up files
  (MakeHuman, 3ds Max) are recognised from their own rest hierarchy and imported without the
  Y-up to Z-up turn, so they stand up.
* ``.fbx`` -- Blender's importer with ``ignore_leaf_bones=False``: that option drops *every* bone
  that is the only child of its parent and has no children (it cannot tell an exporter's
  ``*_end`` marker from a real head or finger tip), so it would delete real bones of files that
  carry no end markers. The ``*_end`` bones it keeps carry no skin and no meaningful keys; later
  stages ignore them. Actions arrive as ``Armature|Armature|Clip``. The importer sets the scene's
  frame rate to the file's; that rate is recorded and the scene's is restored. A bone the
  importer connects to its parent although the file keys its location (the hips under a ``Root``
  bone) is disconnected, so its travel plays.
* ``.glb`` / ``.gltf`` -- Blender's importer with ``bone_heuristic='FORTUNE'``: the default
  (``'BLENDER'``) keeps glTF's node axes, which for files converted from COLLADA (Khronos
  RiggedFigure, CesiumMan) leaves bones pointing up to 157 degrees away from their only child;
  ``'FORTUNE'`` points every such bone at its child (measured: under 0.05 degrees) while world
  joint positions at every frame stay the same. Bone display shapes are not created. Every glTF
  animation arrives as an action (the importer stacks them in NLA tracks); all are returned.
* ``.blend`` -- appends the file's armature objects with their parents (whose transforms place
  them) and children (their meshes), and every action.

Every returned action carries the custom property ``marionette_fps``: the frame rate its frame
numbers count at (frame 1 is time zero and frame ``f`` is ``(f - 1) / fps`` seconds later, the
convention of ``Clip.frame_numbers``), so readers recover the clip's own timing whatever the
scene's rate.

Any failure raises :class:`~marionette.core.errors.FileFormatError` naming the file and the
problem, after removing every data-block the failed import added and restoring the scene's
frame rate, frame range, current frame, selection and active object.
"""

# The bpy stubs type Object.data as a union of every data type, context members as optional and
# many RNA functions as returning None; those reports say nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import bpy

from ..core.batch.pack_limits import why_unreadable
from ..core.errors import FileFormatError, MarionetteError
from ..core.formats.bvh import BvhData, detect_up_axis, read_bvh
from . import compat

FPS_PROPERTY = "marionette_fps"

SUPPORTED_EXTENSIONS = (".bvh", ".fbx", ".glb", ".gltf", ".blend")

# Collections of bpy.data whose new members a failed import must remove. Screens, window
# managers and workspaces belong to the UI and are never created by importers.
_ID_COLLECTIONS = (
    "actions", "armatures", "brushes", "cache_files", "cameras", "collections", "curves", "fonts",
    "grease_pencils", "hair_curves", "images", "lattices", "libraries", "lightprobes", "lights",
    "linestyles", "masks", "materials", "meshes", "metaballs", "movieclips", "node_groups",
    "objects", "paint_curves", "palettes", "particles", "pointclouds", "scenes", "sounds",
    "speakers", "texts", "textures", "volumes", "worlds",
)  # fmt: skip


@dataclass
class LoadedFile:
    """What :func:`load_file` brought into the scene."""

    path: str
    armatures: list[bpy.types.Object] = field(default_factory=list)
    actions: list[bpy.types.Action] = field(default_factory=list)
    objects: list[bpy.types.Object] = field(default_factory=list)
    #: The clip's own frame rate (frames per second), also stored on each action.
    fps: float = 24.0


def scene_fps(scene: bpy.types.Scene | None = None) -> float:
    scene = scene or bpy.context.scene
    return float(scene.render.fps) / float(scene.render.fps_base)


def load_file(path: str | os.PathLike[str], require_armature: bool = True) -> LoadedFile:
    """Import ``path`` into the current scene; see the module docstring for each format.

    Raises :class:`FileFormatError` (scene left as it was) for a missing, unsupported, truncated
    or corrupt file, an importer failure, or -- with ``require_armature`` -- a file without an
    armature that has bones.
    """
    path = os.path.abspath(os.fspath(path))
    name = os.path.basename(path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in SUPPORTED_EXTENSIONS:
        raise FileFormatError(
            f"{name}: unsupported file type {ext or '(no extension)'!r}; Marionette reads "
            + ", ".join(SUPPORTED_EXTENSIONS)
        )
    why = why_unreadable(path)
    if why is not None:
        raise FileFormatError(f"{name}: {why} ({path})")

    loaders: dict[str, Callable[[str], tuple[float, list[bpy.types.Action] | None]]] = {
        ".bvh": _load_bvh,
        ".fbx": _load_fbx,
        ".glb": _load_gltf,
        ".gltf": _load_gltf,
        ".blend": _load_blend,
    }
    state = _SceneState.capture()
    try:
        compat.enable_importers()
        _ensure_object_mode()
        fps, ordered_actions = loaders[ext](path)
        if ext == ".blend":
            state.purge_new_orphans(keep=("actions",))
        new = state.new_ids()
        objects = [o for o in new.get("objects", []) if isinstance(o, bpy.types.Object)]
        armatures = [o for o in objects if o.type == "ARMATURE"]
        if require_armature:
            if not armatures:
                raise FileFormatError(f"{name}: the file has no armature (no skeleton to read or retarget)")
            if not any(len(a.data.bones) for a in armatures):
                raise FileFormatError(f"{name}: the file's armature has no bones")
        new_actions = [a for a in new.get("actions", []) if isinstance(a, bpy.types.Action)]
        actions = _order_actions(ordered_actions or [], armatures, new_actions)
        if ext == ".fbx":
            _free_moving_connected_bones(armatures, actions)
        for action in actions:
            if action.get(FPS_PROPERTY) is None:
                action[FPS_PROPERTY] = float(fps)
        state.restore_scene_settings()
        return LoadedFile(path=path, armatures=armatures, actions=actions, objects=objects, fps=float(fps))
    except FileFormatError:
        state.roll_back()
        raise
    except MarionetteError as exc:
        state.roll_back()
        raise FileFormatError(f"{name}: {exc}") from exc
    except Exception as exc:
        state.roll_back()
        raise FileFormatError(f"{name}: {_importer_message(exc)}") from exc


# --- formats ---------------------------------------------------------------------------------


def _load_bvh(path: str) -> tuple[float, None]:
    data: BvhData = read_bvh(path)  # validates every line; raises FileFormatError naming it
    if data.frame_count == 0:
        raise FileFormatError(f"{os.path.basename(path)}: the BVH file has no frames of motion")
    # Blender's importer turns the file from Y-up to Z-up by default; a Z-up file needs the
    # identity conversion instead.
    axes: dict[str, Any] = {"axis_forward": "Y", "axis_up": "Z"} if detect_up_axis(data) == "Z" else {}
    result = bpy.ops.import_anim.bvh(
        filepath=path,
        target="ARMATURE",
        rotate_mode="NATIVE",
        use_fps_scale=False,
        update_scene_fps=False,
        update_scene_duration=False,
        frame_start=1,
        **axes,
    )
    _check_finished(result, "BVH", path)
    return data.fps, None


def _load_fbx(path: str) -> tuple[float, None]:
    with compat.fbx_import_fixes():
        result = bpy.ops.import_scene.fbx(filepath=path, ignore_leaf_bones=False, use_anim=True)
    _check_finished(result, "FBX", path)
    # The importer has just set the scene to the file's rate (restored by the caller).
    return scene_fps(), None


def _load_gltf(path: str) -> tuple[float, list[bpy.types.Action]]:
    scene = bpy.context.scene
    # The glTF importer lays keys out at time * fps * fps_base (sic): record that exact rate.
    fps = float(scene.render.fps) * float(scene.render.fps_base)
    result = bpy.ops.import_scene.gltf(filepath=path, bone_heuristic="FORTUNE", disable_bone_shape=True)
    _check_finished(result, "glTF", path)
    return fps, []


def _load_blend(path: str) -> tuple[float, list[bpy.types.Action]]:
    libraries: Any = bpy.data.libraries
    with libraries.load(path, link=False) as (data_from, data_to):
        data_to.objects = list(data_from.objects)
        data_to.actions = list(data_from.actions)
    loaded = [o for o in data_to.objects if o is not None]
    actions = [a for a in data_to.actions if a is not None]
    keep: set[Any] = set()
    for obj in loaded:
        if obj.type != "ARMATURE":
            continue
        keep.add(obj)
        p = obj.parent
        while p is not None:  # parents place the armature (a scaled, rotated empty...)
            keep.add(p)
            p = p.parent
        keep.update(obj.children_recursive)
    drop = [o for o in loaded if o not in keep]
    if drop:
        bpy.data.batch_remove(drop)
    collection = bpy.context.collection or bpy.context.scene.collection
    for obj in loaded:
        if obj in keep and obj.name not in collection.objects:
            collection.objects.link(obj)
    fps = scene_fps()
    return fps, actions


def _moving_bones(actions: list[bpy.types.Action]) -> set[str]:
    """Bones whose location the actions key to more than one value."""
    names: set[str] = set()
    for action in actions:
        for layer in action.layers:
            for strip in layer.strips:
                for bag in strip.channelbags:
                    for fc in bag.fcurves:
                        path = fc.data_path
                        if not (path.startswith('pose.bones["') and path.endswith('"].location')):
                            continue
                        values = [k.co[1] for k in fc.keyframe_points]
                        if values and max(values) - min(values) > 1e-6:
                            names.add(bpy.utils.unescape_identifier(path[len('pose.bones["') : -len('"].location')]))
    return names


def _free_moving_connected_bones(armatures: list[bpy.types.Object], actions: list[bpy.types.Action]) -> None:
    """Blender's FBX importer connects a bone to its parent when the parent's tail, which it
    places itself, lands on the bone's head (a ``Root`` bone sized to reach the hips); Blender
    then ignores the bone's location keys, and a clip that moves the hips plays in place. The
    file keys those locations and every other tool plays them: such bones are disconnected
    (their rest is unchanged)."""
    moving = _moving_bones(actions)
    view_layer = bpy.context.view_layer
    for arm in armatures:
        stuck = [b.name for b in arm.data.bones if b.use_connect and b.name in moving]
        if not stuck:
            continue
        active = view_layer.objects.active
        view_layer.objects.active = arm
        bpy.ops.object.mode_set(mode="EDIT")
        try:
            for name in stuck:
                arm.data.edit_bones[name].use_connect = False
        finally:
            bpy.ops.object.mode_set(mode="OBJECT")
            view_layer.objects.active = active


def _check_finished(result: Any, importer: str, path: str) -> None:
    if "FINISHED" not in set(result):
        raise FileFormatError(f"{os.path.basename(path)}: Blender's {importer} importer refused the file")


def _order_actions(
    ordered: list[bpy.types.Action], armatures: list[bpy.types.Object], new_actions: list[bpy.types.Action]
) -> list[bpy.types.Action]:
    """New actions, those of the armatures first: NLA strips in track order, then the active
    action, then the rest in name order."""
    new = set(new_actions)
    out: list[bpy.types.Action] = []
    seen: set[Any] = set()

    def add(a: bpy.types.Action | None) -> None:
        if a is not None and a in new and a not in seen:
            seen.add(a)
            out.append(a)

    for a in ordered:
        add(a)
    for arm in armatures:
        ad = arm.animation_data
        if ad is None:
            continue
        for track in ad.nla_tracks:
            for strip in track.strips:
                add(strip.action)
        add(ad.action)
    for a in sorted(new_actions, key=lambda a: a.name):
        add(a)
    return out


def _importer_message(exc: BaseException) -> str:
    """The useful line of an importer's exception (bpy.ops wraps the whole traceback)."""
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith(("Location:", "File ", "^", "Traceback", "Error: Python"))]
    msg = lines[-1] if lines else type(exc).__name__
    msg = msg.removeprefix("Error: ")
    return f"the file could not be imported ({msg[:300]})"


def _ensure_object_mode() -> None:
    obj = bpy.context.view_layer.objects.active
    if obj is not None and obj.mode != "OBJECT":
        bpy.ops.object.mode_set(mode="OBJECT")


# --- scene bookkeeping -----------------------------------------------------------------------


@dataclass
class _SceneState:
    """What an import may change, captured before it so a failure can be undone exactly."""

    ids: dict[str, set[Any]]
    scene: Any
    render: tuple[int, float]
    frames: tuple[int, int, int, float]
    active: Any
    selected: list[Any]

    @classmethod
    def capture(cls) -> _SceneState:
        ctx = bpy.context
        scene = ctx.scene
        ids = {name: set(coll) for name in _ID_COLLECTIONS if (coll := getattr(bpy.data, name, None)) is not None}
        return cls(
            ids=ids,
            scene=scene,
            render=(scene.render.fps, scene.render.fps_base),
            frames=(scene.frame_start, scene.frame_end, scene.frame_current, scene.frame_subframe),
            active=ctx.view_layer.objects.active,
            selected=[o for o in ctx.view_layer.objects if o.select_get()],
        )

    def new_ids(self) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        for name, before in self.ids.items():
            coll = getattr(bpy.data, name)
            out[name] = [i for i in coll if i not in before]
        return out

    def restore_scene_settings(self) -> None:
        s = self.scene
        if (s.render.fps, s.render.fps_base) != self.render:
            s.render.fps, s.render.fps_base = self.render
        start, end, current, sub = self.frames
        if (s.frame_start, s.frame_end) != (start, end):
            s.frame_start, s.frame_end = start, end
        if (s.frame_current, s.frame_subframe) != (current, sub):
            s.frame_set(current, subframe=sub)

    def purge_new_orphans(self, keep: tuple[str, ...] = ()) -> None:
        """Remove data-blocks added since :meth:`capture` that nothing uses any more (what the
        objects an append did not keep brought with them); collections named in ``keep`` stay."""
        while True:
            orphans = [
                i
                for name, ids in self.new_ids().items()
                if name not in keep and name != "scenes"
                for i in ids
                if i.users == 0 and not i.use_fake_user
            ]
            if not orphans:
                return
            bpy.data.batch_remove(orphans)

    def roll_back(self) -> None:
        """Remove every data-block added since :meth:`capture` and restore the scene."""
        try:
            if bpy.context.mode != "OBJECT":
                bpy.ops.object.mode_set(mode="OBJECT")
        except RuntimeError:
            pass
        new = [i for ids in self.new_ids().values() for i in ids]
        if new:
            bpy.data.batch_remove(new)
        # Removing objects can orphan data the import brought indirectly; batch_remove already
        # took every new ID, so nothing new remains.
        self.restore_scene_settings()
        view_layer = bpy.context.view_layer
        view_layer.update()  # drop the removed objects from the view layer's lists
        for o in view_layer.objects:
            if o is not None:
                o.select_set(o in self.selected)
        if self.active is None or self.active.name in view_layer.objects:
            view_layer.objects.active = self.active
